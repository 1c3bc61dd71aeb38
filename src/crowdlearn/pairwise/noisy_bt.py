"""NoisyBT: Bradley-Terry with per-worker skill and position bias, by L-BFGS."""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from .base import PairwiseEstimator, PairwiseFit, pair_counts
from .data import Comparisons
from .likelihood import lbfgs_per_answer, rao_kupper_mm
from .links import TINY, fisher_info, observed_probs, outcome_probs, prior_terms

__all__ = ["NoisyBT", "noisy_bt_loss"]


def noisy_bt_loss(x: np.ndarray, data: Comparisons, has_ties: bool, prior_strength: float,
                  lambda_worker: float):
    """Negative log-posterior of NoisyBT and its exact gradient, O(L).

    ``x = [scores (n_items), q (n_workers), g (n_workers), log tau (if has_ties)]``.  With
    ``P(o | d)`` the Rao-Kupper outcome probabilities (:mod:`crowdlearn.pairwise.links`),
    answer ``o`` of worker ``w`` on ``(left, right)`` has probability

        M = sigmoid(g_w) P(o | s_left - s_right) + (1 - sigmoid(g_w)) P(o | q_w)

    and the loss is ``-sum log M - prior(s) + lambda_worker / 2 * sum(q^2 + g^2)``.
    Gradients, with ``a = sigmoid(g_w)``::

        d log M / d s_left  = a P'(o | d) / M           (and minus that for s_right)
        d log M / d q_w     = (1 - a) P'(o | q_w) / M
        d log M / d g_w     = a (1 - a) (P(o | d) - P(o | q_w)) / M
        d log M / d log tau = tau (a dP(o|d)/dtau + (1 - a) dP(o|q_w)/dtau) / M

    each summed per item or worker by ``np.bincount`` (every answer adds to its own
    worker's entries).
    """
    n, m = data.n_items, data.n_workers
    s, q, g = x[:n], x[n:n + m], x[n + m:n + 2 * m]
    tau = float(np.exp(x[n + 2 * m])) if has_ties else 0.0
    left, right, w, o = data.left, data.right, data.worker, data.outcome
    pd_o, dd_d, dt_d = observed_probs(s[left] - s[right], tau, o)
    pq_o, dd_q, dt_q = observed_probs(q[w], tau, o)
    a = expit(g[w])
    mix = np.maximum(a * pd_o + (1.0 - a) * pq_o, TINY)
    prior, prior_grad, _ = prior_terms(s, prior_strength)
    value = (-float(np.sum(np.log(mix))) - float(prior.sum())
             + 0.5 * lambda_worker * float(np.sum(q * q) + np.sum(g * g)))

    grad = np.zeros_like(x)
    g_d = a * dd_d / mix
    grad[:n] = -(np.bincount(left, weights=g_d, minlength=n)
                 - np.bincount(right, weights=g_d, minlength=n) + prior_grad)
    grad[n:n + m] = -np.bincount(w, weights=(1.0 - a) * dd_q / mix, minlength=m) + lambda_worker * q
    grad[n + m:n + 2 * m] = (-np.bincount(w, weights=a * (1.0 - a) * (pd_o - pq_o) / mix, minlength=m)
                             + lambda_worker * g)
    if has_ties:
        grad[n + 2 * m] = -tau * float(np.sum((a * dt_d + (1.0 - a) * dt_q) / mix))
    return value, grad


class NoisyBT(PairwiseEstimator):
    """NoisyBT: Bradley-Terry with a skill and a position bias per worker (the model of
    crowd-kit's ``NoisyBradleyTerry``; Bugakova et al. 2019, "Aggregation of pairwise
    comparisons with reduction of biases", NeurIPS workshop), extended to ties.

    Model: worker ``w`` either compares the items -- with probability ``sigmoid(g_w)``, its
    skill -- and answers as Bradley-Terry with Rao-Kupper ties would, or guesses, answering
    as if the left item led by ``q_w`` (its position bias)::

        P(o | w, i, j) = sigmoid(g_w) P_RK(o | s_i - s_j) + (1 - sigmoid(g_w)) P_RK(o | q_w)

    Without ties this is exactly crowd-kit's likelihood
    ``sigmoid(g) sigmoid(y (s_i - s_j)) + (1 - sigmoid(g)) sigmoid(y q)``.  The objective
    (:func:`noisy_bt_loss`: negative log-likelihood, the virtual-game prior on scores and a
    Gaussian prior ``lambda_worker / 2 * (q^2 + g^2)`` on the worker parameters, which keeps
    a worker with few answers finite) is minimised by L-BFGS with its analytic gradient,
    starting from the Bradley-Terry scores, ``q = 0`` and ``g = 0``.  Linear per evaluation.

    Parameters
    ----------
    max_iter : int, default 500
        Maximum L-BFGS iterations.
    tol : float, default 1e-9
        L-BFGS stops when the objective per comparison changes by less than ``tol``.
    prior_strength : float, default 1.0
        Virtual wins and losses of every item against a zero-score item.
    lambda_worker : float, default 0.1
        Precision of the Gaussian prior on ``q_w`` and ``g_w``.
    random_state : int, default 0
        Unused (deterministic start); kept for the common interface.

    Attributes
    ----------
    worker_reliability_ : Series worker -> sigmoid(g_w), the skill
    position_bias_ : Series worker -> q_w (> 0: a guessing worker favours the left item)
    tau_ : float
    n_iter_ : int
    """

    def __init__(self, max_iter: int = 500, tol: float = 1e-9, prior_strength: float = 1.0,
                 lambda_worker: float = 0.1, random_state=0):
        self.max_iter = max_iter
        self.tol = tol
        self.prior_strength = prior_strength
        self.lambda_worker = lambda_worker
        self.random_state = random_state

    def _fit(self, data: Comparisons) -> PairwiseFit:
        import pandas as pd

        n, m = data.n_items, data.n_workers
        lam = self.prior_strength
        has_ties = bool(np.any(data.outcome == 2))
        s0, theta, _, _ = rao_kupper_mm(pair_counts(data), n, np.zeros(n), 2.0, lam, 50, None)
        x0 = np.concatenate([s0, np.zeros(2 * m), [np.log(max(np.log(theta), 1e-3))] if has_ties else []])
        x, history, n_iter = lbfgs_per_answer(
            lambda z: noisy_bt_loss(z, data, has_ties, lam, self.lambda_worker), x0,
            data.n_comparisons, self.max_iter, self.tol)
        s, q, g = x[:n], x[n:n + m], x[n + m:n + 2 * m]
        tau = float(np.exp(x[n + 2 * m])) if has_ties else 0.0
        a = expit(g[data.worker])
        p_d, dd_d, _ = outcome_probs(s[data.left] - s[data.right], tau)
        p_q, _, _ = outcome_probs(q[data.worker], tau)
        mix = a[:, None] * p_d + (1.0 - a[:, None]) * p_q
        return PairwiseFit(
            scores=s, info=fisher_info(mix, a[:, None] * dd_d), info_pairs=(data.left, data.right),
            prior_curv=prior_terms(s, lam)[2], reliability=expit(g), history=history,
            extra={"position_bias_": pd.Series(q, index=data.workers, name="position_bias"),
                   "tau_": tau, "n_iter_": n_iter})
