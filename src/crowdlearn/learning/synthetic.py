"""Synthetic feature + crowd settings of the end-to-end papers (numpy only, seeded).

* :func:`class_features` — Gaussian class clusters (a stand-in for image features).
* :func:`maxmig_crowd` — the three information structures of Max-MIG (Cao et al., ICLR 2019,
  Dogs-vs-Cats setup) on these features: the crowd is
  :func:`crowdlearn.simulate.features.maxmig_structures`, the one Max-MIG simulator.
* :func:`sparse_regular_crowd` — deepBP's setting (Kim et al., AISTATS 2022): binary one-coin
  workers with accuracy ``~ Beta(a, b)`` on an ``(l, r)``-regular assignment, plus optional
  extreme spammers who answer every task uniformly at random.
* :func:`instance_outliers` — COINNet-style instance-dependent outliers: on a fraction of
  items (those closest to another class's centre) annotators answer that other class.

Confusions are ``[worker, true, answered]``.
"""

from __future__ import annotations

import numpy as np

from ..core.data import CrowdLabels
from ..simulate.features import maxmig_structures

__all__ = ["class_features", "maxmig_crowd", "sparse_regular_crowd", "instance_outliers"]


def class_features(truth: np.ndarray, n_classes: int, n_features: int = 10, separation: float = 2.5,
                   seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``x = mu_{y} + N(0, I)``, class centres at distance ``separation`` from the origin.

    Returns (X, centres).
    """
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=(n_classes, n_features))
    mu *= separation / np.linalg.norm(mu, axis=1, keepdims=True)
    return mu[truth] + rng.normal(size=(len(truth), n_features)), mu


def maxmig_crowd(structure: str = "independent", expertise: str = "low", n_tasks: int = 2000,
                 n_features: int = 10, separation: float = 2.5, seed: int = 0):
    """Binary crowd + Gaussian-cluster features for one Max-MIG information structure.

    The crowd is :func:`crowdlearn.simulate.features.maxmig_structures` (the paper's expert
    counts and matrices) on balanced random truth; features from :func:`class_features`.
    Returns (labels with truth and features attached, senior confusions).
    """
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_tasks)
    X, _ = class_features(truth, 2, n_features, separation, seed + 1)
    labels, planted = maxmig_structures(truth, structure, expertise, X=X, seed=seed + 2, n_classes=2)
    return labels, planted["confusions"][planted["kind"] == "senior"]


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
