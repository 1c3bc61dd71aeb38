"""Fused numba loops behind :mod:`crowdlearn.kernels` (imported only when numba is present).

One pass over the answers per step; the (W*K x K) table stays in cache.  Compiled on first
use and cached on disk (``cache=True``), so only the first fit on a machine pays the JIT.
"""

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, fastmath=False)
def estep(task_ptr, keys, log_table, log_prior, post):  # pragma: no cover - compiled
    n_tasks, k = post.shape
    acc = np.empty(k)
    total = 0.0
    for n in range(n_tasks):
        for j in range(k):
            acc[j] = log_prior[j]
        for i in range(task_ptr[n], task_ptr[n + 1]):
            r = keys[i]
            for j in range(k):
                acc[j] += log_table[r, j]
        m = acc[0]
        for j in range(1, k):
            if acc[j] > m:
                m = acc[j]
        s = 0.0
        for j in range(k):
            e = np.exp(acc[j] - m)
            acc[j] = e
            s += e
        inv = 1.0 / s
        for j in range(k):
            post[n, j] = acc[j] * inv
        total += m + np.log(s)
    return total


@numba.njit(cache=True, nogil=True)
def mstep(task_ptr, keys, post, out):  # pragma: no cover - compiled
    n_tasks, k = post.shape
    for n in range(n_tasks):
        for i in range(task_ptr[n], task_ptr[n + 1]):
            r = keys[i]
            for j in range(k):
                out[r, j] += post[n, j]
