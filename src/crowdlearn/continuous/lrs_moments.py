"""Moment method for crowdsourced regression: worker reliabilities from the worker covariance
(in the spirit of Tenzer, Dror, Nadler, Bilal and Kluger 2022, "Crowdsourcing regression: a
spectral approach", AISTATS).

Under the regression crowd model :math:`x_{t,w} = s_w z_t + b_w + \\varepsilon_{t,w}` with
errors independent across workers, the covariance of two workers' answers on the tasks they
share is

.. math:: C_{ij} = s_i s_j \\operatorname{Var}(z) \\;(i \\ne j), \\qquad
          C_{ii} = s_i^2 \\operatorname{Var}(z) + \\sigma_i^2,

a rank-one matrix plus a diagonal.  Workers who break the model (colluders, workers whose
errors correlate) add a few large off-diagonal entries: a sparse part.  The method fits
:math:`v v^\\top` (:math:`v_i = s_i \\sqrt{\\operatorname{Var}(z)}`) to the observed off-diagonal
entries, setting aside as sparse the entries it cannot explain, reads the noise variances off
the diagonal, and estimates each task by the linear minimum-mean-square-error combination of
its answers.  No iteration over tasks: one pass to build the covariances, then work on the
workers x workers matrix.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from .base import (ContinuousEstimator, ContinuousFit, fix_gauge, pooled_variance, task_sums,
                   worker_sums)

__all__ = ["LRSMoments", "worker_covariances", "rank_one_plus_sparse"]


def worker_covariances(data, min_shared: int):
    """Pairwise covariances of the workers' centred answers on their shared tasks.

    Returns ``(rows, cols, cov, shared, diag, means)``: for each pair ``i < j`` sharing at
    least ``min_shared`` tasks, the mean over those tasks of
    :math:`(x_{ti} - \\bar x_i)(x_{tj} - \\bar x_j)` and the number of tasks; the diagonal
    (each worker's answer variance around its mean) and the means.  Cost: one sparse product,
    :math:`O(\\sum_t n_t^2)` (linear in the answers for a bounded number of answers per task).
    """
    n_w = worker_sums(data)
    means = worker_sums(data, data.value) / np.maximum(n_w, 1)
    centred = data.value - means[data.worker]
    shape = (data.n_tasks, data.n_workers)
    a = sp.csr_matrix((centred, (data.task, data.worker)), shape=shape)
    b = sp.csr_matrix((np.ones(data.n_answers), (data.task, data.worker)), shape=shape)
    prod = (a.T @ a).tocoo()
    counts = (b.T @ b).tocsr()
    # no covariance at all (every answer equals its worker's mean): indexing with empty arrays
    # returns a sparse matrix, not an array
    shared = np.asarray(counts[prod.row, prod.col]).ravel() if prod.nnz else np.zeros(0)
    keep = (prod.row < prod.col) & (shared >= min_shared)
    diag = worker_sums(data, centred**2) / np.maximum(n_w, 1)
    return (prod.row[keep], prod.col[keep], prod.data[keep] / shared[keep], shared[keep], diag,
            means)


def rank_one_plus_sparse(rows, cols, cov, weight, n, init, max_iter=100, tol=1e-8,
                         threshold=4.0, rounds=3):
    """Fit ``C_ij ~ v_i v_j`` on the given off-diagonal entries, plus a sparse set of outliers.

    Weighted alternating least squares, damped: :math:`v_i \\leftarrow \\frac12 (v_i +
    \\sum_j \\omega_{ij} C_{ij} v_j / \\sum_j \\omega_{ij} v_j^2)` (``weight`` = shared tasks, the inverse variance of an entry
    up to a constant), for ``rounds`` rounds: after each, entries whose standardised
    residual :math:`\\sqrt{\\omega_{ij}} |C_{ij} - v_i v_j|` exceeds ``threshold`` times the
    residuals' median absolute deviation (scaled to a normal standard deviation) move to the
    sparse part and are ignored by the next fit.

    Returns ``(v, sparse_mask, fitted)`` where ``fitted[i]`` says whether worker ``i`` had
    entries left to fit (others keep ``init``).
    """
    v = init.astype(np.float64).copy()
    inlier = np.ones(len(cov), dtype=bool)
    r_all = np.concatenate([rows, cols])
    c_all = np.concatenate([cols, rows])
    for _ in range(max(int(rounds), 1)):
        m = np.concatenate([inlier, inlier])
        r, c = r_all[m], c_all[m]
        cw = np.concatenate([weight * cov, weight * cov])[m]
        w = np.concatenate([weight, weight])[m]
        fitted = np.bincount(r, minlength=n) > 0
        for _ in range(int(max_iter)):
            num = np.bincount(r, weights=cw * v[c], minlength=n)
            den = np.bincount(r, weights=w * v[c] ** 2, minlength=n)
            new = np.where(fitted & (den > 0), num / np.where(den > 0, den, 1.0), v)
            # the simultaneous (Jacobi) update maps a v off by a factor a to one off by 1/a,
            # so undamped it flips between two scales forever; the average contracts
            new = 0.5 * (v + new)
            step = float(np.max(np.abs(new - v))) if n else 0.0
            v = new
            if step <= tol * max(float(np.max(np.abs(v))), 1e-300):
                break
        resid = np.sqrt(weight) * (cov - v[rows] * v[cols])
        scale = 1.4826 * float(np.median(np.abs(resid[inlier]))) if inlier.any() else 0.0
        new_inlier = np.abs(resid) <= threshold * scale if scale > 0 else np.ones_like(inlier)
        if np.array_equal(new_inlier, inlier):
            break
        inlier = new_inlier
    return v, ~inlier, np.bincount(rows[inlier], minlength=n) + np.bincount(cols[inlier], minlength=n) > 0


class LRSMoments(ContinuousEstimator):
    """Worker reliabilities from a low-rank plus sparse decomposition of the worker
    covariance (after Tenzer et al. 2022), then the linear MMSE estimate of each task.

    1. Centre each worker's answers by its mean :math:`\\bar x_i`; covariances
       :math:`C_{ij}` on shared tasks (pairs with at least ``min_shared``), variances
       :math:`C_{ii}`.
    2. :math:`C_{ij} \\approx v_i v_j + S_{ij}` off the diagonal, ``S`` sparse
       (:func:`rank_one_plus_sparse`); the sign of ``v`` makes the answer-weighted mean
       positive.
    3. Noise :math:`\\sigma_i^2 = C_{ii} - v_i^2`, floored at 5% of :math:`C_{ii}` and
       shrunk to the median with ``noise_prior`` pseudo-answers.  Workers without a usable
       pair take the median :math:`v`.
    4. Gauge (as :class:`~crowdlearn.continuous.gaussian_em.GaussianEM`): scales
       :math:`s_i = v_i / k`, :math:`k` the information-weighted mean of ``v`` (so
       :math:`\\operatorname{Var}(z) = k^2`), and the truths' mean is the answers' mean
       :math:`\\mu`; offsets :math:`d_i = \\bar x_i - \\mu`.
    5. :math:`\\hat z_t = \\mu + \\frac{\\sum_i (s_i / \\sigma_i^2)(x_{ti} - \\bar x_i)}
       {1 / k^2 + \\sum_i s_i^2 / \\sigma_i^2}`, standard error
       :math:`(1 / k^2 + \\sum_i s_i^2 / \\sigma_i^2)^{-1/2}`.

    Gold values are clamped in the result; the moments do not use them.

    Parameters
    ----------
    min_shared : int >= 1
        Shared tasks a pair of workers needs for its covariance to count.
    sparse_threshold : float > 0
        Robust z-score beyond which a covariance entry goes to the sparse part.
    noise_prior : float >= 0
        Pseudo-answers pulling each noise variance to the median one.
    max_iter : int
        Alternating least-squares sweeps per round.
    tol : float
        Relative change of ``v`` that stops the sweeps.
    random_state : int, default 0
        Unused (the fit is deterministic); kept for the common interface.
    """

    def __init__(self, min_shared: int = 3, sparse_threshold: float = 4.0,
                 noise_prior: float = 2.0, max_iter: int = 200, tol: float = 1e-8,
                 random_state=0):
        self.random_state = random_state
        self.min_shared = min_shared
        self.sparse_threshold = sparse_threshold
        self.noise_prior = noise_prior
        self.max_iter = max_iter
        self.tol = tol

    def __crowd_tags__(self):
        return dataclasses.replace(super().__crowd_tags__(), has_worker_model=True)

    def _fit(self, data, gold):
        thr = self.sparse_threshold
        if not (isinstance(thr, (int, float)) and not isinstance(thr, bool) and np.isfinite(thr)
                and thr > 0):
            raise ValueError(f"sparse_threshold must be a finite number > 0, got {thr!r} (LRSMoments)")
        n = data.n_workers
        n_w = worker_sums(data)
        rows, cols, cov, shared, diag, means = worker_covariances(data, int(self.min_shared))
        center = float(data.value.mean()) if data.n_answers else 0.0
        # start from the square root of each worker's variance: v_i = s_i sd(z) <= sd(x_i)
        init = np.sqrt(np.maximum(diag, 0.0))
        init = np.where(init > 0, init, max(float(np.median(init)), 1e-12))
        v, sparse_mask, fitted = rank_one_plus_sparse(
            rows, cols, cov, shared.astype(np.float64), n, init, max_iter=int(self.max_iter),
            tol=float(self.tol), threshold=float(thr))
        if fitted.any() and np.dot(n_w[fitted], v[fitted]) < 0:
            v = -v
        v = np.where(fitted, v, np.median(v[fitted]) if fitted.any() else 1.0)
        pool = pooled_variance(data, task_sums(data, data.value) / np.maximum(task_sums(data), 1))
        raw = np.maximum(diag - v**2, 0.05 * np.maximum(diag, 1e-12 * pool))
        typical = float(np.median(raw)) if n else pool
        nu = float(self.noise_prior)
        sig2 = (n_w * raw + nu * typical) / np.maximum(n_w + nu, 1e-12)
        offset = means - center
        s, d, mu, k, _ = fix_gauge(v, offset, center, n_w * v**2 / sig2, n_w)
        tau2 = k**2
        worker = data.worker
        prec = 1.0 / tau2 + task_sums(data, (s**2 / sig2)[worker])
        num = task_sums(data, (s / sig2)[worker] * (data.value - means[worker]))
        est = mu + num / prec
        bias = d + mu * (1.0 - s)
        return ContinuousFit(est, 1.0 / np.sqrt(prec), bias=bias, scale=s, noise=np.sqrt(sig2),
                             n_iter=1, worker_extra={"reliability": s**2 / sig2 * tau2})
