"""Thurstone-Mosteller (Case V) scores with Glenn-David ties, by maximum likelihood."""

from __future__ import annotations

from functools import partial

import numpy as np

from .base import PairwiseEstimator, PairwiseFit, pair_counts
from .data import Comparisons
from .likelihood import lbfgs_per_answer, pair_info, pair_loglik
from .links import prior_terms

__all__ = ["Thurstone"]


class Thurstone(PairwiseEstimator):
    """Thurstone-Mosteller (Case V) model with ties, fitted by L-BFGS with exact gradients.

    Model (Thurstone 1927; Mosteller 1951; ties: Glenn & David 1960): item ``i`` is perceived
    as ``s_i + e`` with independent normal noise, so with ``d = s_i - s_j`` on the scale where
    the difference's noise has unit variance::

        P(i beats j) = Phi(d - tau),   P(j beats i) = Phi(-d - tau),   P(tie) = the rest

    ``tau >= 0`` (``tau_``) is fitted when the data has ties, 0 otherwise.  The
    log-likelihood of the comparisons merged per unordered pair, plus the probit version of
    the virtual-game prior (:func:`crowdlearn.pairwise.links.prior_terms`), is concave in the
    scores; its gradient is a pair of ``np.bincount`` over the distinct pairs (linear).

    Parameters
    ----------
    max_iter : int, default 500
        Maximum L-BFGS iterations.
    tol : float, default 1e-9
        L-BFGS stops when the objective per comparison changes by less than ``tol``.
    prior_strength : float, default 1.0
        Virtual wins and losses of every item against a zero-score item.
    random_state : int, default 0
        Unused (deterministic); kept for the common interface.

    Attributes
    ----------
    tau_ : float
    n_iter_ : int
    """

    def __init__(self, max_iter: int = 500, tol: float = 1e-9, prior_strength: float = 1.0,
                 random_state=0):
        self.max_iter = max_iter
        self.tol = tol
        self.prior_strength = prior_strength
        self.random_state = random_state

    def _fit(self, data: Comparisons) -> PairwiseFit:
        pc = pair_counts(data)
        n = data.n_items
        has_ties = bool(pc.ties.sum() > 0)
        lam = self.prior_strength

        def loss(x):
            tau = float(np.exp(x[n])) if has_ties else 0.0
            value, g_s, g_tau = pair_loglik(x[:n], tau, pc, lam, link="probit")
            grad = np.empty_like(x)
            grad[:n] = g_s
            if has_ties:
                grad[n] = g_tau * tau  # d tau / d log tau
            return -value, -grad

        x0 = np.zeros(n + (1 if has_ties else 0))
        if has_ties:
            x0[n] = np.log(0.5)
        x, history, n_iter, converged = lbfgs_per_answer(loss, x0, data.n_comparisons, self.max_iter,
                                              self.tol)
        s = x[:n]
        tau = float(np.exp(x[n])) if has_ties else 0.0
        return PairwiseFit(
            scores=s, info=partial(pair_info, s, tau, pc, link="probit"),
            info_pairs=(pc.a, pc.b),
            prior_curv=prior_terms(s, lam, link="probit")[2], history=history,
            converged=converged, extra={"tau_": tau, "n_iter_": n_iter})
