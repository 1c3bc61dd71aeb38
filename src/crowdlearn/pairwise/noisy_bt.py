"""NoisyBT: Bradley-Terry with per-worker skill and position bias, by L-BFGS, with a
hierarchical (population) prior on the worker parameters set by empirical Bayes."""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from .base import PairwiseEstimator, PairwiseFit, pair_counts
from .data import Comparisons
from .likelihood import lbfgs_per_answer, rao_kupper_mm
from .links import TINY, fisher_info, observed_probs, outcome_probs, prior_terms

__all__ = ["NoisyBT", "noisy_bt_loss", "worker_information"]

#: precision of the (weak) Gaussian hyper-prior ``N(0, 1 / HYPER_PRECISION)`` on the two
#: population means: keeps them finite when every worker answers consistently
HYPER_PRECISION = 0.1
#: bounds of the empirical-Bayes precisions (a standard deviation of 10 .. 0.01)
LAMBDA_BOUNDS = (1e-2, 1e4)
#: empirical Bayes also stops once a round moved no score by more than this: a precision
#: creeping towards its bound (a worker parameter that does not vary across the crowd) by a
#: few percent per round no longer changes the ranking
EB_SCORE_TOL = 1e-3


def noisy_bt_loss(x: np.ndarray, data: Comparisons, has_ties: bool, prior_strength: float,
                  lambda_bias: float, lambda_skill: float | None = None,
                  population: bool = True):
    """Negative log-posterior of NoisyBT and its exact gradient, O(L).

    ``x = [scores (n_items), q (n_workers), g (n_workers), mu_q, mu_g, log tau (if
    has_ties)]``.  With ``P(o | d)`` the Rao-Kupper outcome probabilities
    (:mod:`crowdlearn.pairwise.links`), answer ``o`` of worker ``w`` on ``(left, right)`` has
    probability

        M = sigmoid(g_w) P(o | s_left - s_right) + (1 - sigmoid(g_w)) P(o | q_w)

    and the loss is

        -sum log M - prior(s) + lambda_bias / 2 * sum (q - mu_q)^2
                              + lambda_skill / 2 * sum (g - mu_g)^2
                              + HYPER_PRECISION / 2 * (mu_q^2 + mu_g^2)

    (``lambda_skill`` defaults to ``lambda_bias``; ``population=False`` holds ``mu_q = mu_g
    = 0``: their gradient is 0).  Gradients, with ``a = sigmoid(g_w)``::

        d log M / d s_left  = a P'(o | d) / M           (and minus that for s_right)
        d log M / d q_w     = (1 - a) P'(o | q_w) / M
        d log M / d g_w     = a (1 - a) (P(o | d) - P(o | q_w)) / M
        d log M / d log tau = tau (a dP(o|d)/dtau + (1 - a) dP(o|q_w)/dtau) / M

    each summed per item or worker by ``np.bincount`` (every answer adds to its own
    worker's entries).
    """
    lam_q = float(lambda_bias)
    lam_g = lam_q if lambda_skill is None else float(lambda_skill)
    n, m = data.n_items, data.n_workers
    s, q, g = x[:n], x[n:n + m], x[n + m:n + 2 * m]
    mu_q, mu_g = float(x[n + 2 * m]), float(x[n + 2 * m + 1])
    tau = float(np.exp(x[n + 2 * m + 2])) if has_ties else 0.0
    left, right, w, o = data.left, data.right, data.worker, data.outcome
    pd_o, dd_d, dt_d = observed_probs(s[left] - s[right], tau, o)
    pq_o, dd_q, dt_q = observed_probs(q[w], tau, o)
    a = expit(g[w])
    mix = np.maximum(a * pd_o + (1.0 - a) * pq_o, TINY)
    prior, prior_grad, _ = prior_terms(s, prior_strength)
    rq, rg = q - mu_q, g - mu_g
    value = (-float(np.sum(np.log(mix))) - float(prior.sum())
             + 0.5 * lam_q * float(rq @ rq) + 0.5 * lam_g * float(rg @ rg)
             + 0.5 * HYPER_PRECISION * (mu_q * mu_q + mu_g * mu_g))

    grad = np.zeros_like(x)
    g_d = a * dd_d / mix
    grad[:n] = -(np.bincount(left, weights=g_d, minlength=n)
                 - np.bincount(right, weights=g_d, minlength=n) + prior_grad)
    grad[n:n + m] = -np.bincount(w, weights=(1.0 - a) * dd_q / mix, minlength=m) + lam_q * rq
    grad[n + m:n + 2 * m] = (-np.bincount(w, weights=a * (1.0 - a) * (pd_o - pq_o) / mix, minlength=m)
                             + lam_g * rg)
    if population:
        grad[n + 2 * m] = -lam_q * float(rq.sum()) + HYPER_PRECISION * mu_q
        grad[n + 2 * m + 1] = -lam_g * float(rg.sum()) + HYPER_PRECISION * mu_g
    if has_ties:
        grad[n + 2 * m + 2] = -tau * float(np.sum((a * dt_d + (1.0 - a) * dt_q) / mix))
    return value, grad


def worker_information(s: np.ndarray, q: np.ndarray, g: np.ndarray, tau: float,
                       data: Comparisons):
    """Fisher information of each worker's answers about its own ``q_w`` and ``g_w``
    (``sum over its answers of sum_o (dP_o/dtheta)^2 / P_o``, ``P`` the mixture); O(L)."""
    m = data.n_workers
    a = expit(g[data.worker])[:, None]
    p_d, _, _ = outcome_probs(s[data.left] - s[data.right], tau)
    p_q, dd_q, _ = outcome_probs(q[data.worker], tau)
    mix = a * p_d + (1.0 - a) * p_q
    info_q = fisher_info(mix, (1.0 - a) * dd_q)
    info_g = fisher_info(mix, a * (1.0 - a) * (p_d - p_q))
    return (np.bincount(data.worker, weights=info_q, minlength=m),
            np.bincount(data.worker, weights=info_g, minlength=m))


def _in_code_order(data: Comparisons) -> Comparisons:
    """``data`` with its answers in (worker, left, right, outcome) code order.

    The objective sums over the answers in the order they are stored, i.e. the rows of the
    file; L-BFGS's and empirical Bayes's stopping rules can turn the rounding difference of
    another order into another number of rounds.  In code order the sums, and so the fit, do
    not depend on the order of the rows.
    """
    order = np.lexsort((data.outcome, data.right, data.left, data.worker))
    if np.array_equal(order, np.arange(len(order))):
        return data
    return Comparisons(data.worker[order], data.left[order], data.right[order], data.outcome[order],
                       data.workers, data.items, truth=data.truth)


def _mackay_precision(resid: np.ndarray, info: np.ndarray, lam: float) -> float:
    """MacKay's (1992) evidence update of a Gaussian prior precision: ``gamma / sum r^2``,
    ``gamma = sum_w I_w / (I_w + lam)`` the number of worker parameters the data determine
    (Laplace approximation, diagonal), bounded to :data:`LAMBDA_BOUNDS`."""
    gamma = float(np.sum(info / (info + lam)))
    ss = float(resid @ resid)
    lo, hi = LAMBDA_BOUNDS
    if ss <= 0.0:
        return hi
    return float(np.clip(gamma / ss, lo, hi))


class NoisyBT(PairwiseEstimator):
    """NoisyBT: Bradley-Terry with a skill and a position bias per worker (the model of
    crowd-kit's ``NoisyBradleyTerry``; Bugakova et al. 2019, "Aggregation of pairwise
    comparisons with reduction of biases", NeurIPS workshop), extended to ties, with a
    hierarchical prior on the worker parameters.

    Model: worker ``w`` either compares the items -- with probability ``sigmoid(g_w)``, its
    skill -- and answers as Bradley-Terry with Rao-Kupper ties would, or guesses, answering
    as if the left item led by ``q_w`` (its position bias)::

        P(o | w, i, j) = sigmoid(g_w) P_RK(o | s_i - s_j) + (1 - sigmoid(g_w)) P_RK(o | q_w)

    Without ties this is exactly crowd-kit's likelihood
    ``sigmoid(g) sigmoid(y (s_i - s_j)) + (1 - sigmoid(g)) sigmoid(y q)``.  Priors::

        s_i ~ virtual-game prior (prior_strength wins and losses against a 0 item)
        q_w ~ N(mu_q, 1 / lambda_bias),    g_w ~ N(mu_g, 1 / lambda_skill)
        mu_q, mu_g ~ N(0, 10)               (population means, fitted)

    A worker with few answers is thus pulled towards the crowd's typical skill and bias,
    not towards ``sigmoid(0) = 1/2`` (half its answers guesses) as a prior centred on 0
    would; a worker with many answers keeps its own.  The objective
    (:func:`noisy_bt_loss`) is minimised by L-BFGS with its analytic gradient, starting
    from the Bradley-Terry scores, ``q = 0`` and ``g = 0``; linear per evaluation.

    ``worker_prior="auto"`` (the default) sets ``lambda_bias`` and ``lambda_skill`` from the
    data by empirical Bayes: starting from 1, it alternates the MAP fit (warm-started) with
    MacKay's evidence update ``lambda <- gamma / sum_w (theta_w - mu)^2``, ``gamma =
    sum_w I_w / (I_w + lambda)`` (``I_w`` the Fisher information of worker ``w``'s answers
    about ``theta_w``; the Laplace approximation of the marginal likelihood), until both
    change by less than 1%, a round moves no score by more than :data:`EB_SCORE_TOL`, or
    after ``max_eb_rounds`` rounds.  This default (a hierarchical prior whose precisions
    are set by empirical Bayes, rather than a fixed prior centred on 0) was chosen on
    synthetic crowds only: ``benchmarks/pairwise_noisybt.py`` scans reversers, guessers with
    a position bias, NoisyBT's own guessing model, all-reliable crowds, skewed worker
    activity and a design that shows the better item more often on one side (section
    ``pairwise-noisybt-prior`` of benchmarks/RESULTS.md).  A fixed strong prior fails where
    many workers reverse (their skills are shrunk to the crowd's); a prior centred on 0 makes
    a worker with few answers half a guesser (above).  Other starting points (zero scores,
    any common ``g``) reached the same optimum where checked.

    Parameters
    ----------
    max_iter : int, default 500
        Maximum L-BFGS iterations (per empirical-Bayes round).
    tol : float, default 1e-9
        L-BFGS stops when the objective per comparison changes by less than ``tol``.
    prior_strength : float, default 1.0
        Virtual wins and losses of every item against a zero-score item.
    worker_prior : "auto", float or (float, float), default "auto"
        Precisions ``(lambda_bias, lambda_skill)`` of the population priors of ``q_w`` and
        ``g_w``; one number sets both; "auto" estimates them (empirical Bayes, above).
    population : bool, default True
        Fit the population means ``mu_q``, ``mu_g``; False holds them at 0 (with
        ``worker_prior=0.1`` this is the model of crowdlearn 0.1.0's NoisyBT).
    max_eb_rounds : int, default 30
        Maximum empirical-Bayes rounds (``worker_prior="auto"`` only).
    random_state : int, default 0
        Unused (deterministic start); kept for the common interface.

    Notes
    -----
    The fit does not depend on the order of the rows (the answers are summed in code order).
    New worker or item ids sum them in another order, and the stopping rules above can then
    end one empirical-Bayes round apart: the scores move a little, like another seed's.

    Attributes
    ----------
    worker_reliability_ : Series worker -> sigmoid(g_w), the skill
    position_bias_ : Series worker -> q_w (> 0: a guessing worker favours the left item)
    population_ : dict with ``mu_bias``, ``mu_skill`` (population means of ``q`` and ``g``),
        ``lambda_bias``, ``lambda_skill`` (prior precisions used) and ``eb_rounds``
    tau_ : float
    n_iter_ : int
        L-BFGS iterations, summed over the empirical-Bayes rounds.
    """

    def __init__(self, max_iter: int = 500, tol: float = 1e-9, prior_strength: float = 1.0,
                 worker_prior="auto", population: bool = True,
                 max_eb_rounds: int = 30, random_state=0):
        self.max_iter = max_iter
        self.tol = tol
        self.prior_strength = prior_strength
        self.worker_prior = worker_prior
        self.population = population
        self.max_eb_rounds = max_eb_rounds
        self.random_state = random_state

    def _precisions(self):
        wp = self.worker_prior
        if isinstance(wp, str):
            if wp != "auto":
                raise ValueError(f"worker_prior must be 'auto' or positive numbers, got {wp!r}")
            return None
        vals = np.broadcast_to(np.asarray(wp, dtype=np.float64), (2,)).copy()
        if not np.all(np.isfinite(vals)) or np.any(vals <= 0):
            raise ValueError(f"worker_prior must be 'auto' or positive numbers, got {wp!r}")
        return float(vals[0]), float(vals[1])

    def _fit(self, data: Comparisons) -> PairwiseFit:
        import pandas as pd

        data = _in_code_order(data)
        fixed = self._precisions()
        n, m = data.n_items, data.n_workers
        lam = float(self.prior_strength)
        has_ties = bool(np.any(data.outcome == 2))
        s0, theta, _, _ = rao_kupper_mm(pair_counts(data), n, np.zeros(n), 2.0, lam, 50, None)
        x = np.concatenate([s0, np.zeros(2 * m), [0.0, 0.0],
                            [np.log(max(np.log(theta), 1e-3))] if has_ties else []])
        lam_q, lam_g = (1.0, 1.0) if fixed is None else fixed
        pop = bool(self.population)
        history: list[float] = []
        n_iter = rounds = 0
        while True:
            s_prev = x[:n].copy()
            x, hist, it, converged = lbfgs_per_answer(
                lambda z: noisy_bt_loss(z, data, has_ties, lam, lam_q, lam_g, pop), x,
                data.n_comparisons, self.max_iter, self.tol)
            history += hist
            n_iter += it
            rounds += 1
            if fixed is not None or rounds >= max(int(self.max_eb_rounds), 1):
                break
            if rounds > 1 and float(np.max(np.abs(x[:n] - s_prev), initial=0.0)) < EB_SCORE_TOL:
                break
            s, q, g = x[:n], x[n:n + m], x[n + m:n + 2 * m]
            tau = float(np.exp(x[n + 2 * m + 2])) if has_ties else 0.0
            info_q, info_g = worker_information(s, q, g, tau, data)
            new_q = _mackay_precision(q - x[n + 2 * m], info_q, lam_q)
            new_g = _mackay_precision(g - x[n + 2 * m + 1], info_g, lam_g)
            if abs(np.log(new_q / lam_q)) < 0.01 and abs(np.log(new_g / lam_g)) < 0.01:
                break
            lam_q, lam_g = new_q, new_g
        s, q, g = x[:n], x[n:n + m], x[n + m:n + 2 * m]
        tau = float(np.exp(x[n + 2 * m + 2])) if has_ties else 0.0
        info, a = self._score_info(x, tau, data)
        population = {"mu_bias": float(x[n + 2 * m]), "mu_skill": float(x[n + 2 * m + 1]),
                      "lambda_bias": lam_q, "lambda_skill": lam_g, "eb_rounds": rounds}
        return PairwiseFit(
            scores=s, info=info, info_pairs=(data.left, data.right),
            prior_curv=prior_terms(s, lam)[2], reliability=expit(g), history=history,
            converged=converged, extra={"position_bias_": pd.Series(q, index=data.workers, name="position_bias"),
                   "population_": population, "tau_": tau,
                   "n_iter_": n_iter})

    @staticmethod
    def _score_info(x: np.ndarray, tau: float, data: Comparisons):
        """Fisher information of each answer about its ``d = s_left - s_right`` (the mixture's)
        and each answer's ``sigmoid(g_w)``."""
        n, m = data.n_items, data.n_workers
        s, q, g = x[:n], x[n:n + m], x[n + m:n + 2 * m]
        a = expit(g[data.worker])
        p_d, dd_d, _ = outcome_probs(s[data.left] - s[data.right], tau)
        p_q, _, _ = outcome_probs(q[data.worker], tau)
        mix = a[:, None] * p_d + (1.0 - a[:, None]) * p_q
        return fisher_info(mix, a[:, None] * dd_d), a
