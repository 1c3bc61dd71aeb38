"""Small seeded crowds the conformance checks fit on, drawn with :mod:`crowdlearn.simulate`.

Every crowd has string ids (``t007``, ``w03``, ``c1``) so that the checks exercise the mapping
between the user's ids and the integer codes, gold truth attached for every task, and, when
asked, item features: Gaussian clusters around one centre per true class, so that a
classifier of the features can learn the truth.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.data import CrowdLabels
from ..simulate import dawid_skene
from ..simulate.features import annotate
from ..simulate.features import class_features as simulated_class_features

__all__ = ["class_features", "clusters", "planted_confusions", "toy_crowd", "perfect_crowd",
           "planted_crowd", "renamed"]


def class_features(y, n_features: int = 5, separation: float = 4.0, seed: int = 0) -> np.ndarray:
    """Features ``x_n = mu_{y_n} + eps_n`` with ``eps_n ~ N(0, I)``, one centre per class of ``y``.

    :func:`crowdlearn.simulate.features.class_features` with ``K = max(y) + 1`` and the
    checks' defaults (well separated, few dimensions): the classes are separable by a linear
    classifier up to the Gaussian overlap.
    """
    y = np.asarray(y)
    k = int(y.max()) + 1 if y.size else 1
    return simulated_class_features(y, k, n_features, separation, seed)[0]


def clusters(n: int = 400, k: int = 3, d: int = 8, separation: float = 4.0, seed: int = 0):
    """Balanced labels ``y`` over ``k`` classes (shuffled) and features as in
    :func:`class_features`: ``x_n = mu_{y_n} + eps_n``, ``||mu_j|| = separation``.

    Returns ``(X, y)``.
    """
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, d))
    centres *= separation / np.linalg.norm(centres, axis=1, keepdims=True)
    y = np.arange(n) % k
    rng.shuffle(y)
    return centres[y] + rng.normal(size=(n, d)), y


def planted_confusions(n_workers: int = 8, k: int = 3, seed: int = 0) -> np.ndarray:
    """Asymmetric, diagonally dominant confusions ``[worker, true, answered]``.

    Each row keeps its diagonal in [0.6, 0.85] and spreads the rest over the other classes
    by a Dirichlet(0.7) draw, so the errors are class-dependent (a one-coin model cannot
    represent them) and orientation mistakes show.
    """
    rng = np.random.default_rng(seed)
    conf = np.empty((n_workers, k, k))
    for w in range(n_workers):
        for j in range(k):
            off = rng.dirichlet(np.full(k - 1, 0.7)) * (1 - rng.uniform(0.6, 0.85))
            conf[w, j] = np.insert(off, j, 0.0)
            conf[w, j, j] = 1 - off.sum()
    return conf


def _with_string_ids(data: CrowdLabels, features: np.ndarray | None) -> CrowdLabels:
    return CrowdLabels(
        data.task, data.worker, data.label,
        tasks=pd.Index([f"t{i:03d}" for i in range(data.n_tasks)]),
        workers=pd.Index([f"w{i:02d}" for i in range(data.n_workers)]),
        classes=pd.Index([f"c{i}" for i in range(data.n_classes)]),
        truth=data.truth, features=features,
    )


def toy_crowd(
    n_tasks: int = 120,
    n_workers: int = 12,
    n_classes: int = 3,
    per_task: int = 4,
    seed: int = 0,
    *,
    accuracy: tuple[float, float] = (0.65, 0.9),
    features: bool = False,
) -> CrowdLabels:
    """A Dawid-Skene crowd (:func:`crowdlearn.simulate.dawid_skene`) with string ids.

    Workers have class-dependent accuracies drawn in ``accuracy``; ``per_task`` distinct
    workers answer each task.  With ``features`` the items carry :func:`class_features`.
    """
    data = dawid_skene(n_tasks, n_workers, n_classes, labels_per_task=per_task,
                       accuracy=accuracy, seed=seed)
    x = class_features(data.truth, seed=seed) if features else None
    return _with_string_ids(data, x)


def planted_crowd(n_tasks: int = 900, n_workers: int = 8, n_classes: int = 3, per_task: int = 4,
                  n_features: int = 8, separation: float = 3.0, seed: int = 0):
    """Items with features and annotators answering from :func:`planted_confusions`.

    Returns ``(labels, X, y, confusions)``; drawn with :func:`crowdlearn.simulate.features.annotate`.
    """
    X, y = clusters(n_tasks, n_classes, n_features, separation, seed=seed)
    conf = planted_confusions(n_workers, n_classes, seed=seed)
    labels, _ = annotate(y, conf, per_task, X=X, seed=seed)
    return labels, X, y, conf


def perfect_crowd(n_train: int = 300, n_test: int = 150, n_classes: int = 3, n_workers: int = 5,
                  per_task: int = 2, seed: int = 1):
    """Separable items and annotators who never err, plus held-out items.

    Returns ``(labels, X, y)``: ``X, y`` hold ``n_train + n_test`` items, ``labels`` the
    answers on the first ``n_train`` (features attached), drawn with
    :func:`crowdlearn.simulate.features.annotate`.
    """
    X, y = clusters(n_train + n_test, n_classes, 8, 4.0, seed=seed)
    perfect = np.stack([np.eye(n_classes)] * n_workers)
    labels, _ = annotate(y[:n_train], perfect, per_task, X=X[:n_train], seed=seed, n_classes=n_classes)
    return labels, X, y


def renamed(data: CrowdLabels, seed: int = 5):
    """The same crowd with answers shuffled and tasks, workers and classes renamed.

    Class names are assigned in reverse order, so their sorted order (the column order of the
    output) is reversed as well.  Returns ``(new_data, task_map, class_map)`` where the maps
    send old ids to new ids; features and truth follow their tasks.
    """
    rng = np.random.default_rng(seed)
    df = data.to_frame()
    df = df.iloc[rng.permutation(len(df))].reset_index(drop=True)
    task_map = {t: f"task-{i:04d}" for i, t in enumerate(rng.permutation(np.asarray(data.tasks, dtype=object)))}
    worker_map = {w: f"ω{i}" for i, w in enumerate(rng.permutation(np.asarray(data.workers, dtype=object)))}
    k = data.n_classes
    class_map = {c: f"k{k - i}" for i, c in enumerate(data.classes)}
    df["task"] = df["task"].map(task_map)
    df["worker"] = df["worker"].map(worker_map)
    df["label"] = df["label"].map(class_map)
    truth = None
    if data.truth is not None:
        known = data.truth >= 0
        truth = pd.Series(data.classes.take(data.truth[known]), index=data.tasks[known]).map(class_map)
        truth.index = truth.index.map(task_map)
    features = None
    if data.features is not None:
        features = pd.DataFrame(data.features, index=[task_map[t] for t in data.tasks])
    new = CrowdLabels.from_frame(df, truth=truth, features=features)
    return new, task_map, class_map
