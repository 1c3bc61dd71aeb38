"""Crowd-BT: Bradley-Terry with a per-worker reliability, fitted by EM."""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from .base import PairwiseEstimator, PairwiseFit, pair_counts
from .data import LEFT, Comparisons
from .likelihood import rao_kupper_mm, rao_kupper_newton
from .links import TINY, fisher_info, outcome_probs, prior_terms

__all__ = ["CrowdBT"]


def _reported_probs(p: np.ndarray, dp: np.ndarray, eta: np.ndarray):
    """Probabilities (and d-derivatives) of what a worker reports: the model's outcome with
    probability ``eta``, the reversed win otherwise; a tie stays a tie."""
    e = eta[:, None]
    swap = p[:, [1, 0, 2]]
    dswap = dp[:, [1, 0, 2]]
    return e * p + (1.0 - e) * swap, e * dp + (1.0 - e) * dswap


class CrowdBT(PairwiseEstimator):
    """Crowd-BT (Chen, Bennett, Collins-Thompson & Horvitz 2013, "Pairwise ranking
    aggregation in a crowdsourced setting", WSDM): Bradley-Terry scores plus one reliability
    ``eta_w`` per worker, fitted by EM.

    Model: the comparison of ``i`` and ``j`` has the Bradley-Terry outcome with Rao-Kupper
    ties (:class:`~crowdlearn.pairwise.bt.BradleyTerry`); worker ``w`` reports it with
    probability ``eta_w`` and the opposite win otherwise (a tie stays a tie)::

        P(w reports "i beats j") = eta_w P(i beats j) + (1 - eta_w) P(j beats i)

    ``eta_w < 1/2`` is a worker who tends to reverse preferences.  Chen et al. fit the model
    online by moment matching; here it is fitted in batch by EM on the latent "reported the
    truth" indicator: the E-step gives each strict answer the probability ``r`` that it is the
    true outcome; the M-step sets ``eta_w = (sum r + alpha) / (n_w + alpha + beta)`` (a Beta
    prior's MAP, over the worker's strict answers) and maximises in the scores and ``theta``
    the Rao-Kupper log-posterior of the fractional wins::

        Q(s, theta) = sum_strict [r log P(said) + (1 - r) log P(reversed)]
                      + sum_ties log P(tie) + log prior(s)

    (``said`` the outcome the worker reported, ``reversed`` the opposite win; the prior is
    :mod:`crowdlearn.pairwise.base`'s virtual games).  As in
    :class:`~crowdlearn.pairwise.bt.BradleyTerry`, ``inner_iter`` MM steps
    (:func:`~crowdlearn.pairwise.likelihood.rao_kupper_mm`) are finished by damped Newton
    steps on ``Q`` (:func:`~crowdlearn.pairwise.likelihood.rao_kupper_newton`): MM alone
    crawls where an item wins (or loses) every comparison, and EM would stop where MM
    stalled, far from the maximum.  No step decreases ``Q``, so the marginal log-posterior never
    decreases; where EM stops moving, its gradient in the scores (``Q``'s at the current
    ``r``) is 0: the scores are then the maximum of the marginal log-posterior for the fitted
    reliabilities.  EM itself converges linearly (the slower the more the reports leave the
    true outcomes in doubt), so ``tol`` bounds the gain per iteration, not the distance to
    that point (~1e-4 in the scores on small always-winner cases).  Linear in the number of
    answers per iteration, plus the Newton steps' linear solve.

    Parameters
    ----------
    max_iter : int, default 100
        Maximum EM iterations.
    inner_iter : int, default 10
        MM steps of the scores per M-step, before the Newton steps that finish it.
    tol : float, default 1e-7
        Stop when the marginal log-posterior per comparison gains less than ``tol`` in an EM
        iteration.  The M-step's Newton steps stop when the gain they predict is below
        ``tol`` per comparison.
    alpha, beta : float, default 2.0 and 1.0
        Beta pseudo-counts of "true" and "reversed" answers added to every worker: a prior
        belief that workers mostly report the truth, which also fixes the labelling (scores
        and reliabilities flipped together explain the data equally well).
    eta_init : float, default 0.9
        Reliability of every worker at the start (scores start at the Bradley-Terry fit).
    prior_strength : float, default 1.0
        Virtual wins and losses of every item against a zero-score item.
    random_state : int, default 0
        Unused (deterministic); kept for the common interface.

    Attributes
    ----------
    worker_reliability_ : Series worker -> eta_w
    theta_ : float
    n_iter_ : int
    """

    def __init__(self, max_iter: int = 100, inner_iter: int = 10, tol: float = 1e-7,
                 alpha: float = 2.0, beta: float = 1.0, eta_init: float = 0.9,
                 prior_strength: float = 1.0, random_state=0):
        self.max_iter = max_iter
        self.inner_iter = inner_iter
        self.tol = tol
        self.alpha = alpha
        self.beta = beta
        self.eta_init = eta_init
        self.prior_strength = prior_strength
        self.random_state = random_state

    def _fit(self, data: Comparisons) -> PairwiseFit:
        if not 0.0 < self.eta_init < 1.0:
            raise ValueError(f"eta_init must lie in (0, 1), got {self.eta_init!r} (CrowdBT)")
        n, m = data.n_items, data.n_workers
        lam = self.prior_strength
        left, right, worker, out = data.left, data.right, data.worker, data.outcome
        strict = out != 2
        is_left = out == LEFT
        n_strict = np.bincount(worker[strict], minlength=m).astype(np.float64)
        scale = max(float(data.n_comparisons), 1.0)

        s, theta, _, _ = rao_kupper_mm(pair_counts(data), n, np.zeros(n), 2.0, lam, 50, None)
        eta = np.full(m, float(self.eta_init))
        history: list[float] = []
        converged = False
        for _ in range(int(self.max_iter)):
            # E-step: probability that each strict answer is the true outcome
            d = s[left] - s[right]
            tau = np.log(theta)
            p_l, p_r = expit(d - tau), expit(-d - tau)
            e = eta[worker]
            p_said = np.where(is_left, p_l, p_r)
            num = e * p_said
            marg = np.where(strict, num + (1.0 - e) * (p_l + p_r - p_said), 1.0 - p_l - p_r)
            loglik = (float(np.sum(np.log(np.maximum(marg, TINY))))
                      + float(prior_terms(s, lam)[0].sum())
                      + float(np.sum(self.alpha * np.log(eta) + self.beta * np.log1p(-eta))))
            if history and loglik - history[-1] < self.tol * scale:
                history.append(loglik)
                converged = True
                break
            history.append(loglik)
            r = np.where(strict, num / np.maximum(marg, TINY), 1.0)
            # M-step: reliabilities in closed form, scores by MM on the fractional wins
            eta = (np.bincount(worker, weights=np.where(strict, r, 0.0), minlength=m)
                   + self.alpha) / (n_strict + self.alpha + self.beta)
            eta = np.clip(eta, 1e-6, 1.0 - 1e-6)
            w_left = np.where(is_left, r, 1.0 - r)
            pc = pair_counts(data, weights_left=w_left)
            s, theta, _, _ = rao_kupper_mm(pc, n, s, theta, lam, self.inner_iter, None)
            # MM crawls where an item wins or loses (almost) everything, and EM would stop
            # where MM stalled; Newton steps reach the M-step's maximum
            s, theta, _, _ = rao_kupper_newton(pc, n, s, theta, lam, self.tol)

        p, dp, _ = outcome_probs(s[left] - s[right], np.log(theta))
        p_rep, dp_rep = _reported_probs(p, dp, eta[worker])
        return PairwiseFit(
            scores=s, info=fisher_info(p_rep, dp_rep), info_pairs=(left, right),
            prior_curv=prior_terms(s, lam)[2], reliability=eta, history=history,
            converged=converged, extra={"theta_": theta, "n_iter_": len(history)})
