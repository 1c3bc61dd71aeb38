"""Assignment of workers to tasks: which worker labels which task.

:func:`assign_workers` draws a uniformly random design (each task ``l`` distinct workers)
or an ``(l, r)``-regular bipartite graph (every task ``l`` workers, every worker ``r``
tasks) by the configuration model, the design of the sparse-crowd analyses (Karger, Oh and
Shah, 2011).  Repeated (task, worker) pairs are excluded (random) or repaired by
degree-preserving switches (regular) unless ``allow_repeats=True``.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

__all__ = ["Assignment", "assign_workers"]

Assignment = Literal["random", "regular"]

_MAX_REWIRE_ROUNDS = 10_000


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


def _regular_assignment(n_tasks: int, n_workers: int, l: int, rng, repair: bool = True) -> np.ndarray:
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
    if repair:
        _repair_repeats(sel, rng)
    return sel


def assign_workers(
    n_tasks: int,
    n_workers: int,
    labels_per_task: int = 5,
    assignment: Assignment = "random",
    seed: Any = 0,
    *,
    allow_repeats: bool = False,
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
    allow_repeats : bool
        Keep repeated (task, worker) pairs instead of excluding them: ``"random"`` then
        draws each of the ``l`` slots of a task uniformly with replacement, ``"regular"`` is
        the raw configuration model (exact degrees, repeats not repaired).  ``l`` may then
        exceed ``n_workers``.

    Returns
    -------
    task, worker : ndarray of int32, length ``n_tasks * l``
        Sorted by task.
    """
    rng = np.random.default_rng(seed)
    l, n_tasks, n_workers = int(labels_per_task), int(n_tasks), int(n_workers)
    if n_tasks < 1 or n_workers < 1:
        raise ValueError("need at least one task and one worker")
    if allow_repeats:
        if l < 1:
            raise ValueError(f"labels_per_task must be at least 1, got {labels_per_task}")
        if assignment == "random":
            sel = rng.integers(0, n_workers, size=(n_tasks, l))
        elif assignment == "regular":
            sel = _regular_assignment(n_tasks, n_workers, l, rng, repair=False)
        else:
            raise ValueError(f"assignment must be 'random' or 'regular', got {assignment!r}")
        task = np.repeat(np.arange(n_tasks, dtype=np.int32), l)
        return task, sel.reshape(-1).astype(np.int32, copy=False)
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


