"""CATD: confidence-aware truth discovery for long-tail data (Li et al. 2014).

Q. Li, Y. Li, J. Gao, L. Su, B. Zhao, M. Demirbas, W. Fan, J. Han, "A confidence-aware
approach for truth discovery on long-tail data", PVLDB 8(4), 2014.  Each worker's error
variance is replaced by the upper end of its chi-square confidence interval, so a worker with
few answers cannot earn a large weight from a lucky streak.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.stats import chi2

from .base import ContinuousEstimator, ContinuousFit, pooled_variance, task_sums, worker_sums
from .location import Median

__all__ = ["CATD"]


class CATD(ContinuousEstimator):
    """Confidence-aware truth discovery (Li et al. 2014).

    Alternates, from the per-task median,

    .. math:: w_s = \\frac{\\chi^2_{\\alpha/2}(|T_s|)}{\\sum_{t \\in T_s} (x_{t,s} - \\hat z_t)^2},
              \\qquad \\hat z_t = \\frac{\\sum_s w_s x_{t,s}}{\\sum_s w_s},

    with :math:`|T_s|` the number of answers of worker ``s`` and :math:`\\chi^2_{\\alpha/2}(n)`
    the lower :math:`\\alpha/2` quantile of the chi-square distribution with ``n`` degrees of
    freedom: :math:`1/w_s` is the upper end of the :math:`1-\\alpha` confidence interval of
    the worker's error variance.  The weight is a (conservative) precision, so the standard
    error of a task is :math:`(\\sum_s w_s)^{-1/2}`.  Reported worker model: bias 0, scale 1,
    noise :math:`\\sqrt{\\sum_t (x_{t,s} - \\hat z_t)^2 / |T_s|}`; ``worker_weight_`` holds
    :math:`w_s`.

    Parameters
    ----------
    significance : float in (0, 1)
        :math:`\\alpha` of the confidence interval (the paper's 0.05).
    max_iter : int
        Rounds at most.
    tol : float
        Stop when no estimate moves by more than ``tol`` times the answers' spread.
    random_state : int, default 0
        Unused (the fit is deterministic); kept for the common interface.
    """

    def __init__(self, significance: float = 0.05, max_iter: int = 100, tol: float = 1e-6,
                 random_state=0):
        self.random_state = random_state
        self.significance = significance
        self.max_iter = max_iter
        self.tol = tol

    def __crowd_tags__(self):
        return dataclasses.replace(super().__crowd_tags__(), has_worker_model=True)

    def _fit(self, data, gold):
        a = self.significance
        if not (isinstance(a, (int, float)) and not isinstance(a, bool) and 0 < a < 1):
            raise ValueError(f"significance must be a number in (0, 1), got {a!r} (CATD)")
        x, task, worker = data.value, data.task, data.worker
        known = np.isfinite(gold)
        z = Median()._fit(data, gold).estimate
        z[known] = gold[known]
        n_w = worker_sums(data)
        quantile = chi2.ppf(a / 2, np.maximum(n_w, 1))
        # an exact fit (a worker alone on its tasks) would get an infinite weight: the sum of
        # squares is floored at a millionth of the pooled variance per answer
        floor = 1e-6 * pooled_variance(data, z) * np.maximum(n_w, 1)
        spread = float(x.std()) if data.n_answers else 1.0
        spread = spread if spread > 0 else 1.0
        converged, it = False, 0
        for it in range(1, int(self.max_iter) + 1):
            ss = np.maximum(worker_sums(data, (x - z[task]) ** 2), floor)
            w = quantile / ss
            wa = w[worker]
            new = task_sums(data, wa * x) / np.maximum(task_sums(data, wa), 1e-300)
            new[known] = gold[known]
            shift = float(np.max(np.abs(new - z))) if data.n_tasks else 0.0
            z = new
            if shift <= self.tol * spread:
                converged = True
                break
        ss = np.maximum(worker_sums(data, (x - z[task]) ** 2), floor)
        w = quantile / ss
        se = 1.0 / np.sqrt(np.maximum(task_sums(data, w[worker]), 1e-300))
        return ContinuousFit(z, se, bias=np.zeros(data.n_workers), scale=np.ones(data.n_workers),
                             noise=np.sqrt(ss / np.maximum(n_w, 1)), n_iter=it,
                             converged=converged, worker_extra={"weight": w})
