"""Bradley-Terry with Rao-Kupper ties, fitted by Hunter's MM algorithm."""

from __future__ import annotations

from functools import partial

import numpy as np

from .base import PairwiseEstimator, PairwiseFit, pair_counts, wins_strongly_connected
from .data import Comparisons
from .likelihood import pair_info, rao_kupper_mm, rao_kupper_newton
from .links import prior_terms

__all__ = ["BradleyTerry"]


class BradleyTerry(PairwiseEstimator):
    """Bradley-Terry scores with ties (Rao-Kupper), by the MM algorithm.

    Model (Bradley & Terry 1952; ties: Rao & Kupper 1967), with ``p_i = exp(score_i)``::

        P(i beats j) = p_i / (p_i + theta p_j)
        P(i ties j)  = (theta^2 - 1) p_i p_j / ((p_i + theta p_j) (p_j + theta p_i))

    ``theta >= 1`` is fitted when the data has ties (``theta_``; 1 otherwise: the plain
    model).  Rao-Kupper rather than Davidson (1970) because its likelihood keeps the form
    ``log p - log(linear in p)`` that Hunter's (2004, "MM algorithms for generalized
    Bradley-Terry models", Ann. Statist. 32(1)) minorisation needs, so each MM step is
    closed-form (:func:`crowdlearn.pairwise.likelihood.rao_kupper_mm`).  Comparisons are
    merged per unordered pair once (O(L)); each iteration is a few ``np.bincount`` over the
    distinct pairs.  Every worker's answer counts the same (no worker model).

    The fit is the maximum of the posterior under the virtual-game prior of
    :mod:`crowdlearn.pairwise.base` (``prior_strength`` wins and losses of every item against
    a zero-score item): an item that wins (or loses) every comparison, whose likelihood alone
    has its maximum at infinity, gets a finite score, first (last) in the ranking.  Near such
    items MM's steps shrink to nothing, so when the "beat or tied with" graph is not strongly
    connected (:func:`~crowdlearn.pairwise.base.wins_strongly_connected`, Ford's condition
    for a finite maximum likelihood) MM is finished by Newton steps on the same posterior
    (:func:`crowdlearn.pairwise.likelihood.rao_kupper_newton`), which reach its maximum in a
    few steps: two items compared only against each other, one always
    winning, get opposite scores, as the symmetric prior implies.

    Parameters
    ----------
    max_iter : int, default 500
        Maximum MM iterations (the Newton steps that follow, when the win graph is not
        strongly connected, are at most 50 more).
    tol : float, default 1e-8
        Stop MM when the log-likelihood per comparison gained less than ``tol`` per iteration
        over the last 10 iterations (it is evaluated every 10); 0 stops only when it stops
        increasing (or at ``max_iter``).  The Newton steps stop when the gain they predict
        is below ``tol`` per comparison.
    prior_strength : float, default 1.0
        Virtual wins and losses of every item against a zero-score item (the regularisation
        of :mod:`crowdlearn.pairwise.base`); keeps scores finite and the fit defined on a
        disconnected comparison graph.
    random_state : int, default 0
        Unused (the fit is deterministic); kept for the common interface.

    Attributes
    ----------
    scores_, ranks_, stderr_, history_ : see :class:`~crowdlearn.pairwise.base.PairwiseEstimator`
        (``stderr_`` is computed on its first read, not by ``fit``).
    theta_ : float
        Rao-Kupper tie parameter.
    n_iter_ : int
        MM iterations plus Newton steps (none when the win graph is strongly connected).
    """

    def __init__(self, max_iter: int = 500, tol: float = 1e-8, prior_strength: float = 1.0,
                 random_state=0):
        self.max_iter = max_iter
        self.tol = tol
        self.prior_strength = prior_strength
        self.random_state = random_state

    def _fit(self, data: Comparisons) -> PairwiseFit:
        pc = pair_counts(data)
        s, theta, history, n_iter = rao_kupper_mm(pc, data.n_items, np.zeros(data.n_items), 2.0,
                                          self.prior_strength, self.max_iter, self.tol)
        converged = n_iter < self.max_iter  # MM stopped on its tolerance
        if not wins_strongly_connected(pc, data.n_items):
            # MM crawls along the scores only the prior holds; Newton steps reach the maximum.
            # Elsewhere MM converges at its usual rate and the (dense) Newton solve would cost
            # more than the whole MM fit.
            s, theta, more, steps = rao_kupper_newton(pc, data.n_items, s, theta, self.prior_strength,
                                                      self.tol)
            history, n_iter = history + more, n_iter + steps
            converged = True  # Newton ends where no step gains more than the tolerance
        return PairwiseFit(
            scores=s, info=partial(pair_info, s, np.log(theta), pc), info_pairs=(pc.a, pc.b),
            prior_curv=prior_terms(s, self.prior_strength)[2], history=history,
            converged=converged, extra={"theta_": theta, "n_iter_": n_iter})
