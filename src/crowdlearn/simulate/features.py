"""Crowds on items with features: feature generators and feature-dependent annotators.

* :func:`class_features`: Gaussian class clusters, a stand-in for image features.
* :func:`annotate`: planted confusions on given true labels (and features), e.g.
  ``load_digits().target``.
* :func:`outlier_classes` and :func:`instance_outliers`: COINNet-style instance-dependent
  errors (Nguyen et al., NeurIPS 2024): items that look like another class in feature space
  are answered as that class by every annotator with a high probability.

All draw through :func:`~crowdlearn.simulate.crowds.crowd`; confusions are
``[worker, true, answered]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .crowds import SimulatedLabels, crowd
from .workers import Range, WorkerSpec

__all__ = ["annotate", "class_features", "instance_outliers", "outlier_classes"]


def _check(y, X, n_classes=None):
    y = np.asarray(y)
    if y.ndim != 1 or len(y) == 0 or y.dtype.kind not in "iu" or y.min() < 0:
        raise ValueError("y must be a non-empty 1-D array of non-negative integer class codes")
    k = int(y.max()) + 1 if n_classes is None else int(n_classes)
    if k < 2 or y.max() >= k:
        raise ValueError(f"need at least 2 classes and y < n_classes, got K={k}")
    if X is not None:
        X = np.asarray(X, dtype=float)
        if X.ndim != 2 or len(X) != len(y):
            raise ValueError(f"X must be 2-D with one row per label of y ({len(y)}), got shape {X.shape}")
    return y.astype(np.int64), X, k


def class_features(
    truth: np.ndarray, n_classes: int, n_features: int = 10, separation: float = 2.5, seed: Any = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian class clusters ``x = mu_y + N(0, I)``.

    The class centres ``mu`` are random directions scaled to norm ``separation``: the larger
    it is, the easier a classifier separates the classes from the features alone.

    Returns
    -------
    X : ndarray, shape (len(truth), n_features)
    centres : ndarray, shape (n_classes, n_features)
    """
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=(n_classes, n_features))
    mu *= separation / np.linalg.norm(mu, axis=1, keepdims=True)
    return mu[np.asarray(truth)] + rng.normal(size=(len(truth), n_features)), mu


def annotate(y, confusions, labels_per_task=3, X=None, seed=0, n_classes=None):
    """Annotators with planted confusions on given true labels.

    Each item gets ``labels_per_task`` distinct uniformly random workers, who answer from
    their confusion row for the item's true class: :func:`~crowdlearn.simulate.crowds.crowd`
    with :meth:`WorkerSpec.custom` workers and ``truth=y``.

    Parameters
    ----------
    y : array of int, shape (n_items,)
    confusions : array, shape (W, K, K)
        Rows are normalised to sum to 1.
    labels_per_task : int
    X : array of shape (n_items, n_features), optional
        Attached as the labels' features.
    seed : int, Generator or None
    n_classes : int, optional
        Default: the confusions' size.

    Returns
    -------
    labels : SimulatedLabels
    planted : dict
        ``{"confusions": (W, K, K)}`` as normalised.
    """
    conf = np.asarray(confusions, dtype=float)
    y, X, k = _check(y, X, n_classes if n_classes is not None else (conf.shape[-1] if conf.ndim == 3 else None))
    if conf.ndim != 3 or conf.shape[1:] != (k, k) or np.any(conf < 0):
        raise ValueError(f"confusions must be a non-negative (W, {k}, {k}) array")
    conf = conf / conf.sum(-1, keepdims=True)
    w = conf.shape[0]
    if not 1 <= labels_per_task <= w:
        raise ValueError(f"labels_per_task must be in [1, {w}], got {labels_per_task}")
    labels = crowd(len(y), k, WorkerSpec.custom(conf), labels_per_task=labels_per_task,
                   seed=seed, truth=y, features=X)
    return labels, {"confusions": conf}


def outlier_classes(X, y, fraction: float, n_classes: int | None = None) -> np.ndarray:
    """The items that look most like another class, and that class.

    An item's atypicality is the ratio of its squared distance to its own class centroid
    over its distance to the nearest other centroid (centroids: class means of ``X``); the
    ``round(fraction * n)`` most atypical items are outliers.

    Returns
    -------
    ndarray of int, shape (n_items,)
        The nearest other class of each outlier, -1 for the other items.
    """
    y, X, k = _check(y, X, n_classes)
    if X is None:
        raise ValueError("instance outliers need the features X")
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"the outlier fraction must lie in [0, 1], got {fraction!r}")
    n = len(y)
    cent = np.stack([X[y == c].mean(0) if np.any(y == c) else np.full(X.shape[1], np.inf) for c in range(k)])
    d = ((X[:, None, :] - cent[None]) ** 2).sum(-1)
    own = d[np.arange(n), y]
    d[np.arange(n), y] = np.inf
    ratio = own / np.maximum(d.min(1), 1e-12)
    out = np.full(n, -1, dtype=np.int64)
    pick = np.argsort(-ratio, kind="stable")[: int(round(fraction * n))]
    out[pick] = d[pick].argmin(1)
    return out


def instance_outliers(
    y,
    X,
    outlier_frac: float = 0.1,
    n_workers: int = 20,
    labels_per_task: int = 3,
    accuracy: Range = 0.8,
    outlier_prob: float = 0.9,
    seed: Any = 0,
    n_classes: int | None = None,
) -> SimulatedLabels:
    """One-coin annotators with instance-dependent outliers (COINNet's setting).

    The ``outlier_frac`` items most like another class (:func:`outlier_classes`) are
    answered as that class with probability ``outlier_prob`` by every annotator, an error
    explained by the item rather than by the annotator's confusion; the other answers follow
    one-coin workers of ``accuracy`` (:meth:`WorkerSpec.instance_dependent`).

    Returns
    -------
    SimulatedLabels
        ``planted.outlier_class`` marks the outliers (>= 0) and their flagged class;
        ``planted.confusions`` is the workers' behaviour on regular items.
    """
    y, X, k = _check(y, X, n_classes)
    target = outlier_classes(X, y, outlier_frac, k)
    spec = WorkerSpec.instance_dependent(
        n_workers, WorkerSpec.one_coin(n_workers, accuracy), outlier_prob=outlier_prob
    )
    return crowd(len(y), k, spec, labels_per_task=labels_per_task, seed=seed, truth=y,
                 features=X, outlier_class=target)
