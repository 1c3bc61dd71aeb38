"""Numba loops of the Rao-Kupper MM fit (imported only through :mod:`.backend`).

:func:`rao_kupper_loop` is the whole iteration loop of
:func:`crowdlearn.pairwise.likelihood.rao_kupper_mm` -- MM steps, the ``theta`` update and
the periodic log-likelihood of the stopping rule -- in one compiled call over the merged
pairs, which come sorted by their first item ``a``: item ``a``'s pairs are the slice
``starts[a]:starts[a + 1]``.  The numpy version makes several passes over the pairs per
step (gathers, divisions, ``np.add.reduceat``, ``np.bincount``), each writing a temporary of
pair length; here one pass per step reads each pair once, sums item ``a``'s side in a
register and scatters item ``b``'s into an array of item length that stays in cache.  Sums
run in pair order instead of numpy's pairwise order, so without ties the scores agree with
the numpy loop to rounding (~1e-14), not bit for bit.  With ties, the ``theta`` step accepts
a Newton step when the objective did not decrease; near the optimum a step changes it by
less than its rounding, so the two loops can take different (equally valid) steps and their
scores drift apart by up to ~1e-8 before converging together.  Compiled on first use and
cached on disk (``cache=True``).  :func:`rao_kupper_terms` is the one pass over the pairs
of each Newton step that finishes the fit (log-posterior, gradient, Fisher information).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["rao_kupper_loop", "rao_kupper_terms", "dense_pair_codes", "count_outcomes",
           "union_find_components", "strongly_connected"]


@numba.njit(cache=True, nogil=True)
def _log1p_exp(x):
    """``log(1 + e^x)`` without overflow (``np.logaddexp(0, x)``)."""
    if x > 0.0:
        return x + np.log1p(np.exp(-x))
    return np.log1p(np.exp(x))


@numba.njit(cache=True, nogil=True)
def _pair_log_terms(p, theta, starts, b, big_a, big_b):
    """``sum big_a log(p_a + theta p_b) + big_b log(p_b + theta p_a)`` over the pairs."""
    total = 0.0
    for i in range(len(starts) - 1):
        pa = p[i]
        for k in range(starts[i], starts[i + 1]):
            pb = p[b[k]]
            total += big_a[k] * np.log(pa + theta * pb) + big_b[k] * np.log(pb + theta * pa)
    return total


@numba.njit(cache=True, nogil=True)
def _pair_log_terms_no_ties(p, starts, b, big_ab):
    """:func:`_pair_log_terms` at ``theta = 1``: one log of ``p_a + p_b`` per pair, weighted
    by ``big_ab = big_a + big_b``."""
    total = 0.0
    for i in range(len(starts) - 1):
        pa = p[i]
        for k in range(starts[i], starts[i + 1]):
            total += big_ab[k] * np.log(pa + p[b[k]])
    return total


@numba.njit(cache=True, nogil=True)
def _loglik(s, theta, starts, b, big_a, big_b, big_ab, numer, n_ties, prior_strength):
    """Log-likelihood plus log prior at scores ``s`` (``loglik`` of ``rao_kupper_mm``)."""
    p = np.exp(s)
    value = 0.0
    prior = 0.0
    for i in range(len(s)):
        value += (numer[i] - prior_strength) * s[i]
        prior += s[i] - 2.0 * _log1p_exp(s[i])
    if theta == 1.0:
        value -= _pair_log_terms_no_ties(p, starts, b, big_ab)
    else:
        value -= _pair_log_terms(p, theta, starts, b, big_a, big_b)
    if n_ties > 0:
        value += n_ties * np.log(theta * theta - 1.0)
    return value + prior_strength * prior


@numba.njit(cache=True, nogil=True)
def _theta_objective(th, p, starts, b, big_a, big_b, n_ties):
    return n_ties * np.log(th * th - 1.0) - _pair_log_terms(p, th, starts, b, big_a, big_b)


@numba.njit(cache=True, nogil=True)
def _theta_step(theta, p, starts, b, big_a, big_b, n_ties):
    """``likelihood._theta_step``: Newton steps on ``phi = log(theta - 1)`` with halving."""
    phi = np.log(theta - 1.0)
    current = _theta_objective(theta, p, starts, b, big_a, big_b, n_ties)
    for _ in range(4):
        th = 1.0 + np.exp(phi)
        g1 = 2.0 * n_ties * th / (th * th - 1.0)
        g2 = -2.0 * n_ties * (th * th + 1.0) / (th * th - 1.0) ** 2
        for i in range(len(starts) - 1):
            pa = p[i]
            for k in range(starts[i], starts[i + 1]):
                pb = p[b[k]]
                x = pa + th * pb
                y = pb + th * pa
                g1 -= big_a[k] * pb / x + big_b[k] * pa / y
                g2 += big_a[k] * pb * pb / (x * x) + big_b[k] * pa * pa / (y * y)
        e = th - 1.0  # d theta / d phi
        gp = g1 * e
        hp = g2 * e * e + g1 * e
        step = -gp / hp if hp < 0 else np.sign(gp) * 0.5
        step = min(max(phi + min(max(step, -2.0), 2.0), -30.0), 30.0) - phi
        accepted = False
        for _ in range(20):
            val = _theta_objective(1.0 + np.exp(phi + step), p, starts, b, big_a, big_b, n_ties)
            if val >= current:
                phi, current = phi + step, val
                accepted = True
                break
            step *= 0.5
        if not accepted or abs(step) < 1e-10:
            break
    return 1.0 + np.exp(phi)


@numba.njit(cache=True, nogil=True)
def rao_kupper_loop(starts, b, big_a, big_b, numer, s0, theta0, prior_strength, max_iter,
                    tol, check, fit_theta, n_ties, n_answers, check_every):
    """The MM loop of :func:`crowdlearn.pairwise.likelihood.rao_kupper_mm`.

    Parameters
    ----------
    starts : (n_items + 1,) int64
        Item ``a``'s pairs are ``starts[a]:starts[a + 1]`` (pairs sorted by ``a``).
    b : (n_pairs,) int64
        Second item of every pair.
    big_a, big_b : (n_pairs,) float64
        Wins plus ties of ``a`` and of ``b``.
    numer : (n_items,) float64
        Wins plus ties plus ``prior_strength`` of every item (the MM numerators).
    s0 : (n_items,) float64
        Starting scores.
    theta0 : float
        Starting tie parameter (used when ``fit_theta``; 1 otherwise).
    prior_strength : float
    max_iter : int
    tol : float
        Stopping tolerance per answer and step (read when ``check``).
    check : bool
        Evaluate the log-likelihood every ``check_every`` steps and stop on ``tol``.
    fit_theta : bool
    n_ties, n_answers : float
    check_every : int

    Returns
    -------
    s : (n_items,) float64
    theta : float
    history : float64 array
        Log-likelihoods evaluated (empty unless ``check``).
    steps : int
        MM steps taken.
    """
    n = len(s0)
    s = s0.copy()
    theta = theta0 if fit_theta else 1.0
    log_numer = np.log(numer)
    big_ab = big_a + big_b  # theta = 1 reads one array per pair instead of two
    history = np.empty(max_iter // check_every + 2)
    n_hist = 0
    steps = 0
    stopped = False
    p = np.empty(n)
    denom = np.empty(n)
    for step in range(max_iter):
        if check and step % check_every == 0:
            history[n_hist] = _loglik(s, theta, starts, b, big_a, big_b, big_ab, numer,
                                      n_ties, prior_strength)
            n_hist += 1
            if n_hist > 1 and history[n_hist - 1] - history[n_hist - 2] < tol * n_answers * check_every:
                stopped = True
                break
        for i in range(n):
            p[i] = np.exp(s[i])
            denom[i] = 0.0
        for i in range(n):
            pa = p[i]
            side_a = 0.0  # item i's own sum stays in a register
            for k in range(starts[i], starts[i + 1]):
                j = b[k]
                pb = p[j]
                if fit_theta:
                    u = big_a[k] / (pa + theta * pb)
                    v = big_b[k] / (pb + theta * pa)
                    side_a += u + theta * v
                    denom[j] += theta * u + v
                else:  # theta = 1: both denominators are p_a + p_b, one division
                    w = big_ab[k] / (pa + pb)
                    side_a += w
                    denom[j] += w
            denom[i] += side_a
        for i in range(n):
            s[i] = log_numer[i] - np.log(denom[i] + 2.0 * prior_strength / (p[i] + 1.0))
        if fit_theta:
            theta = _theta_step(theta, np.exp(s), starts, b, big_a, big_b, n_ties)
        steps += 1
    if check and not stopped:
        history[n_hist] = _loglik(s, theta, starts, b, big_a, big_b, big_ab, numer, n_ties,
                                  prior_strength)
        n_hist += 1
    return s, theta, history[:n_hist], steps


@numba.njit(cache=True, nogil=True)
def _softplus_expit(x):
    """``(log(1 + e^x), 1 / (1 + e^-x))`` from one exponential and one log, without overflow."""
    e = np.exp(-abs(x))
    if x >= 0.0:
        return x + np.log1p(e), 1.0 / (1.0 + e)
    return np.log1p(e), e / (1.0 + e)


@numba.njit(cache=True, nogil=True)
def rao_kupper_terms(s, tau, a, b, big_a, big_b, ties, grad, info):
    """One pass over the merged pairs for the Newton steps of
    :func:`crowdlearn.pairwise.likelihood.rao_kupper_newton`: returns the log-likelihood
    ``sum -A softplus(tau - d) - B softplus(tau + d)`` (``d = s_a - s_b``, ``A``/``B`` wins
    plus ties; without the ties' ``T log(theta^2 - 1)`` and the prior), adds its gradient in
    the scores to ``grad`` and writes every pair's Fisher information about ``d`` into
    ``info`` (:func:`crowdlearn.pairwise.likelihood.pair_info`).  Without ties (``tau = 0``)
    the two sides share one exponential and one log."""
    total = 0.0
    for k in range(len(a)):
        i = a[k]
        j = b[k]
        d = s[i] - s[j]
        x = tau - d
        sp_x, q_x = _softplus_expit(x)  # q_x = 1 - P(a wins)
        if tau == 0.0:  # y = -x
            sp_y, q_y = sp_x - x, 1.0 - q_x
        else:
            sp_y, q_y = _softplus_expit(tau + d)  # q_y = 1 - P(b wins)
        total -= big_a[k] * sp_x + big_b[k] * sp_y
        g = big_a[k] * q_x - big_b[k] * q_y
        grad[i] += g
        grad[j] -= g
        n = big_a[k] + big_b[k] - ties[k]
        p_l = 1.0 - q_x  # F(d - tau)
        p_r = 1.0 - q_y  # F(-d - tau)
        f_l = p_l * q_x  # the logistic density at d - tau and at -d - tau
        f_r = p_r * q_y
        if tau == 0.0:
            info[k] = n * f_l
        else:
            p_t = max(1.0 - p_l - p_r, 0.0)
            dt = f_r - f_l
            info[k] = n * (f_l * f_l / max(p_l, 1e-12) + f_r * f_r / max(p_r, 1e-12)
                           + dt * dt / max(p_t, 1e-12))
    return total


@numba.njit(cache=True, nogil=True)
def dense_pair_codes(left, right, n_items):
    """:meth:`Comparisons.pair_index`'s dense numbering in three passes and no temporaries.

    Marks every comparison's pair ``min * n_items + max`` in an ``int32`` array of
    ``n_items^2`` entries, numbers the marked pairs in order (they come out sorted by ``a``,
    then ``b``), and reads each comparison's number back.  Returns ``(codes, a, b)``.
    """
    number = np.zeros(n_items * n_items, dtype=np.int32)
    for i in range(len(left)):
        lo, hi = min(left[i], right[i]), max(left[i], right[i])
        number[lo * n_items + hi] = 1
    n_pairs = 0
    for key in range(n_items * n_items):
        n_pairs += number[key]
    a = np.empty(n_pairs, dtype=np.int64)
    b = np.empty(n_pairs, dtype=np.int64)
    code = 0
    for i in range(n_items):
        for j in range(i + 1, n_items):
            if number[i * n_items + j]:
                number[i * n_items + j] = code
                a[code] = i
                b[code] = j
                code += 1
    codes = np.empty(len(left), dtype=np.int64)
    for i in range(len(left)):
        lo, hi = min(left[i], right[i]), max(left[i], right[i])
        codes[i] = number[lo * n_items + hi]
    return codes, a, b


@numba.njit(cache=True, nogil=True)
def count_outcomes(codes, swap, outcome, n_pairs):
    """Whole-count merge of :func:`crowdlearn.pairwise.base.pair_counts`: a (3, n_pairs)
    array of the wins of ``a``, the wins of ``b`` and the ties of every pair.

    Counted in an (n_pairs, 3) ``int32`` table, so that a comparison touches one cache line
    and the table is a third of float64 rows' size, then transposed to float64.
    """
    table = np.zeros((n_pairs, 3), dtype=np.int32)
    for i in range(len(codes)):
        side = outcome[i]
        if side < 2 and swap[i]:  # the left item is b: left and right trade places
            side = 1 - side
        table[codes[i], side] += 1
    counts = np.empty((3, n_pairs))
    for k in range(n_pairs):
        for side in range(3):
            counts[side, k] = table[k, side]
    return counts


@numba.njit(cache=True, nogil=True)
def _union(parent, x, y):
    """Join the trees of ``x`` and ``y`` under the smaller root (path halving keeps the
    trees flat); whether they were apart."""
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    while parent[y] != y:
        parent[y] = parent[parent[y]]
        y = parent[y]
    if x == y:
        return False
    if x < y:
        parent[y] = x
    else:
        parent[x] = y
    return True


@numba.njit(cache=True, nogil=True)
def union_find_components(a, b, n_items):
    """Connected components of the graph with edges ``(a, b)``: ``(count, labels)``, labels
    numbered in order of each component's smallest item (as scipy's ``connected_components``
    numbers them)."""
    parent = np.arange(n_items)
    for k in range(len(a)):
        _union(parent, a[k], b[k])
    labels = np.empty(n_items, dtype=np.int32)
    count = 0
    for i in range(n_items):
        root = i
        while parent[root] != root:
            root = parent[root]
        if root == i:  # the smallest item of its component: roots are the smallest items
            labels[i] = count
            count += 1
        else:
            labels[i] = labels[root]
    return count, labels


@numba.njit(cache=True, nogil=True)
def _reaches_all(src, dst, n_items, first, n_present):
    """Whether a depth-first search from item ``first`` along the edges ``src -> dst`` reaches
    ``n_present`` items (adjacency built by a counting sort: O(edges + items))."""
    start = np.zeros(n_items + 1, dtype=np.int64)
    for e in range(len(src)):
        start[src[e] + 1] += 1
    for i in range(n_items):
        start[i + 1] += start[i]
    adj = np.empty(len(src), dtype=np.int64)
    fill = start[:-1].copy()
    for e in range(len(src)):
        adj[fill[src[e]]] = dst[e]
        fill[src[e]] += 1
    seen = np.zeros(n_items, dtype=np.bool_)
    stack = np.empty(n_items, dtype=np.int64)
    seen[first] = True
    stack[0] = first
    top, count = 1, 1
    while top > 0:
        top -= 1
        u = stack[top]
        for k in range(start[u], start[u + 1]):
            v = adj[k]
            if not seen[v]:
                seen[v] = True
                stack[top] = v
                top += 1
                count += 1
    return count == n_present


@numba.njit(cache=True, nogil=True)
def _n_present(a, b, n_items):
    """How many items occur in the pairs."""
    present = np.zeros(n_items, dtype=np.bool_)
    for k in range(len(a)):
        present[a[k]] = True
        present[b[k]] = True
    return int(present.sum())


@numba.njit(cache=True, nogil=True)
def strongly_connected(a, b, wins_a, wins_b, ties, n_items):
    """Whether the directed graph on the items of the pairs, with an edge ``a -> b`` where
    ``a`` beat or tied with ``b`` (and ``b -> a`` likewise), is strongly connected.  Items in
    no pair are left out.

    First the common case: the pairs that went both ways already connect every item
    (:func:`_mutually_connected`, which stops once they do, usually after a small share of
    the pairs).  Otherwise one item must reach every item, and every item reach it (a search
    on the reversed edges)."""
    n_present = _n_present(a, b, n_items)
    if n_present <= 1 or _mutually_connected(a, b, wins_a, wins_b, ties, n_items, n_present):
        return True
    n_edges = 0
    for k in range(len(a)):
        n_edges += (wins_a[k] > 0 or ties[k] > 0) + (wins_b[k] > 0 or ties[k] > 0)
    src = np.empty(n_edges, dtype=np.int64)
    dst = np.empty(n_edges, dtype=np.int64)
    e = 0
    for k in range(len(a)):
        if wins_a[k] > 0 or ties[k] > 0:
            src[e], dst[e] = a[k], b[k]
            e += 1
        if wins_b[k] > 0 or ties[k] > 0:
            src[e], dst[e] = b[k], a[k]
            e += 1
    return (_reaches_all(src, dst, n_items, a[0], n_present)
            and _reaches_all(dst, src, n_items, a[0], n_present))


@numba.njit(cache=True, nogil=True)
def _mutually_connected(a, b, wins_a, wins_b, ties, n_items, n_present):
    """Whether the pairs whose items both beat (or tied) each other connect the
    ``n_present`` items of the pairs: a union-find over them that stops as soon as one
    component is left.  Sufficient for strong connectivity."""
    parent = np.arange(n_items)
    merges = 0
    for k in range(len(a)):
        if not (ties[k] > 0 or (wins_a[k] > 0 and wins_b[k] > 0)):
            continue
        if _union(parent, a[k], b[k]):
            merges += 1
            if merges == n_present - 1:
                return True
    return False
