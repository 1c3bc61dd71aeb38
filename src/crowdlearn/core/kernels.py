"""Sufficient statistics of EM-type aggregators, in log space, without pandas.

Every answer ``i`` has a key ``r_i = worker_i * K + label_i``.  Dawid-Skene style models need
two sums over the L answers:

* E-step: ``logits[n, j] = log_prior[j] + sum_{i in task n} log_table[r_i, j]`` followed by a
  log-sum-exp normalisation per task (the posterior ``q_n``) and the marginal log-likelihood;
* M-step: ``counts[r, j] = sum_{i: r_i = r} q_{task_i}(j)``.

Two back ends compute them: a scipy sparse-product path (always available, best for small
data because nothing needs compiling) and fused numba loops (numba, a dependency of the main install)
that make one pass over the answers and avoid the (L x K) temporaries.  ``backend="auto"``
uses numba for large inputs when it is importable.  Both give the same numbers to rounding,
with two deliberate exceptions from ``FLOAT32_MIN_LABELS`` answers on:

* the numba E-step gathers from a float32 copy of the log table and exponentiates in
  float32 (per-task sums stay float64, posteriors are float64).  At that size the random
  table reads and the N x K exponentials dominate the iteration: float32 halves the cache
  misses (at 10^5 workers the float64 table, 20 MB, no longer fits in cache) and numpy's
  float32 ``exp`` is SIMD.  Posteriors agree with the float64 path to ~1e-6 (absolute), far
  below anything that changes a label;
* the numba M-step scatters into a float32 count table (half the bytes per random update),
  except for rows with more than ``FLOAT32_ROW_MAX_ANSWERS`` answers,
  which go to a float64 side table.  The cap bounds the float32 error: a sum of n terms in
  [0, 1] is off by at most n * 2^-24 relative, 6e-5 at n = 1024, whereas a heavy worker's
  row (10^5 answers) would silently drop posterior mass below half a float32 ulp of its
  running sum.  Counts are returned as float64 either way.

These are per-step differences.  Where the likelihood has several nearby optima, EM can
carry them to different ones: on a 700k-answer crowd with 20,000 workers of ~15 answers
each, both back ends run to convergence (``tol=1e-10``; 423 and 331 iterations) reached
different fixed points, 25 of 100,000 labels apart, with light workers' confusions up to
0.5 apart (log-likelihood -807,227 numpy, -807,193 numba).

Both passes can run on several threads (``n_threads``): the tasks are cut into blocks of
about equal answer counts (:func:`task_blocks`), the compiled loops release the GIL, and
the M-step gives each block its own count table, summed in block order.
"""

from __future__ import annotations

import importlib
import os
import warnings
from functools import lru_cache

import numpy as np

from .data import CrowdLabels
from .stats import logsumexp

__all__ = ["estep", "mstep", "normalize_log", "resolve_backend", "load_compiled",
           "NUMBA_MIN_LABELS"]

#: Below this many answers the sparse path wins (no JIT compilation cost).
NUMBA_MIN_LABELS = 50_000

#: From this many answers on, the numba E-step gathers from a float32 copy of the log table
#: and exponentiates in float32, and the M-step scatters into float32 counts (see the module
#: docstring).
FLOAT32_MIN_LABELS = 500_000

#: Count-table rows (one worker, one answered class) with more answers than this accumulate
#: in float64 even on the float32 M-step path.
FLOAT32_ROW_MAX_ANSWERS = 1024


@lru_cache(maxsize=None)
def load_compiled(module: str):
    """Import (and so compile or load from the disk cache) a module of numba loops.

    Parameters
    ----------
    module : str
        Absolute name of a module that imports numba at its top, e.g.
        ``"crowdlearn.core.compiled"``.

    Returns
    -------
    module or None
        None when numba is unavailable or ``CROWDLEARN_DISABLE_NUMBA`` is set; callers then
        run their pure-numpy loops.
    """
    if os.environ.get("CROWDLEARN_DISABLE_NUMBA"):
        return None
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        # numba is a dependency of the main install, so a missing one is a broken or partial
        # environment: say so once per module (lru_cache), then keep working on numpy loops
        warnings.warn(
            f"crowdlearn: numba is not importable ({exc}); large fits use the slower "
            "pure-numpy loops (pip install numba)",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def compiled_kernels():
    """The fused EM loops (:mod:`crowdlearn.core.compiled`); None when numba is unavailable."""
    return load_compiled("crowdlearn.core.compiled")


def resolve_backend(backend: str, n_labels: int, min_size: int = NUMBA_MIN_LABELS,
                    loader=compiled_kernels) -> str:
    """The back end a fit of ``n_labels`` answers uses: "numpy" or "numba".

    "auto" gives numba from ``min_size`` answers on when ``loader()`` (a function returning
    the compiled module or None) finds it; below that size numba is not even imported.
    "numba" without numba is an ImportError.
    """
    if backend not in ("auto", "numba", "numpy"):
        raise ValueError(f"backend must be 'auto', 'numba' or 'numpy', got {backend!r}")
    if backend == "numpy":
        return "numpy"
    if backend == "auto" and n_labels < min_size:
        # decided from the size alone: importing numba (and loading the compiled loops)
        # costs 1-2 s, more than the whole fit of a small input
        return "numpy"
    have = loader() is not None
    if backend == "numba":
        if not have:
            raise ImportError("backend='numba' needs numba: pip install 'crowdlearn[fast]'")
        return "numba"
    return "numba" if have else "numpy"


def normalize_log(logits: np.ndarray) -> tuple[np.ndarray, float]:
    """Row-wise softmax of ``logits`` in place-safe fashion; returns (posteriors, sum of lse)."""
    lse = logsumexp(logits, axis=1, keepdims=True)
    post = np.exp(logits - lse)
    return post, float(lse.sum())


def estep(
    data: CrowdLabels,
    log_table: np.ndarray,
    log_prior: np.ndarray,
    backend: str = "numpy",
    out: np.ndarray | None = None,
    n_threads: int = 1,
) -> tuple[np.ndarray, float]:
    """Posteriors ``q`` (N x K) and the marginal log-likelihood ``sum_n log p(answers_n)``.

    ``log_table`` has shape (W*K, K): ``log_table[w*K + l, j] = log P(label l | truth j, w)``.
    ``out`` (numba back end): a C-contiguous float64 (N x K) buffer to write the posteriors
    into, so an EM loop does not allocate (and page-fault) N x K memory every iteration.
    ``n_threads`` (numba back end): split the tasks into that many blocks of about equal
    answer counts, one thread each (see :func:`task_blocks`); every posterior is computed
    exactly as with one thread, the log-likelihood is summed block by block.
    """
    log_table = np.ascontiguousarray(log_table, dtype=np.float64)
    log_prior = np.ascontiguousarray(log_prior, dtype=np.float64)
    if backend == "numba":
        kern = compiled_kernels()
        shape = (data.n_tasks, log_table.shape[1])
        if out is None or out.shape != shape or out.dtype != np.float64 or not out.flags.c_contiguous:
            out = np.empty(shape, dtype=np.float64)
        post = out
        row_max = np.empty(data.n_tasks, dtype=np.float64)
        if data.n_labels >= FLOAT32_MIN_LABELS:
            # random reads of a float32 table miss cache half as often, and float32 exp is
            # SIMD; the shifted logits live in float32 scratch (see the module docstring)
            table = log_table.astype(np.float32)
            shifted = np.empty(shape, dtype=np.float32)
            floor = -80.0
        else:
            table, shifted, floor = log_table, post, -700.0

        def block(lo: int, hi: int) -> float:
            kern.shifted_logits(data.task_ptr[lo:hi + 1], data.worker_label, table, log_prior,
                                shifted[lo:hi], row_max[lo:hi], floor)
            np.exp(shifted[lo:hi], out=shifted[lo:hi])  # vectorised; all entries are <= 0
            return kern.normalize_rows(shifted[lo:hi], row_max[lo:hi], post[lo:hi])

        ll = sum(_map_blocks(block, task_blocks(data, n_threads)))
        return post, float(ll)
    logits = data.incidence() @ log_table
    logits += log_prior
    return normalize_log(logits)


def mstep(
    data: CrowdLabels,
    post: np.ndarray,
    backend: str = "numpy",
    out: np.ndarray | None = None,
    n_threads: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Soft counts and class totals.

    Returns ``counts`` (W*K x K) with ``counts[w*K + l, j] = sum of q_n(j) over w's answers
    l`` and ``class_totals[j] = sum_n q_n(j)``.  ``out`` (numba back end): a C-contiguous
    float64 (W*K x K) array to return the counts in (overwritten); on the one-thread float64
    path the loop scatters into it directly, otherwise into scratch tables copied into it.
    ``n_threads`` (numba back end): one private count table per block of tasks, summed in
    block order, so the result depends on ``n_threads`` only through float rounding and is
    reproducible.  Blocks are capped so that each has at least as many answers as its table
    has cells (zeroing and summing the tables would cost more than the threads save).
    """
    post = np.ascontiguousarray(post, dtype=np.float64)
    if backend == "numba":
        kern = compiled_kernels()
        shape = (data.n_workers * data.n_classes, post.shape[1])
        if out is None or out.shape != shape or out.dtype != np.float64 or not out.flags.c_contiguous:
            out = np.empty(shape, dtype=np.float64)
        if data.n_labels >= FLOAT32_MIN_LABELS:
            keys, heavy_rows = _float32_mstep_keys(data)
            dtype = np.float32
        else:
            keys, heavy_rows, dtype = data.worker_label, np.empty(0, dtype=np.intp), np.float64
        cells = shape[0] * shape[1]
        blocks = task_blocks(data, min(n_threads, max(1, data.n_labels // max(cells, 1))))
        if dtype == np.float64 and len(blocks) == 1:
            out.fill(0.0)
            totals = np.zeros(shape[1], dtype=np.float64)
            kern.mstep(data.task_ptr, keys, post, out, np.empty((0, shape[1])), totals)
            return out, totals

        def block(lo: int, hi: int):
            light = np.zeros(shape, dtype=dtype)
            heavy = np.zeros((heavy_rows.size, shape[1]), dtype=np.float64)
            totals = np.zeros(shape[1], dtype=np.float64)
            kern.mstep(data.task_ptr[lo:hi + 1], keys, post[lo:hi], light, heavy, totals)
            return light, heavy, totals

        parts = _map_blocks(block, blocks)
        out[...] = parts[0][0]  # heavy rows are zero in every ``light`` table
        for light, _, _ in parts[1:]:
            out += light
        out[heavy_rows] = sum(p[1] for p in parts)
        return out, sum(p[2] for p in parts)
    return np.asarray(data.incidence().T @ post), post.sum(axis=0)


def task_blocks(data: CrowdLabels, n_blocks: int) -> list[tuple[int, int]]:
    """At most ``n_blocks`` consecutive task ranges ``[lo, hi)`` of about equal answer counts.

    Never an empty block (except for data without tasks).  Balance is only as fine as one
    task's answers, so a few very large tasks give fewer blocks than asked.
    """
    n_blocks = max(1, min(int(n_blocks), data.n_tasks))
    if n_blocks == 1:
        return [(0, data.n_tasks)]
    cuts = np.searchsorted(data.task_ptr, np.linspace(0, data.n_labels, n_blocks + 1)[1:-1])
    bounds = np.unique(np.concatenate([[0], np.clip(cuts, 1, data.n_tasks - 1), [data.n_tasks]]))
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def _map_blocks(fn, blocks: list[tuple[int, int]]) -> list:
    """``[fn(lo, hi) for (lo, hi) in blocks]``, one thread per block when there are several.

    The compiled loops and numpy's ``exp`` release the GIL, so the blocks run in parallel.
    """
    if len(blocks) == 1:
        return [fn(*blocks[0])]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(blocks)) as pool:
        return list(pool.map(lambda b: fn(*b), blocks))


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def resolve_n_jobs(n_jobs: int | None) -> int:
    """Threads for ``n_jobs``, scikit-learn's convention, capped at the usable cores.

    None -> 1, -1 -> every usable core, -2 -> all but one, ...; a positive number above the
    core count gives the core count (more threads only add count tables and contention).
    """
    if n_jobs is None:
        return 1
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs == 0:
        raise ValueError(
            f"n_jobs must be None, a positive number of threads or negative (-1: every core), got {n_jobs!r}"
        )
    cores = usable_cores()
    if n_jobs < 0:
        return max(1, cores + 1 + int(n_jobs))
    return min(int(n_jobs), cores)


def _float32_mstep_keys(data: CrowdLabels) -> tuple[np.ndarray, np.ndarray]:
    """Answer keys for the float32 M-step, and the count-table rows kept in float64.

    Rows with more than ``FLOAT32_ROW_MAX_ANSWERS`` answers are "heavy": their answers get
    the key ``-(h + 1)``, ``h`` the row's index in the returned ``heavy_rows``.  Without heavy
    rows the keys are ``data.worker_label`` itself (no copy).  Cached on ``data``.
    """
    cached = data._codes_cache.get("float32_mstep_keys")
    if cached is not None and cached[2] == FLOAT32_ROW_MAX_ANSWERS:
        return cached[0], cached[1]
    keys = data.worker_label
    n_rows = data.n_workers * data.n_classes
    per_row = np.bincount(keys, minlength=n_rows)
    heavy_rows = np.flatnonzero(per_row > FLOAT32_ROW_MAX_ANSWERS)
    if heavy_rows.size:
        slot = np.zeros(n_rows, dtype=keys.dtype)
        slot[heavy_rows] = -1 - np.arange(heavy_rows.size, dtype=keys.dtype)
        keys = np.where(slot[keys] < 0, slot[keys], keys)
    keys.flags.writeable = False  # shared by every later fit on ``data``
    data._codes_cache["float32_mstep_keys"] = (keys, heavy_rows, FLOAT32_ROW_MAX_ANSWERS)
    return keys, heavy_rows
