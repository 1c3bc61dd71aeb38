"""Numba loop of the leave-one-out statistics of ``partial_fit`` (imported only through
:func:`crowdlearn.aggregation.online.loo_statistics`).

One pass over a batch's answers: each answer's posterior without it (a softmax of its task's
logits minus its own log-confusion row) is summed into its worker's first moments (row
``w*K + answered``) and second moments (rows ``w*K + true``).  The numpy version builds
three (answers x K^2) temporaries and two sparse products per EM round; here nothing of
answer length is written.  Sums run in answer order, so results agree with numpy to
rounding.  Compiled on first use and cached on disk (``cache=True``).
"""

from __future__ import annotations

import numba
import numpy as np

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
            top = -np.inf
            for j in range(k):
                h[j] = logit[t, j] - table[cell[a], j]
                if h[j] > top:
                    top = h[j]
            total = 0.0
            for j in range(k):
                h[j] = np.exp(h[j] - top)
                total += h[j]
            for j in range(k):
                h[j] /= total
        c = cell[a]
        base = worker[a] * k
        for i in range(k):
            first[c, i] += h[i]
            hi = h[i]
            for j in range(k):
                second[base + i, j] += hi * h[j]
