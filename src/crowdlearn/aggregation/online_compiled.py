"""Numba loop of the leave-one-out statistics of ``partial_fit`` (imported only through
:func:`crowdlearn.aggregation.online.loo_statistics`).

One pass over a batch's answers (in worker order, see the caller): each answer's posterior without it (a softmax of its task's
logits minus its own log-confusion row) is summed into its worker's first moments (row
``w*K + answered``) and second moments (rows ``w*K + true``).  The numpy version builds
three (answers x K^2) temporaries and two sparse products per EM round; here nothing of
answer length is written.  Sums run in answer order, so results agree with numpy to
rounding.  Compiled on first use and cached on disk (``cache=True``).
"""

from __future__ import annotations

import numba
import numpy as np

from ..core.compiled import softmax_in_place

__all__ = ["loo_moments"]


@numba.njit(cache=True, nogil=True)
def loo_moments(logit, table, task, cell, worker, fixed, fixed_rows, first, second):
    """Add every answer's leave-one-out moments to ``first`` and ``second`` (both
    (workers * K, K), zeroed by the caller).

    ``logit[t]``: the task's logits with every answer of the batch; ``table[cell[a]]``: the
    log-confusion row answer ``a`` added to them; ``fixed[a]``: use ``fixed_rows[task[a]]``
    as the posterior instead (tasks with no evidence at all keep their vote shares).
    """
    k = logit.shape[1]
    h = np.empty(k)
    for a in range(len(task)):
        t = task[a]
        if fixed[a]:
            for j in range(k):
                h[j] = fixed_rows[t, j]
        else:
            for j in range(k):
                h[j] = logit[t, j] - table[cell[a], j]
            softmax_in_place(h)
        c = cell[a]
        base = worker[a] * k
        for i in range(k):
            first[c, i] += h[i]
            hi = h[i]
            for j in range(k):
                second[base + i, j] += hi * h[j]


@numba.njit(cache=True, nogil=True)
def worker_regressions(s_counts, r_counts, pop, anchor, out):
    """Each worker's ridge regression of :func:`crowdlearn.aggregation.online.regressed_counts`
    into ``out`` (the layout of ``s_counts``): ``(R_w + a I)^-1 (S_w^T + a pop)`` by Cholesky
    (``R_w`` is a sum of outer products, so ``R_w + a I`` is positive definite), rows clipped
    to the simplex, times the worker's class mass."""
    k = pop.shape[0]
    m = s_counts.shape[0] // k
    a = np.empty((k, k))
    b = np.empty((k, k))
    mass = np.empty(k)
    inv = np.empty(k)
    for w in range(m):
        base = w * k
        for i in range(k):
            mass[i] = 0.0
            for j in range(k):
                a[i, j] = r_counts[base + i, j]
                b[i, j] = s_counts[base + j, i] + anchor * pop[i, j]  # [true, answered]
                mass[i] += s_counts[base + j, i]
            a[i, i] += anchor
        # Cholesky a = L L^T, L in the lower triangle of a, 1 / L_jj in inv
        for j in range(k):
            d = a[j, j]
            for p in range(j):
                d -= a[j, p] * a[j, p]
            inv[j] = 1.0 / np.sqrt(d)
            a[j, j] = d * inv[j]
            for i in range(j + 1, k):
                v = a[i, j]
                for p in range(j):
                    v -= a[i, p] * a[j, p]
                a[i, j] = v * inv[j]
        # solve L Y = B, then L^T X = Y, column by column of b (in place)
        for c in range(k):
            for i in range(k):
                v = b[i, c]
                for p in range(i):
                    v -= a[i, p] * b[p, c]
                b[i, c] = v * inv[i]
            for i in range(k - 1, -1, -1):
                v = b[i, c]
                for p in range(i + 1, k):
                    v -= a[p, i] * b[p, c]
                b[i, c] = v * inv[i]
        for i in range(k):
            total = 0.0
            for j in range(k):
                if b[i, j] < 1e-6:
                    b[i, j] = 1e-6
                total += b[i, j]
            for j in range(k):
                out[base + j, i] = mass[i] * b[i, j] / total
