"""Sufficient statistics of EM-type aggregators, in log space, without pandas.

Every answer ``i`` has a key ``r_i = worker_i * K + label_i``.  Dawid-Skene style models need
two sums over the L answers:

* E-step: ``logits[n, j] = log_prior[j] + sum_{i in task n} log_table[r_i, j]`` followed by a
  log-sum-exp normalisation per task (the posterior ``q_n``) and the marginal log-likelihood;
* M-step: ``counts[r, j] = sum_{i: r_i = r} q_{task_i}(j)``.

Two back ends compute them: a scipy sparse-product path (always available, best for small
data because nothing needs compiling) and fused numba loops (``pip install crowdlearn[fast]``)
that make one pass over the answers and avoid the (L x K) temporaries.  ``backend="auto"``
uses numba for large inputs when it is importable.  Both give the same numbers to rounding.
"""

from __future__ import annotations

import os
from functools import lru_cache

import numpy as np
from scipy.special import logsumexp

from .data import CrowdLabels

__all__ = ["estep", "mstep", "normalize_log", "resolve_backend", "NUMBA_MIN_LABELS"]

#: Below this many answers the sparse path wins (no JIT compilation cost).
NUMBA_MIN_LABELS = 50_000


@lru_cache(maxsize=1)
def _numba_kernels():
    """Compile (or load from cache) the fused loops; None when numba is unavailable."""
    if os.environ.get("CROWDLEARN_DISABLE_NUMBA"):
        return None
    try:
        from . import _numba_kernels as mod
    except ImportError:
        return None
    return mod


def resolve_backend(backend: str, n_labels: int) -> str:
    if backend not in ("auto", "numba", "numpy"):
        raise ValueError(f"backend must be 'auto', 'numba' or 'numpy', got {backend!r}")
    if backend == "numpy":
        return "numpy"
    have = _numba_kernels() is not None
    if backend == "numba":
        if not have:
            raise ImportError("backend='numba' needs numba: pip install 'crowdlearn[fast]'")
        return "numba"
    return "numba" if have and n_labels >= NUMBA_MIN_LABELS else "numpy"


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
) -> tuple[np.ndarray, float]:
    """Posteriors ``q`` (N x K) and the marginal log-likelihood ``sum_n log p(answers_n)``.

    ``log_table`` has shape (W*K, K): ``log_table[w*K + l, j] = log P(label l | truth j, w)``.
    """
    log_table = np.ascontiguousarray(log_table, dtype=np.float64)
    log_prior = np.ascontiguousarray(log_prior, dtype=np.float64)
    if backend == "numba":
        kern = _numba_kernels()
        post = np.empty((data.n_tasks, log_table.shape[1]), dtype=np.float64)
        row_max = np.empty(data.n_tasks, dtype=np.float64)
        kern.shifted_logits(data.task_ptr, data.worker_label, log_table, log_prior, post, row_max)
        np.exp(post, out=post)  # SIMD exp over the whole block; all entries are <= 0
        ll = kern.normalize_rows(post, row_max)
        return post, float(ll)
    logits = data.incidence() @ log_table
    logits += log_prior
    return normalize_log(logits)


def mstep(data: CrowdLabels, post: np.ndarray, backend: str = "numpy") -> tuple[np.ndarray, np.ndarray]:
    """Soft counts and class totals.

    Returns ``counts`` (W*K x K) with ``counts[w*K + l, j] = sum of q_n(j) over w's answers
    l`` and ``class_totals[j] = sum_n q_n(j)``.
    """
    post = np.ascontiguousarray(post, dtype=np.float64)
    if backend == "numba":
        kern = _numba_kernels()
        out = np.zeros((data.n_workers * data.n_classes, post.shape[1]), dtype=np.float64)
        totals = np.zeros(post.shape[1], dtype=np.float64)
        kern.mstep(data.task_ptr, data.worker_label, post, out, totals)
        return out, totals
    return np.asarray(data.incidence().T @ post), post.sum(axis=0)
