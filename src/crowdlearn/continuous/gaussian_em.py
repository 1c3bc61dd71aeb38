"""Gaussian worker-noise EM: per-worker bias, noise and (optionally) scale.

The regression crowd model of Raykar et al. (2010, "Learning from crowds", JMLR 11, section
3: each annotator's answer is the truth corrupted by Gaussian noise of its own precision),
extended, as their model allows, by a per-worker affine distortion:

.. math:: z_t \\sim \\mathcal N(\\mu, \\tau^2), \\qquad
          x_{t,w} \\mid z_t \\sim \\mathcal N(s_w z_t + b_w, \\sigma_w^2).

EM alternates the exact Gaussian posterior of each truth (E-step) with the workers' weighted
least-squares regression of their answers on it (M-step); the prior's :math:`\\mu, \\tau^2` are
refitted each round (empirical Bayes).  Every sum is a ``bincount`` over answers: one round is
O(answers).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .base import (ContinuousEstimator, ContinuousFit, fix_gauge, pooled_variance, task_sums,
                   worker_sums)

__all__ = ["GaussianEM"]


class GaussianEM(ContinuousEstimator):
    """EM for the Gaussian regression crowd model (Raykar et al. 2010).

    Model: :math:`x_{t,w} = s_w z_t + b_w + \\varepsilon`, :math:`\\varepsilon \\sim
    \\mathcal N(0, \\sigma_w^2)`, truths :math:`z_t \\sim \\mathcal N(\\mu, \\tau^2)`.

    * E-step: :math:`P_t = \\tau^{-2} + \\sum_w s_w^2 / \\sigma_w^2`,
      :math:`m_t = (\\mu / \\tau^2 + \\sum_w s_w (x_{t,w} - b_w) / \\sigma_w^2) / P_t`; the
      standard error of task ``t`` is :math:`P_t^{-1/2}`.
    * M-step, per worker, with :math:`E[z_t] = m_t`, :math:`E[z_t^2] = m_t^2 + 1/P_t`:
      ridge regression of the worker's answers on the centred truth,
      :math:`x - \\mu = s_w (z - \\mu) + d_w` (so :math:`b_w = d_w + \\mu (1 - s_w)`), with
      ``scale_prior`` pseudo-tasks of spread :math:`\\tau` pulling :math:`s_w` to 1 and
      ``bias_prior`` pseudo-answers pulling :math:`d_w` to 0; then
      :math:`\\sigma_w^2 = (\\sum E[(x - s_w z - b_w)^2] + \\nu_0 \\bar\\sigma^2) / (n_w + \\nu_0)`
      with :math:`\\nu_0` = ``noise_prior`` pseudo-answers at the pooled within-task variance
      :math:`\\bar\\sigma^2`.  The priors keep workers with few answers near the average
      worker; all are relative to the answers' own scale, so the fit is equivariant under
      affine maps of the answers.

    Identifiability: without gold, :math:`(z, s, b)` and :math:`(c z + e, s / c, b - s e / c)`
    explain the answers equally well.  After each M-step the gauge is fixed
    (:func:`~crowdlearn.continuous.base.fix_gauge`): the answer-weighted mean of the offsets
    :math:`d_w` is 0 (the estimates' mean is the answers' mean) and the mean of the scales
    weighted by each worker's information :math:`n_w s_w^2 / \\sigma_w^2` is 1 (the
    informative workers are right in scale on average; spammers, with scale near 0, do not
    shrink the estimates).  With gold values the gold fixes the gauge instead.

    Parameters
    ----------
    scale : bool
        Fit a per-worker scale :math:`s_w` (else :math:`s_w = 1`).  Default True, chosen on
        synthetic crowds (benchmarks/RESULTS.md, section continuous-synthetic): a spammer's
        scale goes to 0, which silences it, and with unit scales the extra parameter costs
        little.
    bias_prior, scale_prior, noise_prior : float >= 0
        Pseudo-counts of the priors above.
    max_iter : int
        EM rounds at most.
    tol : float
        Stop when no estimate moves by more than ``tol`` times the answers' spread.
    random_state : int, default 0
        Unused (the fit is deterministic); kept for the common interface.
    """

    def __init__(self, scale: bool = True, bias_prior: float = 1.0, scale_prior: float = 2.0,
                 noise_prior: float = 2.0, max_iter: int = 200, tol: float = 1e-6,
                 random_state=0):
        self.random_state = random_state
        self.scale = scale
        self.bias_prior = bias_prior
        self.scale_prior = scale_prior
        self.noise_prior = noise_prior
        self.max_iter = max_iter
        self.tol = tol

    def __crowd_tags__(self):
        return dataclasses.replace(super().__crowd_tags__(), has_worker_model=True)

    def _fit(self, data, gold):
        x, worker = data.value, data.worker
        n_t = task_sums(data)
        n_w = worker_sums(data)
        answered = n_t > 0
        known = np.isfinite(gold)
        free = answered & ~known
        m = task_sums(data, x) / np.maximum(n_t, 1)
        m[known] = gold[known]
        s2_pool = pooled_variance(data, m)
        v = np.where(free, s2_pool / np.maximum(n_t, 1), 0.0)
        spread = float(x.std()) if data.n_answers else 1.0
        spread = spread if spread > 0 else 1.0
        mu = float(m[answered].mean()) if answered.any() else 0.0
        tau2 = self._prior_variance(m, v, mu, answered, spread) if answered.any() else spread**2
        s = np.ones(data.n_workers)
        b = np.zeros(data.n_workers)
        sig2 = np.full(data.n_workers, s2_pool)
        converged, it, history = False, 0, []
        for it in range(1, int(self.max_iter) + 1):
            previous = m
            s, d, sig2 = self._m_step(data, m, v, mu, tau2, s2_pool, n_w)
            if not known.any():
                s, d, new_mu, k, _ = fix_gauge(s, d, mu, n_w * s**2 / sig2, n_w)
                m = new_mu + k * (m - mu)
                v, mu, tau2 = v * k**2, new_mu, tau2 * k**2
            b = d + mu * (1.0 - s)
            # E-step: exact Gaussian posterior of every free truth
            prec_w = 1.0 / sig2
            prec = 1.0 / tau2 + task_sums(data, (s**2 * prec_w)[worker])
            num = mu / tau2 + task_sums(data, (s * prec_w)[worker] * (x - b[worker]))
            new_m = np.where(free, num / prec, m)
            v = np.where(free, 1.0 / prec, 0.0)
            # compared with the previous round's estimates, before this round's gauge map
            shift = float(np.max(np.abs(new_m - previous))) if data.n_tasks else 0.0
            history.append(shift)
            m = new_m
            if answered.any():
                mu = float(m[answered].mean())
                tau2 = self._prior_variance(m, v, mu, answered, spread)
            if shift <= self.tol * spread:
                converged = True
                break
        return ContinuousFit(m, np.sqrt(v), bias=b, scale=s, noise=np.sqrt(sig2), n_iter=it,
                             converged=converged, history=history)

    @staticmethod
    def _prior_variance(m, v, mu, answered, spread):
        """Empirical-Bayes variance of the truths, ``mean((m - mu)^2 + v)`` over the answered
        tasks, at least ``1e-6 spread^2``.

        The squares are taken around ``mu``: ``E[m^2] - mu^2`` would lose every digit to
        cancellation when the answers sit far from 0 (timestamps, 1e9 plus a few units).
        """
        dev = m[answered] - mu
        return max(float(np.mean(dev**2 + v[answered])), 1e-6 * spread**2)

    def _m_step(self, data, m, v, mu, tau2, s2_pool, n_w):
        """Ridge regression of each worker's answers on the centred truth posterior."""
        x, task, worker = data.value, data.task, data.worker
        zc = m[task] - mu
        zz = zc**2 + v[task]
        xc = x - mu
        lam_b = float(self.bias_prior)
        if self.scale:
            lam_s = float(self.scale_prior) * tau2
            a11 = worker_sums(data, zz) + lam_s
            a12 = worker_sums(data, zc)
            a22 = n_w + lam_b
            r1 = worker_sums(data, xc * zc) + lam_s
            r2 = worker_sums(data, xc)
            det = a11 * a22 - a12**2
            ok = det > 1e-12 * np.maximum(a11 * a22, 1e-300)
            s = np.where(ok, (a22 * r1 - a12 * r2) / np.where(ok, det, 1.0), 1.0)
            d = np.where(ok, (a11 * r2 - a12 * r1) / np.where(ok, det, 1.0), 0.0)
            prior_ss = lam_s * (s - 1.0) ** 2 + lam_b * d**2
        else:
            s = np.ones(data.n_workers)
            d = worker_sums(data, xc - zc) / np.maximum(n_w + lam_b, 1e-12)
            prior_ss = lam_b * d**2
        resid = xc - s[worker] * zc - d[worker]
        ss = worker_sums(data, resid**2 + s[worker] ** 2 * v[task])
        nu = float(self.noise_prior)
        sig2 = (ss + prior_ss + nu * s2_pool) / np.maximum(n_w + nu, 1e-12)
        sig2 = np.maximum(sig2, 1e-8 * s2_pool)
        return s, d, sig2
