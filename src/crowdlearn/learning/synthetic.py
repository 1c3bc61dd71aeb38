"""Synthetic feature + crowd settings of the end-to-end papers (numpy only, seeded).

* :func:`class_features` — Gaussian class clusters (a stand-in for image features).
* :func:`maxmig_crowd` — the three information structures of Max-MIG (Cao et al., ICLR 2019,
  Dogs-vs-Cats setup): ``"independent"`` senior experts; ``"naive_majority"`` seniors plus
  junior experts who always answer class 0; ``"correlated"`` seniors plus juniors who copy
  senior 0 or senior 1.  ``expertise="low"``: 10 seniors ``[[.55,.45],[.45,.55]]``;
  ``"high"``: the paper's 5 senior matrices.  Every expert labels every item.
* :func:`sparse_regular_crowd` — deepBP's setting (Kim et al., AISTATS 2022): binary one-coin
  workers with accuracy ``~ Beta(a, b)`` on an ``(l, r)``-regular assignment, plus optional
  extreme spammers who answer every task uniformly at random.
* :func:`instance_outliers` — COINNet-style instance-dependent outliers: on a fraction of
  items (those closest to another class's centre) annotators answer that other class.

Confusions are ``[worker, true, answered]``.
"""

from __future__ import annotations

import numpy as np

from ..data import CrowdLabels

__all__ = ["class_features", "maxmig_crowd", "sparse_regular_crowd", "instance_outliers"]

_HIGH = np.array([[[.6, .4], [.1, .9]], [[.8, .2], [.4, .6]], [[.6, .4], [.4, .6]],
                  [[.7, .3], [.3, .7]], [[.7, .3], [.4, .6]]])


def class_features(truth: np.ndarray, n_classes: int, n_features: int = 10, separation: float = 2.5,
                   seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``x = mu_{y} + N(0, I)``, class centres at distance ``separation`` from the origin.

    Returns (X, centres).
    """
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=(n_classes, n_features))
    mu *= separation / np.linalg.norm(mu, axis=1, keepdims=True)
    return mu[truth] + rng.normal(size=(len(truth), n_features)), mu


def _answers(truth, conf, rng):
    """Dense answers (N, W) drawn from ``conf[w, truth[n], :]``."""
    n, m = len(truth), conf.shape[0]
    cdf = np.cumsum(conf[:, truth, :], axis=-1)  # (W, N, K)
    u = rng.random((m, n, 1))
    return np.minimum((u > cdf).sum(-1), conf.shape[-1] - 1).T


def _dense_labels(ans: np.ndarray, truth: np.ndarray, k: int, X=None) -> CrowdLabels:
    n, m = ans.shape
    t = np.repeat(np.arange(n), m)
    w = np.tile(np.arange(m), n)
    return CrowdLabels.from_codes(t, w, ans.ravel(), n_tasks=n, n_workers=m, n_classes=k,
                                  truth=truth, features=X)


def maxmig_crowd(structure: str = "independent", expertise: str = "low", n_tasks: int = 2000,
                 n_features: int = 10, separation: float = 2.5, seed: int = 0):
    """Binary crowd + features for one Max-MIG information structure.

    Returns (labels with truth and features attached, senior confusions).
    """
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_tasks)
    if expertise == "low":
        seniors = np.broadcast_to(np.array([[.55, .45], [.45, .55]]), (10, 2, 2)).copy()
        n_junior = {"independent": 0, "naive_majority": 15, "correlated": 2}[structure]
    elif expertise == "high":
        seniors = _HIGH.copy()
        n_junior = {"independent": 0, "naive_majority": 5, "correlated": 5}[structure]
    else:
        raise ValueError(f"expertise must be 'low' or 'high', got {expertise!r}")
    ans = _answers(truth, seniors, rng)
    if structure == "naive_majority":
        ans = np.hstack([ans, np.zeros((n_tasks, n_junior), dtype=ans.dtype)])
    elif structure == "correlated":
        # low expertise: juniors copy seniors 0/1 -> 12 experts; high: 5 juniors -> 10
        src = np.arange(n_junior) % 2
        ans = np.hstack([ans, ans[:, src]])
    elif structure != "independent":
        raise ValueError(f"structure must be 'independent', 'naive_majority' or 'correlated', got {structure!r}")
    X, _ = class_features(truth, 2, n_features, separation, seed + 1)
    return _dense_labels(ans, truth, 2, X), seniors


def sparse_regular_crowd(n_tasks: int = 1000, l: int = 3, r: int = 4, a: float = 2.0, b: float = 1.0,
                         n_extreme: int = 0, n_features: int = 10, separation: float = 1.0, seed: int = 0):
    """deepBP's sparse binary setting; extreme spammers label every task uniformly.

    Workers: ``n_tasks * l / r`` one-coin workers with ``acc ~ Beta(a, b)``, each labelling
    ``r`` tasks (configuration model, repeats re-drawn).  Returns labels (truth and features
    attached; spammers are the last ``n_extreme`` worker codes).
    """
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_tasks)
    m = n_tasks * l // r
    acc = rng.beta(a, b, m)
    for _ in range(100):
        stubs = rng.permutation(np.repeat(np.arange(m), r))[: n_tasks * l].reshape(n_tasks, l)
        if all(len(set(row)) == l for row in stubs):
            break
    t = np.repeat(np.arange(n_tasks), l)
    w = stubs.ravel()
    right = rng.random(len(t)) < acc[w]
    lab = np.where(right, truth[t], 1 - truth[t])
    if n_extreme:
        ts = np.tile(np.arange(n_tasks), n_extreme)
        ws = np.repeat(m + np.arange(n_extreme), n_tasks)
        t, w = np.concatenate([t, ts]), np.concatenate([w, ws])
        lab = np.concatenate([lab, rng.integers(0, 2, len(ts))])
    X, _ = class_features(truth, 2, n_features, separation, seed + 1)
    return CrowdLabels.from_codes(t, w, lab, n_tasks=n_tasks, n_workers=m + n_extreme, n_classes=2,
                                  truth=truth, features=X)


def instance_outliers(n_tasks: int = 1500, n_classes: int = 4, n_workers: int = 20, labels_per_task: int = 5,
                      accuracy: tuple = (0.6, 0.9), outlier_frac: float = 0.15, outlier_prob: float = 0.8,
                      n_features: int = 10, separation: float = 3.0, seed: int = 0):
    """One-coin crowd with instance-dependent outliers (COINNet setting).

    The ``outlier_frac`` items whose features lie closest to another class's centre are
    outliers: each of their answers is, with probability ``outlier_prob``, that confusing
    class — an error explained by the instance, not by the worker's confusion matrix.
    Returns (labels with truth/features, boolean outlier mask over tasks).
    """
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, n_classes, n_tasks)
    X, mu = class_features(truth, n_classes, n_features, separation, seed + 1)
    d = ((X[:, None, :] - mu[None]) ** 2).sum(-1)
    d[np.arange(n_tasks), truth] = np.inf
    other = d.argmin(1)
    margin = d.min(1)
    outlier = np.zeros(n_tasks, bool)
    outlier[np.argsort(margin)[: int(round(outlier_frac * n_tasks))]] = True
    acc = rng.uniform(*accuracy, n_workers)
    w = np.concatenate([rng.choice(n_workers, labels_per_task, replace=False) for _ in range(n_tasks)])
    t = np.repeat(np.arange(n_tasks), labels_per_task)
    wrong = (truth[t] + rng.integers(1, n_classes, len(t))) % n_classes
    lab = np.where(rng.random(len(t)) < acc[w], truth[t], wrong)
    flip = outlier[t] & (rng.random(len(t)) < outlier_prob)
    lab = np.where(flip, other[t], lab)
    labels = CrowdLabels.from_codes(t, w, lab, n_tasks=n_tasks, n_workers=n_workers, n_classes=n_classes,
                                    truth=truth, features=X)
    return labels, outlier
