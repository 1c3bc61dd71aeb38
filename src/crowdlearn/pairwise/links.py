"""Outcome probabilities of one comparison as functions of the score difference.

Every pairwise model here writes the chance that ``left`` wins, ``right`` wins or the two
tie as functions of ``d = s_left - s_right`` and a tie threshold ``tau >= 0``:

    P(left)  = F(d - tau),     P(right) = F(-d - tau),     P(tie) = 1 - P(left) - P(right)

with ``F`` the logistic function (Bradley-Terry with Rao-Kupper ties: ``theta = exp(tau)``,
Rao & Kupper 1967) or the standard normal cdf (Thurstone-Mosteller with Glenn-David ties,
Glenn & David 1960).  ``tau = 0`` is the model without ties.  This module holds those
probabilities, their derivatives in ``d`` and ``tau`` (for the gradients of the fitted
objectives and the Fisher information behind the standard errors), vectorised over answers.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_ndtr, ndtr

__all__ = ["LINKS", "outcome_probs", "observed_probs", "fisher_info", "prior_terms"]

_SQRT_2PI = np.sqrt(2.0 * np.pi)
#: floor of a probability inside a log
TINY = 1e-300


def _logistic(x):
    return expit(x)


def _logistic_density(x):
    p = expit(x)
    return p * (1.0 - p)


def _normal_density(x):
    return np.exp(-0.5 * np.square(x)) / _SQRT_2PI


#: link name -> (cdf F, density f)
LINKS = {"logistic": (_logistic, _logistic_density), "probit": (ndtr, _normal_density)}


def outcome_probs(d: np.ndarray, tau: float, link: str = "logistic"):
    """``(P, dP/dd, dP/dtau)``, each of shape ``(len(d), 3)``: columns left, right, tie."""
    cdf, dens = LINKS[link]
    d = np.asarray(d, dtype=np.float64)
    p = np.empty(d.shape + (3,))
    dd = np.empty_like(p)
    dt = np.empty_like(p)
    p[..., 0] = cdf(d - tau)
    p[..., 1] = cdf(-d - tau)
    p[..., 2] = np.maximum(1.0 - p[..., 0] - p[..., 1], 0.0)
    f_l, f_r = dens(d - tau), dens(-d - tau)
    dd[..., 0], dd[..., 1], dd[..., 2] = f_l, -f_r, f_r - f_l
    dt[..., 0], dt[..., 1], dt[..., 2] = -f_l, -f_r, f_l + f_r
    return p, dd, dt


def observed_probs(d: np.ndarray, tau: float, outcome: np.ndarray, link: str = "logistic"):
    """``(P, dP/dd, dP/dtau)`` of the outcome each answer reported (0 left, 1 right, 2 tie):
    one column of :func:`outcome_probs`, computed without the other two."""
    cdf, dens = LINKS[link]
    d = np.asarray(d, dtype=np.float64)
    is_l, is_r = outcome == 0, outcome == 1
    if tau == 0.0 and not np.any(outcome == 2):  # the reported side's cdf only
        sign = np.where(is_l, 1.0, -1.0)
        z = sign * d
        p = cdf(z)
        f = p * (1.0 - p) if link == "logistic" else dens(z)
        return p, sign * f, -f
    z_l, z_r = d - tau, -d - tau
    f_l, f_r = dens(z_l), dens(z_r)
    c_l, c_r = cdf(z_l), cdf(z_r)
    p = np.where(is_l, c_l, np.where(is_r, c_r, np.maximum(1.0 - c_l - c_r, 0.0)))
    dd = np.where(is_l, f_l, np.where(is_r, -f_r, f_r - f_l))
    dt = np.where(is_l, -f_l, np.where(is_r, -f_r, f_l + f_r))
    return p, dd, dt


def fisher_info(p: np.ndarray, dp: np.ndarray) -> np.ndarray:
    """Fisher information of one answer about ``d``: ``sum_o (dP_o/dd)^2 / P_o`` (rows of
    ``p``, ``dp`` as returned by :func:`outcome_probs`, possibly mixed over workers)."""
    return np.sum(np.square(dp) / np.maximum(p, 1e-12), axis=-1)


def prior_terms(s: np.ndarray, strength: float, link: str = "logistic"):
    """The regularising prior of every model: each item plays ``strength`` virtual wins and
    ``strength`` virtual losses against a virtual item of score 0,

        log prior(s) = strength * [log F(s) + log F(-s)],

    a symmetric, log-concave prior with mode 0 (Chen et al. 2013 use the logistic one for
    Crowd-BT).  Returns ``(log prior per item, its derivative, minus its second derivative)``.
    """
    s = np.asarray(s, dtype=np.float64)
    if link == "logistic":
        pos, neg = expit(s), expit(-s)
        logp = np.log(np.maximum(pos, TINY)) + np.log(np.maximum(neg, TINY))
        grad = neg - pos
        curv = 2.0 * pos * neg
    else:
        lp, ln = log_ndtr(s), log_ndtr(-s)
        logp = lp + ln
        # d/ds log Phi(s) = phi(s)/Phi(s) = exp(log phi - log Phi), computed in logs
        log_phi = -0.5 * np.square(s) - np.log(_SQRT_2PI)
        h_pos, h_neg = np.exp(log_phi - lp), np.exp(log_phi - ln)
        grad = h_pos - h_neg
        curv = h_pos * (s + h_pos) + h_neg * (-s + h_neg)
    return strength * logp, strength * grad, strength * curv
