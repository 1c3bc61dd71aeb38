"""Drawing a crowd: true classes, worker parameters, assignment and answers.

One composable entry point, :func:`crowd`, draws a crowd from a list of worker groups built
with the :class:`~crowdlearn.simulate.workers.WorkerSpec` constructors and an assignment
from :func:`~crowdlearn.simulate.assignment.assign_workers`; every scenario of
:mod:`crowdlearn.simulate` is a call into it.

>>> from crowdlearn import simulate
>>> data = simulate.crowd(
...     10_000, 3,
...     [simulate.WorkerSpec.diligent(40), simulate.WorkerSpec.spammer(10),
...      simulate.WorkerSpec.colluders(6, group_size=3)],
...     labels_per_task=5, seed=0,
... )
>>> data.planted.confusions.shape     # (n_workers, true class, answered class)
(56, 3, 3)

It returns a :class:`SimulatedLabels`: a :class:`~crowdlearn.core.data.CrowdLabels`
with ``truth`` attached and a ``planted`` attribute (:class:`Planted`) holding the worker
parameters, confusions in the library orientation ``[w, true, answered]``.

Everything is vectorised over answers (no Python loop over tasks or answers): ten million
answers take a few seconds.  The same ``seed`` gives the same output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..core.data import CrowdLabels
from .assignment import Assignment, assign_workers
from .workers import WorkerSpec

__all__ = ["Planted", "SimulatedLabels", "crowd"]


@dataclass(frozen=True, eq=False)
class Planted:
    """The worker model a simulation was drawn from.

    Attributes
    ----------
    confusions : ndarray, shape (n_workers, n_classes, n_classes)
        ``confusions[w, j, l] = P(worker w answers l | true class j)``; for a colluder this
        is its marginal answer distribution.
    class_prior : ndarray, shape (n_classes,)
        Distribution the true classes were drawn from.
    kind : ndarray of str, shape (n_workers,)
        ``"diligent"``, ``"one_coin"``, ``"spammer"``, ``"adversary"``, ``"fixed_class"``,
        ``"colluder"``, ``"instance_dependent"`` or ``"custom"``.
    group : ndarray of int, shape (n_workers,)
        Position in the ``workers`` list of the :class:`WorkerSpec` that made each worker.
    leader : ndarray of int, shape (n_workers,)
        For a colluder, the code of the worker whose answers its group copies (the leader
        itself included); -1 for independent workers.
    copy_prob : ndarray of float, shape (n_workers,)
        Probability that a colluder gives its group's shared answer (1 for a leader, 0 for
        independent workers).
    outlier_prob : ndarray of float, shape (n_workers,)
        Probability that an instance-dependent worker answers an outlier task's flagged
        class (0 for the other workers).
    outlier_class : ndarray of int, shape (n_tasks,)
        The class an outlier task looks like, -1 for regular tasks.
    """

    confusions: np.ndarray
    class_prior: np.ndarray
    kind: np.ndarray
    group: np.ndarray
    leader: np.ndarray
    copy_prob: np.ndarray
    outlier_prob: np.ndarray
    outlier_class: np.ndarray

    @property
    def accuracy(self) -> np.ndarray:
        """Expected accuracy of each worker under the class prior, shape (n_workers,)."""
        diag = np.diagonal(self.confusions, axis1=1, axis2=2)
        return diag @ self.class_prior

    def as_dict(self) -> dict[str, np.ndarray]:
        """The planted parameters as a plain dict of arrays."""
        return {
            "confusions": self.confusions,
            "class_prior": self.class_prior,
            "kind": self.kind,
            "group": self.group,
            "leader": self.leader,
            "copy_prob": self.copy_prob,
            "outlier_prob": self.outlier_prob,
            "outlier_class": self.outlier_class,
        }


class SimulatedLabels(CrowdLabels):
    """A :class:`~crowdlearn.core.data.CrowdLabels` with gold ``truth`` for every task and the
    planted worker model in :attr:`planted` (a :class:`Planted`).

    Subsets and copies made through ``CrowdLabels`` methods are plain ``CrowdLabels``.
    """

    __slots__ = ("planted",)

    def __init__(self, *args: Any, planted: Planted, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.planted = planted

    def __reduce__(self):
        return (
            _rebuild_simulated,
            (self.task, self.worker, self.label, self.tasks, self.workers, self.classes,
             self.truth, self.features, self.planted),
        )


def _rebuild_simulated(task, worker, label, tasks, workers, classes, truth, features, planted):
    return SimulatedLabels(
        task, worker, label, tasks, workers, classes, truth=truth, features=features,
        planted=planted,
    )


def _hash_uniform(keys: np.ndarray, salt: int) -> np.ndarray:
    """Deterministic uniforms in [0, 1) per integer key (SplitMix64 finaliser)."""
    z = keys.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(salt)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / 2**53)


def _draw_categorical(cdf: np.ndarray, row: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Exact inverse-CDF draws: the number of entries of ``cdf[row]`` that are <= ``u``.

    ``cdf`` is (n_rows, K) with last column 1 and ``u`` in [0, 1), so the count is the
    smallest class whose cumulative probability exceeds ``u`` (never a zero-probability
    class).  Small K: a linear scan; larger K: a branchless binary search on rows padded to
    a power of two.  Memory and time O(L log K), no (L, K) temporary.
    """
    k = cdf.shape[1]
    if k <= 3:
        flat = cdf.reshape(-1)
        base = row * k
        out = np.zeros(len(row), dtype=np.int32)
        for m in range(k - 1):
            np.add(out, np.take(flat, base + m) <= u, out=out, casting="unsafe")
        return out
    width = 1 << int(np.ceil(np.log2(k)))
    padded = np.full((cdf.shape[0], width), 2.0)  # padding is never <= u
    padded[:, :k] = cdf
    flat = padded.reshape(-1)
    start = row * width
    idx = start.copy()
    probe = np.empty_like(idx)
    ok = np.empty(len(row), dtype=bool)
    step = width // 2
    while step:
        np.add(idx, step - 1, out=probe)
        np.less_equal(np.take(flat, probe), u, out=ok)
        idx += ok * idx.dtype.type(step)
        step //= 2
    idx -= start
    return idx.astype(np.int32)


def _class_prior(class_prior: Any, k: int) -> np.ndarray:
    if class_prior is None:
        return np.full(k, 1.0 / k)
    prior = np.asarray(class_prior, dtype=np.float64)
    if prior.shape != (k,) or np.any(prior < 0) or not np.isfinite(prior).all() or prior.sum() <= 0:
        raise ValueError(f"class_prior must be {k} non-negative weights")
    return prior / prior.sum()


def _given_design(design, n_tasks: int, n_workers: int, allow_repeats: bool):
    """A (task, worker) pair of code arrays, checked and sorted by task, then worker."""
    try:
        task, worker = (np.asarray(a) for a in design)
    except (TypeError, ValueError):
        raise ValueError(
            f"assignment must be 'random', 'regular' or a (task, worker) pair, got {design!r}"
        ) from None
    if task.shape != worker.shape or task.ndim != 1 or task.dtype.kind not in "iu" or worker.dtype.kind not in "iu":
        raise ValueError("a given design is two 1-D integer arrays of equal length")
    if len(task) and (task.min() < 0 or task.max() >= n_tasks or worker.min() < 0 or worker.max() >= n_workers):
        raise ValueError(f"design codes must lie in [0, {n_tasks}) x [0, {n_workers})")
    order = np.lexsort((worker, task))
    task, worker = task[order].astype(np.int32), worker[order].astype(np.int32)
    if not allow_repeats and len(task) > 1:
        same = (task[1:] == task[:-1]) & (worker[1:] == worker[:-1])
        if same.any():
            raise ValueError("the design repeats (task, worker) pairs; pass allow_repeats=True to keep them")
    return task, worker


def crowd(
    n_tasks: int,
    n_classes: int,
    workers: Sequence[WorkerSpec] | WorkerSpec,
    *,
    labels_per_task: int = 5,
    assignment: Assignment | tuple[np.ndarray, np.ndarray] = "random",
    class_prior: Sequence[float] | None = None,
    seed: Any = 0,
    truth: np.ndarray | None = None,
    features: np.ndarray | None = None,
    outlier_class: np.ndarray | None = None,
    allow_repeats: bool = False,
) -> SimulatedLabels:
    """Simulate a crowd made of the given worker groups.

    Parameters
    ----------
    n_tasks : int
    n_classes : int
        At least 2.
    workers : WorkerSpec or list of WorkerSpec
        Worker groups; worker codes follow the list order.
    labels_per_task : int
        Distinct workers per task.
    assignment : {"random", "regular"} or (task, worker) arrays
        See :func:`~crowdlearn.simulate.assignment.assign_workers`; or a ready design as
        two integer arrays of codes (``labels_per_task`` is then unused).
    class_prior : array of shape (n_classes,), optional
        Distribution of the true classes (uniform by default).
    seed : int, Generator or None
        Same seed, same output.
    truth : array of int of shape (n_tasks,), optional
        Given true class codes (e.g. the labels of a real data set) instead of drawn ones;
        ``planted.class_prior`` is then their empirical distribution.
    features : array of shape (n_tasks, n_features), optional
        Item features attached to the result.
    outlier_class : array of int of shape (n_tasks,), optional
        Instance outliers: the class each task looks like, -1 for regular tasks.  Only
        ``instance_dependent`` workers react to it.
    allow_repeats : bool
        Let a worker answer the same task more than once (see ``assign_workers``).

    Returns
    -------
    SimulatedLabels
        Answers sorted by task, ``truth`` set for every task, ``planted`` the worker model.
        Tasks, workers and classes are labelled ``0..n-1``.

    Notes
    -----
    Draw order: true classes (unless given), each group's parameters (in list order), the
    assignment, the answers, then the outlier answers of instance-dependent workers.  Each answer is an exact inverse-CDF draw from its worker's confusion row for
    the task's true class; a colluder's copied answer reuses one uniform per (group, task),
    so every member copying on a task gives the same answer as its leader would.
    """
    if isinstance(workers, WorkerSpec):
        workers = [workers]
    workers = list(workers)
    if not workers or not all(isinstance(s, WorkerSpec) for s in workers):
        raise TypeError("workers must be a non-empty list of WorkerSpec")
    k = int(n_classes)
    if k < 2:
        raise ValueError("n_classes must be at least 2")
    n_tasks = int(n_tasks)
    rng = np.random.default_rng(seed)
    if truth is None:
        prior = _class_prior(class_prior, k)
        truth = rng.choice(k, size=n_tasks, p=prior).astype(np.int32)
    else:
        if class_prior is not None:
            raise ValueError("give the true classes or their prior, not both")
        truth = np.asarray(truth)
        if truth.shape != (n_tasks,) or truth.dtype.kind not in "iu":
            raise ValueError(f"truth must be {n_tasks} integer class codes")
        if truth.min() < 0 or truth.max() >= k:
            raise ValueError(f"truth codes must lie in [0, {k})")
        truth = truth.astype(np.int32)
        prior = np.bincount(truth, minlength=k) / n_tasks
    if features is not None:
        features = np.asarray(features)
        if features.ndim != 2 or len(features) != n_tasks:
            raise ValueError(f"features must be 2-D with one row per task ({n_tasks}), got {features.shape}")
    target = np.full(n_tasks, -1, dtype=np.int32)
    if outlier_class is not None:
        target = np.asarray(outlier_class).astype(np.int32)
        if target.shape != (n_tasks,) or target.min() < -1 or target.max() >= k:
            raise ValueError(f"outlier_class must be {n_tasks} class codes or -1")

    # ---- worker parameters
    own, kinds, groups, leaders, copy, outlier = [], [], [], [], [], []
    start = 0
    for g, spec in enumerate(workers):
        conf = spec.sample(k, rng)
        n = spec.n
        own.append(conf)
        kinds.append(np.full(n, spec.kind, dtype=object))
        groups.append(np.full(n, g, dtype=np.int64))
        if spec.kind == "colluder":
            size = spec.params["group_size"]
            offs = np.arange(n)
            lead = start + (offs // size) * size
            cp = np.where(offs % size == 0, 1.0, spec.params["copy_prob"])
        else:
            lead = np.full(n, -1, dtype=np.int64)
            cp = np.zeros(n)
        leaders.append(lead.astype(np.int64))
        copy.append(cp)
        outlier.append(np.full(n, spec.params["outlier_prob"] if spec.kind == "instance_dependent" else 0.0))
        start += n
    n_workers = start
    if n_workers < 1:
        raise ValueError("the crowd has no worker")
    own_conf = np.concatenate(own)
    leader = np.concatenate(leaders)
    copy_prob = np.concatenate(copy)
    outlier_prob = np.concatenate(outlier)
    colluding = leader >= 0
    planted_conf = own_conf.copy()
    if colluding.any():
        cp = copy_prob[colluding][:, None, None]
        planted_conf[colluding] = cp * own_conf[leader[colluding]] + (1 - cp) * own_conf[colluding]

    # ---- who answers what
    if isinstance(assignment, str):
        task, worker = assign_workers(
            n_tasks, n_workers, labels_per_task, assignment, rng, allow_repeats=allow_repeats
        )
    else:
        task, worker = _given_design(assignment, n_tasks, n_workers, allow_repeats)

    # ---- answers: one exact categorical draw per answer from its confusion row
    big = n_workers * k * 2 * k >= 2**31  # flat index into the padded cdf rows
    idx_t = np.int64 if big else np.int32
    true_of_answer = truth[task]
    row = worker.astype(idx_t) * k + true_of_answer
    u = rng.random(len(task))
    if colluding.any():
        at = np.flatnonzero(colluding[worker])
        w_at = worker[at]
        copies = rng.random(len(at)) < copy_prob[w_at]
        at, w_at = at[copies], w_at[copies]
        row[at] = leader[w_at].astype(idx_t) * k + true_of_answer[at]
        salt = int(rng.integers(0, 2**63))
        u[at] = _hash_uniform(leader[w_at] * np.int64(n_tasks) + task[at], salt)
    cdf = np.cumsum(own_conf, axis=2)
    cdf[:, :, -1] = 1.0
    label = _draw_categorical(cdf.reshape(n_workers * k, k), row, u)
    if (outlier_prob > 0).any() and (target >= 0).any():
        at = np.flatnonzero((target[task] >= 0) & (outlier_prob[worker] > 0))
        hit = at[rng.random(len(at)) < outlier_prob[worker[at]]]
        label[hit] = target[task[hit]]

    planted = Planted(
        confusions=planted_conf,
        class_prior=prior,
        kind=np.concatenate(kinds).astype(str),
        group=np.concatenate(groups),
        leader=leader,
        copy_prob=copy_prob,
        outlier_prob=outlier_prob,
        outlier_class=target,
    )
    return SimulatedLabels(
        task,
        worker,
        label,
        tasks=pd.RangeIndex(n_tasks, name="task"),
        workers=pd.RangeIndex(n_workers, name="worker"),
        classes=pd.RangeIndex(k, name="class"),
        truth=truth,
        features=features,
        planted=planted,
    )


