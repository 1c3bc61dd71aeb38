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

from .base import (ContinuousEstimator, ContinuousFit, answer_spread, fix_gauge, pooled_variance,
                   task_sums, worker_sums)
from .data import ContinuousAnswers

__all__ = ["LRSMoments", "worker_covariances", "exchangeable_moments", "rank_one_plus_sparse"]


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
    counts = (b.T @ b).tocoo()
    prod = (a.T @ a).tocsr()
    diag = worker_sums(data, centred**2) / np.maximum(n_w, 1)
    # the pairs are read off the counts, not off the product, whose entries that cancel to
    # exactly 0 are dropped: whether a sum of products cancels exactly is a matter of
    # rounding, so the pairs kept would change with the units of the answers
    keep = (counts.row < counts.col) & (counts.data >= min_shared)
    r, c, shared = counts.row[keep], counts.col[keep], counts.data[keep]
    cov = np.asarray(prod[r, c]).ravel() / shared if len(r) else np.zeros(0)
    return r, c, cov, shared, diag, means


def exchangeable_moments(data) -> tuple[float, float, float]:
    """Moments of the answers when every worker is taken as alike (a one-way random-effects
    model, :math:`x_{t,w} = z_t + \\varepsilon_{t,w}`).

    Returns ``(tau2, sigma2, n_pairs)``: the covariance of two different workers' answers
    to one task around the answers' mean, pooled over every such pair (the truths' variance
    :math:`\\tau^2`; NaN without a pair); the within-task variance pooled over tasks
    (:func:`~crowdlearn.continuous.base.pooled_variance`, the noise :math:`\\sigma^2`); and
    the number of pairs.  Linear in the answers.
    """
    x = data.value - (data.value.mean() if data.n_answers else 0.0)
    shape = (data.n_tasks, data.n_workers)
    # one cell per (task, worker): a worker's repeated answers to a task are summed, so
    # that the pairs below are pairs of different workers
    a = sp.csr_matrix((x, (data.task, data.worker)), shape=shape)
    b = sp.csr_matrix((np.ones(data.n_answers), (data.task, data.worker)), shape=shape)
    cross = np.asarray(a.sum(axis=1)).ravel() ** 2 - np.asarray(a.multiply(a).sum(axis=1)).ravel()
    pairs = np.asarray(b.sum(axis=1)).ravel() ** 2 - np.asarray(b.multiply(b).sum(axis=1)).ravel()
    n_pairs = float(pairs.sum()) / 2
    tau2 = float(cross.sum() / pairs.sum()) if n_pairs > 0 else float("nan")
    center = task_sums(data, data.value) / np.maximum(task_sums(data), 1)
    return tau2, pooled_variance(data, center), n_pairs


def _residual_scale(resid: np.ndarray, sampling_sd: np.ndarray) -> float:
    """The spread that the outlier cut of :func:`rank_one_plus_sparse` is a multiple of.

    The residuals' median absolute deviation, scaled to a normal standard deviation, as
    long as it measures something: above :math:`\\sqrt{\\epsilon}` (about 1.5e-8) of the
    residuals' typical sampling standard deviation under the model (Gaussian answers,
    :math:`\\sqrt{C_{ii} C_{jj} + v_i^2 v_j^2}` for :math:`\\sqrt{\\omega_{ij}}
    (C_{ij} - v_i v_j)`).  Below that it is rounding: the rank-one model fits a triangle of
    three workers exactly, and when more than half the entries are fitted so, the median
    residual is a rounding error, and so would be the cut, which would then set aside
    entries by the rounding of their residuals, differently in other units of the answers.
    An exact fit says nothing of the entries' spread, so the model's typical sampling
    standard deviation stands in for it.

    Parameters
    ----------
    resid : array of float
        The residuals of the entries being fitted.
    sampling_sd : array of float
        Each one's sampling standard deviation under the model.

    Returns
    -------
    float
        The scale; 0 without residuals, or when no entry has any spread (workers who
        always answer their means).
    """
    if len(resid) == 0:
        return 0.0
    mad = 1.4826 * float(np.median(np.abs(resid)))
    typical = float(np.median(sampling_sd))
    return mad if mad > np.sqrt(np.finfo(np.float64).eps) * typical else typical


def rank_one_plus_sparse(rows, cols, cov, weight, n, init, diag, max_iter=100, tol=1e-8,
                         threshold=4.0, rounds=3):
    """Fit ``C_ij ~ v_i v_j`` on the given off-diagonal entries, plus a sparse set of outliers.

    Weighted alternating least squares, damped: :math:`v_i \\leftarrow v_i + \\alpha (b_i -
    v_i)` with :math:`b_i = \\sum_j \\omega_{ij} C_{ij} v_j / \\sum_j \\omega_{ij} v_j^2`
    (``weight`` = shared tasks, the inverse variance of an entry up to a constant) and
    :math:`\\alpha = 1/2`, halved until the weighted squared error falls (Armijo's rule: the
    sweeps descend, so they converge), for ``rounds`` rounds.  After each, entries whose
    residual exceeds ``threshold`` times the residuals' scale move to the sparse part and
    are ignored by the next fit.

    The residual of an entry is :math:`r_{ij} = \\sqrt{\\omega_{ij}} (C_{ij} - v_i v_j)`
    and their scale the median absolute deviation, scaled to a normal standard deviation,
    unless that is rounding (:func:`_residual_scale`).

    Parameters
    ----------
    rows, cols : array of int
        The entries' workers, ``rows[e] < cols[e]``.
    cov, weight : array of float
        Each entry's covariance :math:`C_{ij}` and weight :math:`\\omega_{ij}`.
    n : int
        Number of workers.
    init : array of float, shape (n,)
        The starting ``v``.
    diag : array of float, shape (n,)
        The workers' variances :math:`C_{ii}`, for the residuals' sampling spread.
    max_iter : int
        Sweeps per round at most.
    tol : float
        Stop a round when no ``v_i`` moves by more than ``tol`` times the largest ``|v|``.
    threshold : float
        The cut, in the residuals' scale.
    rounds : int
        Fits, each on the entries the previous one kept.

    Returns
    -------
    v : array, shape (n,)
    sparse_mask : array of bool
        The entries set aside.
    fitted : array of bool, shape (n,)
        Whether worker ``i`` had entries left to fit (others keep ``init``).
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
        # the weighted squared error sum_e w_e (C_e - v_i v_j)^2 is const - v.num + v^2.den / 2
        # with num and den as below (each entry counted at both its workers): a sweep gives
        # the error at the v it is taken at without a pass of its own
        const = float(np.dot(weight[inlier], cov[inlier] ** 2))

        # the rounding of that sum: near convergence the error's changes sink below it, and
        # a comparison of rounding errors must not stop the sweeps
        ulps = np.finfo(np.float64).eps * np.sqrt(len(r) + n + 1.0)

        def sweep(u):
            num = np.bincount(r, weights=cw * u[c], minlength=n)
            den = np.bincount(r, weights=w * u[c] ** 2, minlength=n)
            cross, square = float(np.dot(u, num)), 0.5 * float(np.dot(u**2, den))
            return num, den, const - cross + square, ulps * (const + abs(cross) + square)

        num, den, current, rounding = sweep(v)
        sweeps = 1
        while sweeps < int(max_iter):
            best = np.where(fitted & (den > 0), num / np.where(den > 0, den, 1.0), v)
            # the simultaneous (Jacobi) update maps a v off by a factor a to one off by 1/a,
            # so undamped it flips between two scales forever: half the step is taken.  That
            # alone can wander forever too: on a pair of workers with a negative covariance
            # and v of one sign it is Newton's iteration for the square root of a negative
            # number, which is chaotic, so where v stopped (and the estimates) depended on
            # rounding.  The step is a descent direction (the gradient is -2 den (best - v)),
            # so halving it until the error falls by a share of the slope (Armijo's rule)
            # makes every sweep a descent, and the sweeps converge.
            direction = best - v
            slope = -2.0 * float(np.dot(den, direction**2))
            reach = float(np.max(np.abs(direction))) if n else 0.0
            size = max(float(np.max(np.abs(v))), 1e-300) if n else 1.0
            alpha = 0.5
            while True:
                trial = v + alpha * direction
                t_num, t_den, value, t_rounding = sweep(trial)
                sweeps += 1
                if value <= current + 1e-4 * alpha * slope + rounding + t_rounding:
                    v, num, den, current, rounding = trial, t_num, t_den, value, t_rounding
                    break
                alpha *= 0.5
                if alpha * reach <= tol * size or sweeps >= int(max_iter):
                    alpha = 0.0  # no descent left above the tolerance: v stays
                    break
            if not n or alpha * reach <= tol * max(float(np.max(np.abs(v))), 1e-300):
                break
        fit = v[rows] * v[cols]
        resid = np.sqrt(weight) * (cov - fit)
        scale = _residual_scale(resid[inlier], np.sqrt(diag[rows] * diag[cols] + fit**2)[inlier])
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
       (:func:`rank_one_plus_sparse`: an entry is sparse when its residual exceeds
       ``sparse_threshold`` robust standard deviations of the residuals); the sign of ``v``
       makes the answer-weighted mean positive.
    3. Noise :math:`\\sigma_i^2 = C_{ii} - v_i^2`, floored at 5% of :math:`C_{ii}` and
       shrunk to the median with ``noise_prior`` pseudo-answers.  Workers without a usable
       pair take the median :math:`v`.  When no pair is usable at all, nothing tells the
       workers apart and they are taken as alike (:meth:`_exchangeable`: a one-way
       random-effects model whose variances the answers give).
    4. Gauge (as :class:`~crowdlearn.continuous.gaussian_em.GaussianEM`): scales
       :math:`s_i = v_i / k`, :math:`k` the information-weighted mean of ``v`` (so
       :math:`\\operatorname{Var}(z) = k^2`), and the truths' mean is the answers' mean
       :math:`\\mu`; offsets :math:`d_i = \\bar x_i - \\mu`.
    5. :math:`\\hat z_t = \\mu + \\frac{\\sum_i (s_i / \\sigma_i^2)(x_{ti} - \\bar x_i)}
       {1 / k^2 + \\sum_i s_i^2 / \\sigma_i^2}`, standard error
       :math:`(1 / k^2 + \\sum_i s_i^2 / \\sigma_i^2)^{-1/2}`.

    Gold values are clamped in the result; the moments do not use them.  The steps run on the
    answers standardised by their mean and standard deviation and the results are mapped
    back, so that estimates follow any affine change of units (``a x + b`` gives
    ``a z + b``, standard errors times ``|a|``).  When no two workers ever answer one task
    the model is not identified: each task gets its answers' mean, as from ``mean``, with a
    warning (:class:`~crowdlearn.continuous.base.ContinuousEstimator`), gold or not.

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

    #: the moments never read the gold (it is only clamped in the result)
    _learns_from_gold = False

    def __crowd_tags__(self):
        return dataclasses.replace(super().__crowd_tags__(), has_worker_model=True)

    def _fit(self, data, gold):
        thr = self.sparse_threshold
        if not (isinstance(thr, (int, float)) and not isinstance(thr, bool) and np.isfinite(thr)
                and thr > 0):
            raise ValueError(f"sparse_threshold must be a finite number > 0, got {thr!r} (LRSMoments)")
        # fitted on the answers in units of their spread, around their mean, and mapped back:
        # every constant below is then relative to the data, so the estimates follow any
        # change of units (a x + b gives a z + b, standard errors times |a|)
        center, spread = answer_spread(data)
        unit = spread if spread > 0 else 1.0  # every answer the same: nothing to rescale
        std = ContinuousAnswers(data.task, data.worker, (data.value - center) / unit, data.tasks,
                                data.workers)
        fit = self._fit_standardised(std)
        s = fit.scale
        return fit._replace(estimate=center + unit * fit.estimate, stderr=unit * fit.stderr,
                            bias=unit * fit.bias + center * (1.0 - s), noise=unit * fit.noise)

    def _fit_standardised(self, data):
        """Steps 1-5 of the class docstring on answers of mean 0 and spread 1 (or 0)."""
        n = data.n_workers
        n_w = worker_sums(data)
        rows, cols, cov, shared, diag, means = worker_covariances(data, int(self.min_shared))
        # start from the square root of each worker's variance: v_i = s_i sd(z) <= sd(x_i)
        init = np.sqrt(np.maximum(diag, 0.0))
        typical_sd = float(np.median(init)) if n else 0.0
        init = np.where(init > 0, init, typical_sd if typical_sd > 0 else 1.0)
        v, sparse_mask, fitted = rank_one_plus_sparse(
            rows, cols, cov, shared.astype(np.float64), n, init, diag, max_iter=int(self.max_iter),
            tol=float(self.tol), threshold=float(self.sparse_threshold))
        if not fitted.any():
            return self._exchangeable(data)
        if np.dot(n_w[fitted], v[fitted]) < 0:
            v = -v
        v = np.where(fitted, v, np.median(v[fitted]))
        pool = pooled_variance(data, task_sums(data, data.value) / np.maximum(task_sums(data), 1))
        raw = np.maximum(diag - v**2, 0.05 * np.maximum(diag, 1e-12 * pool))
        typical = float(np.median(raw)) if n else pool
        nu = float(self.noise_prior)
        sig2 = (n_w * raw + nu * typical) / np.maximum(n_w + nu, 1e-12)
        center = 0.0  # the answers' mean, standardised
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

    @staticmethod
    def _exchangeable(data) -> ContinuousFit:
        """The fit when no pair of workers shares ``min_shared`` tasks: every worker alike.

        Without a covariance to fit, nothing tells one worker's scale, offset or noise from
        another's, so the workers are taken as exchangeable (scale 1, bias 0, one noise):
        the one-way random-effects model :math:`x_{t,w} = z_t + \\varepsilon_{t,w}`, with
        :math:`z_t \\sim (\\mu, \\tau^2)`, :math:`\\varepsilon \\sim (0, \\sigma^2)`, its
        variances estimated from the answers by :func:`exchangeable_moments` (the covariance
        of two workers' answers to one task, and the spread within tasks).  Each task gets
        its best linear estimate, :math:`\\hat z_t = \\mu + n_t (\\bar x_t - \\mu) /
        (n_t + \\sigma^2 / \\tau^2)`, standard error
        :math:`(1 / \\tau^2 + n_t / \\sigma^2)^{-1/2}`.

        :math:`\\tau^2` is floored at its standard error under Gaussian answers,
        :math:`\\sqrt{(\\sigma_x^4 + \\tau^4) / P}` over the :math:`P` pairs (taken as
        independent): a covariance that sampling noise cannot tell from 0, or below it, is
        taken at the size the noise allows rather than at 0, which would give every task
        the answers' mean with a standard error near 0.  Without any pair (no two workers
        ever answer one task) nothing is identified; :math:`\\tau^2` is the answers' whole
        variance and :class:`~crowdlearn.continuous.base.ContinuousEstimator` returns each
        task's own answers, with a warning.
        """
        tau2, sig2, n_pairs = exchangeable_moments(data)
        var = float(data.value.var()) if data.n_answers else 0.0  # sigma_x^2, 1 or 0 here
        var = var if var > 0 else 1.0
        if n_pairs > 0:
            tau2 = max(tau2, float(np.sqrt((var**2 + tau2**2) / n_pairs)))
        else:
            tau2 = var
        mu = float(data.value.mean()) if data.n_answers else 0.0
        n_t = task_sums(data)
        prec = 1.0 / tau2 + n_t / sig2
        est = mu + task_sums(data, data.value - mu) / sig2 / prec
        m = data.n_workers
        return ContinuousFit(est, 1.0 / np.sqrt(prec), bias=np.zeros(m), scale=np.ones(m),
                             noise=np.full(m, np.sqrt(sig2)), n_iter=1,
                             worker_extra={"reliability": np.full(m, tau2 / sig2)})
