"""Fused numba loops behind :mod:`crowdlearn.kernels` (imported only when numba is present).

The E-step is split in three passes because scalar ``exp`` inside a numba loop costs ~20 ns
(libm, not vectorised) while numpy's SIMD ``exp`` costs ~1 ns: (1) a compiled gather writes
max-shifted logits and the row maxima, (2) ``np.exp`` runs in place over the whole block,
(3) a compiled pass normalises rows and sums the log-normalisers.  The M-step is one
scatter-add pass that also accumulates the class totals.  Everything is compiled on first
use and cached on disk (``cache=True``), so only the first fit on a machine pays the JIT.
"""

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, boundscheck=False)
def shifted_logits(task_ptr, keys, log_table, log_prior, post, row_max):  # pragma: no cover
    """post[n] = max(logits[n] - max(logits[n]), -700); row_max[n] = max(logits[n])."""
    n_tasks, k = post.shape
    for n in range(n_tasks):
        row = post[n]
        for j in range(k):
            row[j] = log_prior[j]
        for i in range(task_ptr[n], task_ptr[n + 1]):
            r = keys[i]
            for j in range(k):
                row[j] += log_table[r, j]
        m = row[0]
        for j in range(1, k):
            if row[j] > m:
                m = row[j]
        for j in range(k):
            # clipping keeps exp() out of the denormal range, whose slow path costs ~10x;
            # exp(-700) ~ 1e-304 is zero for every later use
            row[j] = max(row[j] - m, -700.0)
        row_max[n] = m


@numba.njit(cache=True, nogil=True, boundscheck=False)
def normalize_rows(post, row_max):  # pragma: no cover
    """Rows of exp-shifted logits to probabilities; returns sum_n log sum_j exp(logits)."""
    n_tasks, k = post.shape
    total = 0.0
    for n in range(n_tasks):
        s = 0.0
        for j in range(k):
            s += post[n, j]
        inv = 1.0 / s
        for j in range(k):
            post[n, j] *= inv
        total += row_max[n] + np.log(s)
    return total


@numba.njit(cache=True, nogil=True, boundscheck=False)
def mstep(task_ptr, keys, post, out, class_totals):  # pragma: no cover
    """out[r] += post[n] for every answer with key r; class_totals += post[n] per task."""
    n_tasks, k = post.shape
    for n in range(n_tasks):
        for j in range(k):
            class_totals[j] += post[n, j]
        for i in range(task_ptr[n], task_ptr[n + 1]):
            r = keys[i]
            for j in range(k):
                out[r, j] += post[n, j]
