"""Shared fitting blocks of the pairwise models, each O(distinct pairs) per pass.

* :func:`pair_loglik`: log-likelihood (with the prior) of merged pair counts under the
  logistic or probit link with a tie threshold, and its gradient in the scores and in the
  threshold;
* :func:`rao_kupper_mm`: Hunter's (2004) MM algorithm for Bradley-Terry with Rao-Kupper
  ties, on (possibly fractional) merged counts -- used by ``bt`` and as the M-step of
  ``crowd-bt``;
* :func:`rao_kupper_newton`: damped Newton steps that finish :func:`rao_kupper_mm` where
  MM crawls (items that win or lose all their comparisons) -- in ``bt`` and in each M-step
  of ``crowd-bt``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from .backend import compiled_pairwise, resolve_backend
from .base import DENSE_STDERR_MAX, PairCounts
from .links import TINY, fisher_info, outcome_probs, prior_terms

__all__ = ["pair_loglik", "pair_info", "rao_kupper_mm", "rao_kupper_newton", "lbfgs_per_answer"]


def lbfgs_per_answer(loss, x0: np.ndarray, n_answers: int, max_iter: int, tol: float):
    """Minimise ``loss(x) -> (value, gradient)`` by L-BFGS-B on the per-answer scale (so
    ``tol``, scipy's relative ``ftol``, means the same for any data size).  Returns
    ``(x, history, n_iter, converged)``, ``history`` the log-posterior (minus the loss) per
    iteration, read from the optimiser (no extra evaluations); ``converged`` is False when
    it stopped at ``max_iter`` (or on a line-search failure)."""
    from scipy.optimize import minimize

    scale = max(float(n_answers), 1.0)
    history: list[float] = []

    def scaled(x):
        value, grad = loss(x)
        return value / scale, grad / scale

    def record(intermediate_result):
        history.append(-float(intermediate_result.fun) * scale)

    res = minimize(scaled, x0, jac=True, method="L-BFGS-B", callback=record,
                   options={"maxiter": int(max_iter), "ftol": float(tol), "gtol": 1e-10})
    return res.x, history, int(res.nit), bool(res.success)


def pair_loglik(s: np.ndarray, tau: float, pc: PairCounts, prior_strength: float,
                link: str = "logistic", grad: bool = True):
    """``(loglik, d loglik / d s, d loglik / d tau)`` of the merged counts plus the prior."""
    d = s[pc.a] - s[pc.b]
    p, dd, dt = outcome_probs(d, tau, link)
    counts = np.stack([pc.wins_a, pc.wins_b, pc.ties], axis=1)
    logp = np.log(np.maximum(p, TINY))
    prior, prior_grad, _ = prior_terms(s, prior_strength, link)
    value = float(np.sum(counts * logp) + prior.sum())
    if not grad:
        return value, None, None
    ratio = counts / np.maximum(p, TINY)
    g_d = np.sum(ratio * dd, axis=1)
    n = len(s)
    g_s = (np.bincount(pc.a, weights=g_d, minlength=n) - np.bincount(pc.b, weights=g_d, minlength=n)
           + prior_grad)
    g_tau = float(np.sum(ratio * dt))
    return value, g_s, g_tau


def pair_info(s: np.ndarray, tau: float, pc: PairCounts, link: str = "logistic") -> np.ndarray:
    """Fisher information about ``d`` of each merged pair (answers x information of one)."""
    d = s[pc.a] - s[pc.b]
    n = pc.wins_a + pc.wins_b + pc.ties
    if tau == 0.0 and link == "logistic":  # no ties: the Bernoulli information p (1 - p)
        p = expit(d)
        return n * p * (1.0 - p)
    p, dd, _ = outcome_probs(d, tau, link)
    return n * fisher_info(p, dd)


def _theta_step(theta: float, p: np.ndarray, pc: PairCounts, n_ties: float) -> float:
    """Maximise the Rao-Kupper likelihood in ``theta > 1`` with the strengths fixed:

        f(theta) = T log(theta^2 - 1) - sum [A log(p_a + theta p_b) + B log(p_b + theta p_a)]

    (T ties, A = wins of a + ties, B = wins of b + ties), by Newton steps on
    ``phi = log(theta - 1)`` with step halving, so ``f`` never decreases."""
    pa, pb = p[pc.a], p[pc.b]
    big_a, big_b = pc.wins_a + pc.ties, pc.wins_b + pc.ties

    def f(th):
        return (n_ties * np.log(th * th - 1.0) - np.sum(big_a * np.log(pa + th * pb))
                - np.sum(big_b * np.log(pb + th * pa)))

    phi = np.log(theta - 1.0)
    current = f(theta)
    for _ in range(4):
        th = 1.0 + np.exp(phi)
        x, y = pa + th * pb, pb + th * pa
        g1 = 2.0 * n_ties * th / (th * th - 1.0) - np.sum(big_a * pb / x) - np.sum(big_b * pa / y)
        g2 = (-2.0 * n_ties * (th * th + 1.0) / (th * th - 1.0) ** 2
              + np.sum(big_a * pb * pb / (x * x)) + np.sum(big_b * pa * pa / (y * y)))
        e = th - 1.0  # d theta / d phi
        gp = g1 * e
        hp = g2 * e * e + g1 * e
        step = -gp / hp if hp < 0 else np.sign(gp) * 0.5
        # bounded: theta = 1 + e^30 already makes a strict win (almost) impossible, and with
        # ties only the likelihood keeps rising towards its supremum as theta grows
        step = float(np.clip(phi + np.clip(step, -2.0, 2.0), -30.0, 30.0) - phi)
        for _ in range(20):
            cand = 1.0 + np.exp(phi + step)
            val = f(cand)
            if val >= current:
                phi, current = phi + step, val
                break
            step *= 0.5
        else:
            break
        if abs(step) < 1e-10:
            break
    return float(1.0 + np.exp(phi))


#: the MM loop evaluates its objective (for the stopping rule and ``history``) every this
#: many steps: the log over all pairs costs more than a step itself
CHECK_EVERY = 10


def _segment_sums(weights: np.ndarray, starts: np.ndarray, nonempty: np.ndarray,
                  n_items: int) -> np.ndarray:
    """Per-item sums of ``weights`` over pairs sorted by their first item (``np.add.reduceat``
    on the non-empty segments: a sequential pass, several times faster than a bincount)."""
    out = np.zeros(n_items)
    if len(weights):
        out[nonempty] = np.add.reduceat(weights, starts[nonempty])
    return out


def rao_kupper_mm(pc: PairCounts, n_items: int, s0: np.ndarray, theta0: float,
                  prior_strength: float, max_iter: int, tol: float | None,
                  fit_theta: bool = True, backend: str = "auto"):
    """Hunter's (2004, section 3.2) MM algorithm for Bradley-Terry with Rao-Kupper ties.

    Model: ``P(a beats b) = p_a / (p_a + theta p_b)``, tie with the remaining probability
    ``(theta^2 - 1) p_a p_b / ((p_a + theta p_b)(p_b + theta p_a))``, ``p = exp(s)``,
    ``theta >= 1``.  Minorising each ``-log(x)`` by its tangent gives the update

        p_i <- (W_i + T_i + lambda) / (sum_{terms with p_i} coef / denominator + 2 lambda / (p_i + 1))

    with ``W_i`` wins, ``T_i`` ties of item ``i``, and the prior's ``lambda`` virtual wins and
    losses against an item of strength 1; ``theta`` is then maximised with the strengths
    fixed.  Every step is a few passes over the merged pairs (sorted by their first item, so
    that side is a ``np.repeat`` and a ``np.add.reduceat``): linear.

    Every :data:`CHECK_EVERY` steps the log-likelihood (plus prior) is evaluated; the loop
    stops when it gained less than ``tol`` per answer and step since the last evaluation
    (MM never decreases it), or after ``max_iter`` steps.  ``tol=None``: no evaluation, run
    ``max_iter`` steps.  Returns ``(s, theta, history, steps)``: ``history`` the evaluated
    log-likelihoods (at steps 0, 10, 20, ... before the step, and after the last step),
    ``steps`` the MM steps taken.

    ``backend`` (``"auto"``, ``"numpy"`` or ``"numba"``, :mod:`crowdlearn.pairwise.backend`):
    ``"numba"`` runs the whole loop in one compiled call
    (:func:`crowdlearn.pairwise.compiled.rao_kupper_loop`), the same numbers to rounding.
    """
    a, b = pc.a, pc.b
    if len(a) > 1 and np.any(a[1:] < a[:-1]):  # callers pass pairs sorted by a; be safe
        order = np.argsort(a, kind="stable")
        pc = PairCounts(a[order], b[order], pc.wins_a[order], pc.wins_b[order], pc.ties[order])
        a, b = pc.a, pc.b
    count_a = np.bincount(a, minlength=n_items)
    starts = np.concatenate([[0], np.cumsum(count_a)[:-1]])
    nonempty = count_a > 0
    big_a = pc.wins_a + pc.ties
    big_b = pc.wins_b + pc.ties
    numer = (_segment_sums(big_a, starts, nonempty, n_items)
             + np.bincount(b, weights=big_b, minlength=n_items) + prior_strength)
    n_ties = float(pc.ties.sum())
    n_answers = max(float(pc.wins_a.sum() + pc.wins_b.sum()) + n_ties, 1.0)
    fit_theta = fit_theta and n_ties > 0
    theta = float(theta0) if fit_theta else 1.0
    s = np.array(s0, dtype=np.float64)
    if resolve_backend(backend, len(a)) == "numba":
        # fixed dtypes: one compiled specialisation whatever the callers' integer types
        s, theta, history, steps = compiled_pairwise().rao_kupper_loop(
            np.append(starts, len(a)).astype(np.int64), np.ascontiguousarray(b, dtype=np.int64),
            big_a, big_b, numer, s, theta,
            float(prior_strength), int(max_iter), 0.0 if tol is None else float(tol),
            tol is not None, fit_theta, n_ties, n_answers, CHECK_EVERY)
        return s, float(theta), [float(h) for h in history], int(steps)
    log_numer = np.log(numer)
    total = big_a + big_b

    def loglik(s, theta):
        p = np.exp(s)
        pa, pb = np.repeat(p, count_a), p[b]
        value = float(np.sum((numer - prior_strength) * s))
        value -= float(np.sum(big_a * np.log(pa + theta * pb)))
        value -= float(np.sum(big_b * np.log(pb + theta * pa)))
        if n_ties > 0:
            value += n_ties * np.log(theta * theta - 1.0)
        return value + prior_strength * float(np.sum(s - 2.0 * np.logaddexp(0.0, s)))

    history = []
    steps = 0
    for step in range(int(max_iter)):
        if tol is not None and step % CHECK_EVERY == 0:
            history.append(loglik(s, theta))
            if len(history) > 1 and (history[-1] - history[-2]) < tol * n_answers * CHECK_EVERY:
                break
        p = np.exp(s)
        pa, pb = np.repeat(p, count_a), p[b]
        if not fit_theta:  # theta = 1: both denominators are p_a + p_b, one pass suffices
            w_a = w_b = total / (pa + pb)
        else:
            u = big_a / (pa + theta * pb)
            v = big_b / (pb + theta * pa)
            w_a, w_b = u + theta * v, theta * u + v
        denom = (_segment_sums(w_a, starts, nonempty, n_items)
                 + np.bincount(b, weights=w_b, minlength=n_items)
                 + 2.0 * prior_strength / (p + 1.0))
        s = log_numer - np.log(denom)
        if fit_theta:
            theta = _theta_step(theta, np.exp(s), pc, n_ties)
        steps += 1
    else:
        if tol is not None:
            history.append(loglik(s, theta))
    return s, theta, history, steps


#: at most this many Newton steps finish a fit (``bt``'s, or a ``crowd-bt`` M-step; from MM's
#: point, a few suffice)
NEWTON_STEPS = 50


def _rao_kupper_terms(s: np.ndarray, theta: float, pc: PairCounts, prior_strength: float,
                      backend: str = "auto"):
    """``(log-posterior, gradient in s, Fisher information of each pair)`` of the Rao-Kupper
    model: :func:`pair_loglik` and :func:`pair_info` for the logistic link, in the closed form
    ``sum -A softplus(tau - d) - B softplus(tau + d) + T log(theta^2 - 1)`` plus the prior
    (``A``, ``B`` wins plus ties, ``T`` ties, ``tau = log theta``: a tie's probability is
    ``(theta^2 - 1) P(a wins) P(b wins)``), in one compiled pass over the pairs with numba
    (:func:`crowdlearn.pairwise.compiled.rao_kupper_terms`)."""
    tau = float(np.log(theta))
    n = len(s)
    big_a, big_b = pc.wins_a + pc.ties, pc.wins_b + pc.ties
    prior, grad, _ = prior_terms(s, prior_strength)
    if resolve_backend(backend, len(pc.a)) == "numba":
        info = np.empty(len(pc.a))
        grad = np.array(grad, dtype=np.float64)
        value = compiled_pairwise().rao_kupper_terms(
            s, tau, np.ascontiguousarray(pc.a, dtype=np.int64), np.ascontiguousarray(pc.b, dtype=np.int64),
            big_a, big_b, np.asarray(pc.ties, dtype=np.float64), grad, info)
    else:
        d = s[pc.a] - s[pc.b]
        value = -float(big_a @ np.logaddexp(0.0, tau - d)) - float(big_b @ np.logaddexp(0.0, tau + d))
        g_d = big_a * expit(tau - d) - big_b * expit(tau + d)
        grad = grad + np.bincount(pc.a, weights=g_d, minlength=n) - np.bincount(pc.b, weights=g_d, minlength=n)
        info = pair_info(s, tau, pc)
    n_ties = float(pc.ties.sum())
    if n_ties > 0:
        value += n_ties * float(np.log(theta * theta - 1.0))
    return float(value) + float(prior.sum()), grad, info


def _newton_direction(n_items: int, a: np.ndarray, b: np.ndarray, w: np.ndarray,
                      diag: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Solve ``H x = g`` for ``H`` the weighted graph Laplacian of the pairs (weights ``w``)
    plus ``diag``: positive definite.  Cholesky up to :data:`DENSE_STDERR_MAX` items;
    above, conjugate gradients on the sparse matrix with a Jacobi preconditioner (an inexact
    solve is still an ascent direction, and the step is checked anyway)."""
    if n_items <= DENSE_STDERR_MAX:
        from scipy.linalg import LinAlgError, cho_factor, cho_solve

        h = np.bincount(a * n_items + b, weights=-w, minlength=n_items * n_items).reshape(n_items, n_items)
        h = h + h.T
        h[np.diag_indices(n_items)] = diag
        try:
            return cho_solve(cho_factor(h, lower=False, overwrite_a=True, check_finite=False), g,
                             check_finite=False)
        except (LinAlgError, ValueError):
            return g / diag  # not positive definite to rounding: a diagonal step
    import scipy.sparse as sp
    from scipy.sparse.linalg import LinearOperator, cg

    h = sp.coo_matrix((np.concatenate([-w, -w, diag]),
                       (np.concatenate([a, b, np.arange(n_items)]),
                        np.concatenate([b, a, np.arange(n_items)]))), shape=(n_items, n_items)).tocsr()
    jacobi = LinearOperator((n_items, n_items), matvec=lambda x: x / diag)
    try:
        x, _ = cg(h, g, rtol=1e-8, maxiter=500, M=jacobi)
    except TypeError:  # scipy < 1.12 names the tolerance tol
        x, _ = cg(h, g, tol=1e-8, maxiter=500, M=jacobi)
    return x


def rao_kupper_newton(pc: PairCounts, n_items: int, s: np.ndarray, theta: float,
                      prior_strength: float, tol: float, max_steps: int = NEWTON_STEPS,
                      fit_theta: bool = True):
    """Finish the Rao-Kupper fit of :func:`rao_kupper_mm` by damped Newton steps.

    The counts may be fractional (``crowd-bt``'s M-step: each strict answer split between
    the two wins by the probability that it is the true outcome); the objective is the same
    log-posterior as MM's,

        sum_pairs [W_a log P(a wins) + W_b log P(b wins) + T log P(tie)] + log prior(s)

    (``W_a``, ``W_b`` the wins of each side, ``T`` the ties of the pair).

    MM's steps shrink where the posterior is flat: along the scores of an item that wins (or
    loses) all its comparisons only the prior's weak pull holds it, and hundreds of MM steps
    can stop far from the optimum.  A Newton step uses the curvature: the (expected)
    Hessian of the log-posterior in the scores is the graph Laplacian of the pairs weighted
    by their Fisher information plus the prior's curvature (:func:`pair_info`,
    :func:`~crowdlearn.pairwise.links.prior_terms`; the matrix the standard errors invert),
    positive definite, so each step is an ascent direction; it is halved until the
    log-posterior does not decrease.  With ties ``theta`` is then maximised with the scores
    fixed (as in MM).

    Stops after the first step whose gain predicted by the quadratic model, ``g' H^-1 g / 2``,
    is below ``tol`` per answer (at least 1e-15; that step is tried once, unhalved: near the
    optimum it removes most of the remaining error for one evaluation, and a gain that small
    may be below the rounding of the objective), when no step gains, or after ``max_steps``.
    Returns ``(s, theta, history, steps)``: ``history`` the log-posterior after each step.
    """
    s = np.array(s, dtype=np.float64)
    a, b = pc.a, pc.b
    n_ties = float(pc.ties.sum())
    fit_theta = fit_theta and n_ties > 0
    n_answers = max(float(pc.wins_a.sum() + pc.wins_b.sum()) + n_ties, 1.0)
    floor = max(float(tol or 0.0), 1e-15) * n_answers
    value, g, w = _rao_kupper_terms(s, theta, pc, prior_strength)
    history: list[float] = []
    steps = 0
    for _ in range(int(max_steps)):
        diag = (np.bincount(a, weights=w, minlength=n_items) + np.bincount(b, weights=w, minlength=n_items)
                + prior_terms(s, prior_strength)[2])
        step = _newton_direction(n_items, a, b, w, np.maximum(diag, 1e-12), g)
        predicted = float(g @ step) / 2.0
        if not predicted > 0.0:  # nothing left to gain (or a NaN)
            break
        last = predicted <= floor
        t = 1.0
        for _ in range(1 if last else 30):
            cand = s + t * step
            new_value, new_g, new_w = _rao_kupper_terms(cand, theta, pc, prior_strength)
            if new_value >= value:
                break
            t *= 0.5
        else:
            break  # no step gains: as far as rounding lets it go
        s, value, g, w = cand, new_value, new_g, new_w
        if fit_theta:
            theta = _theta_step(theta, np.exp(s), pc, n_ties)
            value, g, w = _rao_kupper_terms(s, theta, pc, prior_strength)
        history.append(value)
        steps += 1
        if last:
            break
    return s, float(theta), history, steps
