"""Seeded simulators of crowds with planted worker models and known truth.

One composable entry point, :func:`crowd`, draws a crowd from a list of worker groups built
with the :class:`WorkerSpec` constructors; :func:`dawid_skene`, :func:`one_coin` and
:func:`hammer_spammer` are ready-made scenarios on top of it.

>>> from crowdlearn import simulate
>>> data = simulate.crowd(
...     10_000, 3,
...     [simulate.WorkerSpec.diligent(40), simulate.WorkerSpec.spammer(10),
...      simulate.WorkerSpec.colluders(6, group_size=3)],
...     labels_per_task=5, seed=0,
... )
>>> data.planted.confusions.shape     # (n_workers, true class, answered class)
(56, 3, 3)

Every generator returns a :class:`SimulatedLabels`: a :class:`~crowdlearn.core.data.CrowdLabels`
with ``truth`` attached and a ``planted`` attribute (:class:`Planted`) holding the worker
parameters, confusions in the library orientation ``[w, true, answered]``.

Everything is vectorised over answers (no Python loop over tasks or answers): ten million
answers take a few seconds.  The same ``seed`` gives the same output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from ..core.data import CrowdLabels

__all__ = [
    "Planted",
    "SimulatedLabels",
    "WorkerSpec",
    "assign_workers",
    "crowd",
    "dawid_skene",
    "hammer_spammer",
    "one_coin",
]

Assignment = Literal["random", "regular"]
Range = float | tuple[float, float] | np.ndarray

_MAX_REWIRE_ROUNDS = 10_000


# ============================================================================ results
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
        ``"colluder"`` or ``"custom"``.
    group : ndarray of int, shape (n_workers,)
        Position in the ``workers`` list of the :class:`WorkerSpec` that made each worker.
    leader : ndarray of int, shape (n_workers,)
        For a colluder, the code of the worker whose answers its group copies (the leader
        itself included); -1 for independent workers.
    copy_prob : ndarray of float, shape (n_workers,)
        Probability that a colluder gives its group's shared answer (1 for a leader, 0 for
        independent workers).
    """

    confusions: np.ndarray
    class_prior: np.ndarray
    kind: np.ndarray
    group: np.ndarray
    leader: np.ndarray
    copy_prob: np.ndarray

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


# ======================================================================= worker specs
def _as_values(value: Range, shape: tuple[int, ...], rng: np.random.Generator, what: str) -> np.ndarray:
    """A float, a (low, high) tuple drawn uniformly, or an array broadcast to ``shape``."""
    if isinstance(value, tuple):
        if len(value) != 2:
            raise ValueError(f"{what} range must be a (low, high) pair, got {value!r}")
        lo, hi = float(value[0]), float(value[1])
        if not (0.0 <= lo <= hi <= 1.0):
            raise ValueError(f"{what} range must satisfy 0 <= low <= high <= 1, got {value!r}")
        return rng.uniform(lo, hi, size=shape)
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim and arr.shape[0] != shape[0]:
        raise ValueError(f"{what} array must have one entry per worker ({shape[0]}), got {arr.shape}")
    if arr.ndim == 1 and len(shape) == 2:
        arr = arr[:, None]
    out = np.broadcast_to(arr, shape).astype(np.float64)
    if np.any((out < 0) | (out > 1)) or not np.all(np.isfinite(out)):
        raise ValueError(f"{what} values must lie in [0, 1]")
    return out


def _one_coin_confusions(acc: np.ndarray, k: int) -> np.ndarray:
    """acc (n,) -> (n, k, k): acc on the diagonal, the rest spread evenly."""
    off = (1.0 - acc) / (k - 1)
    conf = np.repeat(off[:, None, None], k, axis=1).repeat(k, axis=2)
    idx = np.arange(k)
    conf[:, idx, idx] = acc[:, None]
    return conf


def _dirichlet_confusions(diag: np.ndarray, k: int, concentration: float, rng) -> np.ndarray:
    """diag (n, k) -> (n, k, k): given diagonal, off-diagonal mass split by a Dirichlet."""
    n = diag.shape[0]
    share = rng.dirichlet(np.full(k - 1, float(concentration)), size=n * k).reshape(n, k, k - 1)
    conf = np.empty((n, k, k))
    off_mask = ~np.eye(k, dtype=bool)
    conf[:, off_mask] = (share * (1.0 - diag)[:, :, None]).reshape(n, k * (k - 1))
    idx = np.arange(k)
    conf[:, idx, idx] = diag
    return conf


@dataclass(frozen=True)
class WorkerSpec:
    """A group of ``n`` simulated workers of one kind.

    Build them with the constructors below and pass a list to :func:`crowd`; each group's
    parameters are drawn when the crowd is simulated, from the crowd's seed.

    ``diligent(n, accuracy, concentration)``
        Dawid-Skene workers: per (worker, true class) accuracy drawn in ``accuracy``, the
        remaining mass spread over the other classes by a symmetric Dirichlet.
    ``one_coin(n, accuracy)``
        One accuracy per worker, errors uniform over the other classes.
    ``spammer(n, p=None)``
        Answers independent of the truth: uniform over the classes, or drawn from ``p``.
    ``adversary(n, accuracy)``
        Below-chance workers: a one-coin worker of accuracy ``a`` whose answers are relabelled
        by a per-worker cyclic shift ``l -> (l + s) mod K`` (``s != 0``); their accuracy is
        ``(1 - a) / (K - 1)`` but their answers stay informative once un-permuted.
    ``fixed_class(n, cls=None)``
        Always answer class code ``cls`` (a random class per worker when None).
    ``colluders(n, group_size, base=None, copy_prob=1.0)``
        Groups of ``group_size`` workers (the last may be smaller).  The first member of a
        group is its leader; every member gives the group's shared answer on a task (the
        leader's answer, drawn once per task from the leader's confusion) with probability
        ``copy_prob``, else answers from its own confusion.  Members' confusions are drawn
        from ``base`` (default: uniform spammers, a Sybil attack).
    ``custom(confusions)``
        Fixed confusion matrices, shape (n, K, K) or (K, K) with ``n`` given.
    """

    kind: str
    n: int
    params: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if int(self.n) != self.n or self.n < 0:
            raise ValueError(f"worker count must be a non-negative integer, got {self.n!r}")

    # ------------------------------------------------------------ constructors
    @classmethod
    def diligent(cls, n: int, accuracy: Range = (0.6, 0.9), concentration: float = 1.0) -> "WorkerSpec":
        """Dawid-Skene workers (class-dependent accuracy drawn in ``accuracy``)."""
        if concentration <= 0:
            raise ValueError("concentration must be positive")
        return cls("diligent", int(n), {"accuracy": accuracy, "concentration": concentration})

    @classmethod
    def one_coin(cls, n: int, accuracy: Range = (0.6, 0.9)) -> "WorkerSpec":
        """Workers with one accuracy for all classes and uniform errors."""
        return cls("one_coin", int(n), {"accuracy": accuracy})

    @classmethod
    def spammer(cls, n: int, p: Sequence[float] | None = None) -> "WorkerSpec":
        """Workers answering independently of the truth (uniformly, or from ``p``)."""
        return cls("spammer", int(n), {"p": None if p is None else np.asarray(p, float)})

    @classmethod
    def adversary(cls, n: int, accuracy: Range = (0.6, 0.9)) -> "WorkerSpec":
        """Workers whose (one-coin) answers are systematically permuted: below chance."""
        return cls("adversary", int(n), {"accuracy": accuracy})

    @classmethod
    def fixed_class(cls, n: int, cls_code: int | None = None) -> "WorkerSpec":
        """Workers that always give class code ``cls_code`` (random per worker if None)."""
        return cls("fixed_class", int(n), {"cls": cls_code})

    @classmethod
    def colluders(
        cls,
        n: int,
        group_size: int = 5,
        base: "WorkerSpec | None" = None,
        copy_prob: float = 1.0,
    ) -> "WorkerSpec":
        """Groups of workers copying their leader's answers (see the class docstring)."""
        if int(group_size) < 1:
            raise ValueError("group_size must be at least 1")
        if not 0.0 <= copy_prob <= 1.0:
            raise ValueError("copy_prob must lie in [0, 1]")
        if base is not None and base.kind == "colluder":
            raise ValueError("the base of colluders cannot itself be colluders")
        return cls(
            "colluder",
            int(n),
            {"group_size": int(group_size), "base": base, "copy_prob": float(copy_prob)},
        )

    @classmethod
    def custom(cls, confusions: np.ndarray, n: int | None = None) -> "WorkerSpec":
        """Workers with the given confusion matrices ([w, true, answered], rows sum to 1)."""
        conf = np.asarray(confusions, dtype=np.float64)
        if conf.ndim == 2:
            conf = np.broadcast_to(conf, (1 if n is None else int(n),) + conf.shape)
        if conf.ndim != 3 or conf.shape[1] != conf.shape[2]:
            raise ValueError(f"confusions must have shape (n, K, K) or (K, K), got {conf.shape}")
        if n is not None and conf.shape[0] != n:
            raise ValueError(f"confusions hold {conf.shape[0]} workers, n={n}")
        if not np.all(np.isfinite(conf)) or np.any(conf < 0):
            raise ValueError("confusions must be finite and non-negative")
        sums = conf.sum(axis=2)
        if not np.allclose(sums, 1.0, atol=1e-6):
            raise ValueError("each confusion row (true class) must sum to 1")
        return cls("custom", conf.shape[0], {"confusions": conf / sums[:, :, None]})

    # ---------------------------------------------------------------- sampling
    def sample(self, n_classes: int, rng: np.random.Generator) -> np.ndarray:
        """Draw the (n, K, K) confusions of this group's workers (colluders: their own)."""
        k, n, p = n_classes, self.n, self.params
        if self.kind == "diligent":
            diag = _as_values(p["accuracy"], (n, k), rng, "accuracy")
            return _dirichlet_confusions(diag, k, p["concentration"], rng)
        if self.kind == "one_coin":
            return _one_coin_confusions(_as_values(p["accuracy"], (n,), rng, "accuracy"), k)
        if self.kind == "spammer":
            dist = np.full(k, 1.0 / k) if p["p"] is None else p["p"]
            if dist.shape != (k,) or np.any(dist < 0) or dist.sum() <= 0:
                raise ValueError(f"spammer p must be {k} non-negative weights")
            return np.broadcast_to(dist / dist.sum(), (n, k, k)).copy()
        if self.kind == "adversary":
            honest = _one_coin_confusions(_as_values(p["accuracy"], (n,), rng, "accuracy"), k)
            shift = rng.integers(1, k, size=n)
            cols = (np.arange(k)[None, :] - shift[:, None]) % k  # answered m <- honest m - s
            return np.take_along_axis(honest, cols[:, None, :].repeat(k, axis=1), axis=2)
        if self.kind == "fixed_class":
            c = p["cls"]
            if c is None:
                chosen = rng.integers(0, k, size=n)
            else:
                if not 0 <= int(c) < k:
                    raise ValueError(f"fixed class code {c} is not in [0, {k})")
                chosen = np.full(n, int(c))
            conf = np.zeros((n, k, k))
            conf[np.arange(n), :, chosen] = 1.0
            return conf
        if self.kind == "colluder":
            base = p["base"] if p["base"] is not None else WorkerSpec.spammer(n)
            return WorkerSpec(base.kind, n, base.params).sample(k, rng)
        if self.kind == "custom":
            conf = p["confusions"]
            if conf.shape[1] != k:
                raise ValueError(f"custom confusions are {conf.shape[1]}x{conf.shape[1]}, n_classes={k}")
            return conf.copy()
        raise ValueError(f"unknown worker kind {self.kind!r}")


# ========================================================================= assignment
def _random_assignment(n_tasks: int, n_workers: int, l: int, rng) -> np.ndarray:
    """(n_tasks, l) distinct workers per task, uniform subsets (Floyd's algorithm per row)."""
    dtype = np.int32 if n_workers < 2**31 else np.int64
    sel = np.empty((n_tasks, l), dtype=dtype)
    for i, j in enumerate(range(n_workers - l, n_workers)):
        t = rng.integers(0, j + 1, size=n_tasks, dtype=dtype)
        clash = (sel[:, :i] == t[:, None]).any(axis=1) if i else np.zeros(n_tasks, bool)
        sel[:, i] = np.where(clash, j, t)
    return sel


def _duplicate_edges(sel: np.ndarray) -> np.ndarray:
    """Flat positions of repeated workers within rows of ``sel`` (all but one per repeat)."""
    n, l = sel.shape
    if l <= 16:  # pairwise column comparisons beat a row sort for short rows
        dup = np.zeros(sel.shape, dtype=bool)
        for j in range(1, l):
            col = sel[:, j]
            for i in range(j):
                dup[:, j] |= sel[:, i] == col
        rows, cols = np.nonzero(dup)
        return rows * l + cols
    order = np.argsort(sel, axis=1, kind="stable")
    srt = np.take_along_axis(sel, order, axis=1)
    dup = np.zeros(sel.shape, dtype=bool)
    dup[:, 1:] = srt[:, 1:] == srt[:, :-1]
    rows, cols = np.nonzero(dup)
    return rows * l + order[rows, cols]


def _repair_repeats(sel: np.ndarray, rng: np.random.Generator) -> None:
    """Remove repeated workers within rows of ``sel`` in place by degree-preserving switches.

    A repeated entry x at (task a) is exchanged with an entry y at (task b) chosen among
    random candidates such that y is not in task a and x is not in task b; switches of one
    round touch distinct tasks, so each one removes a repeat and creates none.
    """
    n, l = sel.shape
    flat = sel.reshape(-1)
    dup = _duplicate_edges(sel)
    for _ in range(_MAX_REWIRE_ROUNDS):
        if len(dup) == 0:
            return
        d = len(dup)
        c = int(np.clip((1 << 22) // max(d * l, 1), 4, 64))  # candidates per repeat
        a, x = dup // l, flat[dup]
        q = rng.integers(0, n * l, size=(d, c))
        b, y = q // l, flat[q]
        valid = (b != a[:, None])
        valid &= ~(sel[a][:, None, :] == y[:, :, None]).any(axis=2)
        valid &= ~(sel[b] == x[:, None, None]).any(axis=2)
        pick = valid.argmax(axis=1)
        ok = valid[np.arange(d), pick]
        p_src, q_dst = dup[ok], q[ok, pick[ok]]
        # greedy conflict-free subset: a switch is kept when both its tasks are met first
        # in it (tasks interleaved a0, b0, a1, b1, ...; the first switch is always kept)
        rows = np.stack([p_src // l, q_dst // l], axis=1).reshape(-1)
        _, first = np.unique(rows, return_index=True)
        is_first = np.zeros(len(rows), dtype=bool)
        is_first[first] = True
        keep = is_first[0::2] & is_first[1::2]
        p_src, q_dst = p_src[keep], q_dst[keep]
        flat[p_src], flat[q_dst] = flat[q_dst], flat[p_src].copy()
        left = dup[~np.isin(dup, p_src)]
        touched = np.unique(np.concatenate([left // l, q_dst // l, p_src // l]))
        local = _duplicate_edges(sel[touched])
        dup = touched[local // l] * l + local % l
    raise RuntimeError(
        "could not remove repeated (task, worker) pairs from the regular assignment"
    )


def _regular_assignment(n_tasks: int, n_workers: int, l: int, rng) -> np.ndarray:
    """(l, r)-regular bipartite graph: every task l distinct workers, worker degrees balanced.

    Configuration model with stubs shuffled round by round: the worker stubs are laid out
    as ``ceil(r)`` independent random permutations of the workers (the last one truncated
    when ``n_tasks * l`` is not a multiple of ``n_workers``) and cut into consecutive blocks
    of ``l``, one per task.  Repeats can only occur in blocks straddling two rounds; they
    are removed by degree-preserving switches.  Meant for ``l <= n_workers / 2``; denser
    graphs are built as complements (see :func:`assign_workers`).
    """
    n_edges = n_tasks * l
    r, extra = divmod(n_edges, n_workers)
    dtype = np.int32 if n_workers < 2**31 else np.int64
    rounds = np.broadcast_to(np.arange(n_workers, dtype=dtype), (r + (extra > 0), n_workers))
    stubs = rng.permuted(rounds, axis=1).reshape(-1)[:n_edges]
    sel = stubs.reshape(n_tasks, l)
    _repair_repeats(sel, rng)
    return sel


def assign_workers(
    n_tasks: int,
    n_workers: int,
    labels_per_task: int = 5,
    assignment: Assignment = "random",
    seed: Any = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Which worker labels which task.

    Parameters
    ----------
    n_tasks, n_workers : int
    labels_per_task : int
        Distinct workers per task (``l``).
    assignment : {"random", "regular"}
        ``"random"``: each task gets ``l`` distinct workers drawn uniformly (worker loads are
        then binomial).  ``"regular"``: a sparse ``(l, r)``-regular bipartite graph by the
        configuration model: every task gets exactly ``l`` distinct workers and every worker
        exactly ``r = n_tasks * l / n_workers`` tasks (when that does not divide, worker
        degrees are ``floor(r)`` or ``ceil(r)``); repeated pairs are removed by
        degree-preserving switches.  When ``l > n_workers / 2`` the ``n_workers - l`` workers
        a task does *not* get are drawn instead, by the same method.
    seed : int, Generator or None

    Returns
    -------
    task, worker : ndarray of int32, length ``n_tasks * l``
        Sorted by task.
    """
    rng = np.random.default_rng(seed)
    l, n_tasks, n_workers = int(labels_per_task), int(n_tasks), int(n_workers)
    if n_tasks < 1 or n_workers < 1:
        raise ValueError("need at least one task and one worker")
    if not 1 <= l <= n_workers:
        raise ValueError(
            f"labels_per_task must lie in [1, n_workers={n_workers}] (distinct workers per "
            f"task), got {labels_per_task}"
        )
    if assignment == "random":
        build = _random_assignment
    elif assignment == "regular":
        build = _regular_assignment
    else:
        raise ValueError(f"assignment must be 'random' or 'regular', got {assignment!r}")
    if 2 * l <= n_workers:
        sel = build(n_tasks, n_workers, l, rng)
    else:
        # dense: draw the n_workers - l workers each task does NOT get (a uniform subset, or
        # a balanced regular graph, has a complement of the same kind); N x W <= 2 L here
        excluded = build(n_tasks, n_workers, n_workers - l, rng)
        mask = np.ones((n_tasks, n_workers), dtype=bool)
        mask[np.arange(n_tasks)[:, None], excluded] = False
        sel = np.nonzero(mask)[1].reshape(n_tasks, l)
    task = np.repeat(np.arange(n_tasks, dtype=np.int32), l)
    return task, sel.reshape(-1).astype(np.int32, copy=False)


# ============================================================================ drawing
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


def crowd(
    n_tasks: int,
    n_classes: int,
    workers: Sequence[WorkerSpec] | WorkerSpec,
    *,
    labels_per_task: int = 5,
    assignment: Assignment = "random",
    class_prior: Sequence[float] | None = None,
    seed: Any = 0,
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
    assignment : {"random", "regular"}
        See :func:`assign_workers`.
    class_prior : array of shape (n_classes,), optional
        Distribution of the true classes (uniform by default).
    seed : int, Generator or None
        Same seed, same output.

    Returns
    -------
    SimulatedLabels
        Answers sorted by task, ``truth`` set for every task, ``planted`` the worker model.
        Tasks, workers and classes are labelled ``0..n-1``.

    Notes
    -----
    Draw order: true classes, each group's parameters (in list order), the assignment, the
    answers.  Each answer is an exact inverse-CDF draw from its worker's confusion row for
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
    prior = _class_prior(class_prior, k)
    truth = rng.choice(k, size=n_tasks, p=prior).astype(np.int32)

    # ---- worker parameters
    own, kinds, groups, leaders, copy = [], [], [], [], []
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
        start += n
    n_workers = start
    if n_workers < 1:
        raise ValueError("the crowd has no worker")
    own_conf = np.concatenate(own)
    leader = np.concatenate(leaders)
    copy_prob = np.concatenate(copy)
    colluding = leader >= 0
    planted_conf = own_conf.copy()
    if colluding.any():
        cp = copy_prob[colluding][:, None, None]
        planted_conf[colluding] = cp * own_conf[leader[colluding]] + (1 - cp) * own_conf[colluding]

    # ---- who answers what
    task, worker = assign_workers(n_tasks, n_workers, labels_per_task, assignment, rng)

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

    planted = Planted(
        confusions=planted_conf,
        class_prior=prior,
        kind=np.concatenate(kinds).astype(str),
        group=np.concatenate(groups),
        leader=leader,
        copy_prob=copy_prob,
    )
    return SimulatedLabels(
        task,
        worker,
        label,
        tasks=pd.RangeIndex(n_tasks, name="task"),
        workers=pd.RangeIndex(n_workers, name="worker"),
        classes=pd.RangeIndex(k, name="class"),
        truth=truth,
        planted=planted,
    )


# ========================================================================== scenarios
def _special_specs(
    n_workers: int,
    spammers: float,
    adversaries: float,
    colluders: float,
    fixed_class: float,
    colluder_group_size: int,
    accuracy: Range,
) -> tuple[int, list[WorkerSpec]]:
    counts = {}
    for name, frac in (
        ("spammers", spammers),
        ("adversaries", adversaries),
        ("colluders", colluders),
        ("fixed_class", fixed_class),
    ):
        if not 0.0 <= frac <= 1.0:
            raise ValueError(f"{name} is a fraction of n_workers in [0, 1], got {frac!r}")
        counts[name] = int(round(frac * n_workers))
    n_special = sum(counts.values())
    if n_special > n_workers:
        raise ValueError(
            f"the fractions of special workers add up to {n_special} > n_workers={n_workers}"
        )
    specs = []
    if counts["spammers"]:
        specs.append(WorkerSpec.spammer(counts["spammers"]))
    if counts["adversaries"]:
        specs.append(WorkerSpec.adversary(counts["adversaries"], accuracy=accuracy))
    if counts["colluders"]:
        specs.append(WorkerSpec.colluders(counts["colluders"], group_size=colluder_group_size))
    if counts["fixed_class"]:
        specs.append(WorkerSpec.fixed_class(counts["fixed_class"]))
    return n_workers - n_special, specs


def dawid_skene(
    n_tasks: int,
    n_workers: int,
    n_classes: int,
    labels_per_task: int = 5,
    confusions: np.ndarray | None = None,
    class_prior: Sequence[float] | None = None,
    accuracy: Range = (0.6, 0.9),
    assignment: Assignment = "random",
    seed: Any = 0,
    *,
    concentration: float = 1.0,
    spammers: float = 0.0,
    adversaries: float = 0.0,
    colluders: float = 0.0,
    fixed_class: float = 0.0,
    colluder_group_size: int = 5,
) -> SimulatedLabels:
    """Crowd of Dawid-Skene workers, optionally with a share of unreliable ones.

    Parameters
    ----------
    n_tasks, n_workers, n_classes : int
    labels_per_task : int
        Distinct workers per task.
    confusions : ndarray (n_regular, K, K) or (K, K), optional
        Planted confusions of the regular workers ([w, true, answered]), where
        ``n_regular`` is ``n_workers`` minus the special workers (so ``n_workers`` without
        fractions); a single matrix is shared.  Default: drawn, see ``accuracy``.
    class_prior : array (K,), optional
        Distribution of the true classes; uniform by default.
    accuracy : float, (low, high) or array
        Diagonal of the drawn confusions: a (low, high) tuple draws each (worker, class)
        entry uniformly; off-diagonal mass follows a symmetric Dirichlet(``concentration``).
    assignment : {"random", "regular"}
        See :func:`assign_workers`.
    concentration : float
        Dirichlet concentration of the errors (small: errors on one class; large: uniform).
    spammers, adversaries, colluders, fixed_class : float
        Fractions of ``n_workers`` (rounded) replaced by uniform spammers, adversaries
        (permuted one-coin workers drawn in ``accuracy``), colluders (groups of
        ``colluder_group_size`` copying a spammer leader) and fixed-class workers.  They come
        after the regular workers in worker code order; ``planted.kind`` tells them apart.
    colluder_group_size : int
    seed : int, Generator or None

    Returns
    -------
    SimulatedLabels
        See :func:`crowd`.
    """
    n_base, specs = _special_specs(
        n_workers, spammers, adversaries, colluders, fixed_class, colluder_group_size, accuracy
    )
    if confusions is not None:
        conf = np.asarray(confusions, dtype=np.float64)
        if conf.ndim == 3 and conf.shape[0] != n_base:
            raise ValueError(
                f"confusions hold {conf.shape[0]} workers but {n_base} regular workers are "
                f"simulated (n_workers={n_workers} minus special workers)"
            )
        base = WorkerSpec.custom(conf, n=n_base)
    else:
        base = WorkerSpec.diligent(n_base, accuracy=accuracy, concentration=concentration)
    return crowd(
        n_tasks, n_classes, [base, *specs], labels_per_task=labels_per_task,
        assignment=assignment, class_prior=class_prior, seed=seed,
    )


def one_coin(
    n_tasks: int,
    n_workers: int,
    n_classes: int,
    labels_per_task: int = 5,
    accuracy: Range = (0.6, 0.9),
    class_prior: Sequence[float] | None = None,
    assignment: Assignment = "random",
    seed: Any = 0,
    *,
    spammers: float = 0.0,
    adversaries: float = 0.0,
    colluders: float = 0.0,
    fixed_class: float = 0.0,
    colluder_group_size: int = 5,
) -> SimulatedLabels:
    """Crowd of one-coin workers (one accuracy each, errors uniform over other classes).

    Parameters
    ----------
    n_tasks, n_workers, n_classes : int
    labels_per_task : int
    accuracy : float, (low, high) or array (n_workers - special,)
        Worker accuracies; a tuple draws them uniformly.
    class_prior : array (K,), optional
    assignment : {"random", "regular"}
    spammers, adversaries, colluders, fixed_class : float
        Fractions of ``n_workers`` (rounded) replaced by uniform spammers, adversaries
        (permuted one-coin workers drawn in ``accuracy``), colluders (groups of
        ``colluder_group_size`` copying a spammer leader) and fixed-class workers.  They come
        after the regular workers in worker code order; ``planted.kind`` tells them apart.
    colluder_group_size : int
    seed : int, Generator or None

    Returns
    -------
    SimulatedLabels
        See :func:`crowd`.
    """
    n_base, specs = _special_specs(
        n_workers, spammers, adversaries, colluders, fixed_class, colluder_group_size, accuracy
    )
    return crowd(
        n_tasks, n_classes, [WorkerSpec.one_coin(n_base, accuracy), *specs],
        labels_per_task=labels_per_task, assignment=assignment, class_prior=class_prior,
        seed=seed,
    )


def hammer_spammer(
    n_tasks: int,
    n_workers: int,
    n_classes: int = 2,
    labels_per_task: int = 5,
    hammers: float = 0.5,
    hammer_accuracy: float = 1.0,
    class_prior: Sequence[float] | None = None,
    assignment: Assignment = "regular",
    seed: Any = 0,
) -> SimulatedLabels:
    """The hammer-spammer model (Karger, Oh and Shah, 2011).

    A fraction ``hammers`` of the workers (rounded) answer correctly with probability
    ``hammer_accuracy`` (1: always right); the rest are uniform spammers.  The default
    assignment is the ``(l, r)``-regular graph of the original analysis.

    Parameters
    ----------
    n_tasks, n_workers : int
    n_classes : int
    labels_per_task : int
    hammers : float
        Fraction of hammers in [0, 1].
    hammer_accuracy : float
    class_prior : array (K,), optional
    assignment : {"regular", "random"}
    seed : int, Generator or None

    Returns
    -------
    SimulatedLabels
        Hammers are ``kind == "one_coin"``, spammers ``kind == "spammer"``.
    """
    if not 0.0 <= hammers <= 1.0:
        raise ValueError(f"hammers is a fraction in [0, 1], got {hammers!r}")
    n_hammers = int(round(hammers * n_workers))
    specs = [
        WorkerSpec.one_coin(n_hammers, float(hammer_accuracy)),
        WorkerSpec.spammer(n_workers - n_hammers),
    ]
    return crowd(
        n_tasks, n_classes, specs, labels_per_task=labels_per_task, assignment=assignment,
        class_prior=class_prior, seed=seed,
    )
