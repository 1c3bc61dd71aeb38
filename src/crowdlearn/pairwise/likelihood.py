"""Shared fitting blocks of the pairwise models, each O(distinct pairs) per pass.

* :func:`pair_loglik`: log-likelihood (with the prior) of merged pair counts under the
  logistic or probit link with a tie threshold, and its gradient in the scores and in the
  threshold;
* :func:`rao_kupper_mm`: Hunter's (2004) MM algorithm for Bradley-Terry with Rao-Kupper
  ties, on (possibly fractional) merged counts -- used by ``bt`` and as the M-step of
  ``crowd-bt``.
"""

from __future__ import annotations

import numpy as np

from .base import PairCounts
from .links import TINY, fisher_info, outcome_probs, prior_terms

__all__ = ["pair_loglik", "pair_info", "rao_kupper_mm"]


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
    p, dd, _ = outcome_probs(s[pc.a] - s[pc.b], tau, link)
    return (pc.wins_a + pc.wins_b + pc.ties) * fisher_info(p, dd)


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
        step = float(np.clip(step, -2.0, 2.0))
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


def rao_kupper_mm(pc: PairCounts, n_items: int, s0: np.ndarray, theta0: float,
                  prior_strength: float, max_iter: int, tol: float, fit_theta: bool = True):
    """Hunter's (2004, section 3.2) MM algorithm for Bradley-Terry with Rao-Kupper ties.

    Model: ``P(a beats b) = p_a / (p_a + theta p_b)``, tie with the remaining probability
    ``(theta^2 - 1) p_a p_b / ((p_a + theta p_b)(p_b + theta p_a))``, ``p = exp(s)``,
    ``theta >= 1``.  Minorising each ``-log(x)`` by its tangent gives the update

        p_i <- (W_i + T_i + lambda) / (sum_{terms with p_i} coef / denominator + 2 lambda / (p_i + 1))

    with ``W_i`` wins, ``T_i`` ties of item ``i``, and the prior's ``lambda`` virtual wins and
    losses against an item of strength 1; ``theta`` is then maximised with the strengths
    fixed.  Every pass is a few ``np.bincount`` over the merged pairs: linear.

    Stops when the log-likelihood (plus prior) per answer gains less than ``tol`` in an
    iteration (MM never decreases it), or after ``max_iter`` MM steps.  Returns
    ``(s, theta, history)``; ``history`` holds the log-likelihood (plus prior) of each
    iterate before its step (so the last entry lags the returned scores by one step).
    """
    a, b = pc.a, pc.b
    big_a = pc.wins_a + pc.ties
    big_b = pc.wins_b + pc.ties
    numer = (np.bincount(a, weights=big_a, minlength=n_items)
             + np.bincount(b, weights=big_b, minlength=n_items) + prior_strength)
    n_ties = float(pc.ties.sum())
    n_answers = max(float(pc.wins_a.sum() + pc.wins_b.sum()) + n_ties, 1.0)
    fit_theta = fit_theta and n_ties > 0
    theta = float(theta0) if fit_theta else 1.0
    s = np.asarray(s0, dtype=np.float64).copy()
    log_numer = np.log(numer)
    plain = not fit_theta  # theta = 1: both denominators are p_a + p_b, one pass suffices
    total = big_a + big_b
    history = []
    for _ in range(int(max_iter)):
        p = np.exp(s)
        pa, pb = p[a], p[b]
        prior = prior_strength * float(np.sum(s - 2.0 * np.logaddexp(0.0, s)))
        if plain:
            x = pa + pb
            # log-likelihood (plus prior) at the current iterate, from the step's own terms
            loglik = float(np.dot(numer - prior_strength, s)) - float(np.dot(total, np.log(x))) + prior
            w_a = w_b = total / x
        else:
            x = pa + theta * pb
            y = pb + theta * pa
            loglik = (float(np.dot(numer - prior_strength, s)) - float(np.dot(big_a, np.log(x)))
                      - float(np.dot(big_b, np.log(y))) + n_ties * np.log(theta * theta - 1.0)
                      + prior)
            u = big_a / x
            v = big_b / y
            w_a, w_b = u + theta * v, theta * u + v
        if history and loglik - history[-1] < tol * n_answers:
            history.append(loglik)
            break
        history.append(loglik)
        denom = (np.bincount(a, weights=w_a, minlength=n_items)
                 + np.bincount(b, weights=w_b, minlength=n_items)
                 + 2.0 * prior_strength / (p + 1.0))
        s = log_numer - np.log(denom)
        if fit_theta:
            theta = _theta_step(theta, np.exp(s), pc, n_ties)
    return s, theta, history
