"""CATD: confidence-aware truth discovery for long-tail data (Li et al. 2014).

Q. Li, Y. Li, J. Gao, L. Su, B. Zhao, M. Demirbas, W. Fan, J. Han, "A confidence-aware
approach for truth discovery on long-tail data", PVLDB 8(4), 2014.  Each worker's error
variance is replaced by the upper end of its chi-square confidence interval, so a worker with
few answers cannot earn a large weight from a lucky streak.

A worker's residuals are taken, by default, against the estimate of its task *without its own
answer* (``residuals="leave-one-out"``).  Against the full estimate, which the worker's own
answer pulls toward itself, the fixed-point iteration feeds back on itself: a worker whose
weight grows drags its tasks' estimates onto its answers, its residuals shrink, and its weight
grows further, until the worker alone defines its tasks (its weight hits the floor of the sum
of squares).  That is slow to converge, or never does, and loses accuracy as it goes.
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

    With ``residuals="leave-one-out"`` (the default), :math:`\\hat z_t` in the weight is
    replaced by :math:`\\hat z_t^{(-s)}`, the weighted mean of the *other* answers of task
    ``t`` (the first round, from the median, has no weights yet and uses the median), and
    :math:`|T_s|` counts only the answers whose task has another answer: an answer alone on
    its task says nothing about its worker's error.  Each weight is then an honest
    (cross-validated) precision; the paper's in-sample residuals (``"in-sample"``) can let a
    worker absorb its own tasks (module docstring).  The default was chosen on simulated
    crowds (``benchmarks/continuous.py``, section ``continuous-synthetic``, rows ``catd``).

    A worker none of whose answers can be checked (each alone on its task, without gold)
    has no error to measure: it is taken as a worker of the crowd, of variance
    :math:`\\hat\\sigma^2`, the within-task variance pooled over all tasks
    (:func:`~crowdlearn.continuous.base.pooled_variance`), so :math:`w_s = 1/\\hat\\sigma^2`
    with no interval -- an interval of no degrees of freedom has no upper end.  A task it
    answers alone gets that answer as its estimate and the crowd's noise
    :math:`\\hat\\sigma` as its standard error, and nothing else changes: the weight of such
    a worker enters no other task.

    Parameters
    ----------
    significance : float in (0, 1)
        :math:`\\alpha` of the confidence interval (the paper's 0.05).
    max_iter : int
        Rounds at most.
    tol : float
        Stop when no estimate moves by more than ``tol`` times the answers' spread.
    residuals : {"leave-one-out", "in-sample"}
        What a worker's errors are measured against (see above).
    random_state : int, default 0
        Unused (the fit is deterministic); kept for the common interface.
    """

    def __init__(self, significance: float = 0.05, max_iter: int = 100, tol: float = 1e-6,
                 residuals: str = "leave-one-out", random_state=0):
        self.random_state = random_state
        self.significance = significance
        self.max_iter = max_iter
        self.tol = tol
        self.residuals = residuals

    def __crowd_tags__(self):
        return dataclasses.replace(super().__crowd_tags__(), has_worker_model=True)

    def _fit(self, data, gold):
        a = self.significance
        if not (isinstance(a, (int, float)) and not isinstance(a, bool) and 0 < a < 1):
            raise ValueError(f"significance must be a number in (0, 1), got {a!r} (CATD)")
        if self.residuals not in ("leave-one-out", "in-sample"):
            raise ValueError(f"residuals must be 'leave-one-out' or 'in-sample', got {self.residuals!r} (CATD)")
        loo = self.residuals == "leave-one-out"
        x, task, worker = data.value, data.task, data.worker
        known = np.isfinite(gold)
        z = Median()._fit(data, gold).estimate
        z[known] = gold[known]
        n_t = task_sums(data)
        # answers that can be checked against other answers (or gold) of their task
        checked = (n_t[task] > 1) | known[task] if loo else np.ones(data.n_answers, dtype=bool)
        n_w = worker_sums(data, checked.astype(np.float64))
        # a worker none of whose answers can be checked has no residual to build an interval
        # from, so its variance is the crowd's pooled one as it stands (quantile 1 below).
        # Bounding it as if it were one residual would divide it by chi2(a/2, 1 dof), about
        # a thousandth at a = 0.05: the task such a worker answers alone would get a
        # standard error some thirty times the crowd's noise.
        unchecked = n_w == 0
        quantile = np.where(unchecked, 1.0, chi2.ppf(a / 2, np.maximum(n_w, 1)))
        # an exact fit (a worker alone on its tasks) would get an infinite weight: the sum of
        # squares is floored at a millionth of the pooled variance per answer
        pooled = pooled_variance(data, z)
        floor = 1e-6 * pooled * np.maximum(n_w, 1)
        spread = float(x.std()) if data.n_answers else 1.0
        spread = spread if spread > 0 else 1.0

        def sum_of_squares(w):
            if not loo or w is None:
                ref = z[task]
            else:  # the weighted mean of the task's other answers (gold where known)
                wa = w[worker]
                num = task_sums(data, wa * x)[task] - wa * x
                den = task_sums(data, wa)[task] - wa
                ref = np.where(known[task], z[task], num / np.where(checked & ~known[task], den, 1.0))
            ss = worker_sums(data, np.where(checked, (x - ref) ** 2, 0.0))
            ss = np.where(unchecked, pooled, ss)  # the crowd's variance (see the quantile)
            return np.maximum(ss, floor)

        converged, it, w, history = False, 0, None, []
        for it in range(1, int(self.max_iter) + 1):
            w = quantile / sum_of_squares(w)
            wa = w[worker]
            new = task_sums(data, wa * x) / np.maximum(task_sums(data, wa), 1e-300)
            new[known] = gold[known]
            shift = float(np.max(np.abs(new - z))) if data.n_tasks else 0.0
            history.append(shift)
            z = new
            if shift <= self.tol * spread:
                converged = True
                break
        ss = sum_of_squares(w)
        w = quantile / ss
        se = 1.0 / np.sqrt(np.maximum(task_sums(data, w[worker]), 1e-300))
        return ContinuousFit(z, se, bias=np.zeros(data.n_workers), scale=np.ones(data.n_workers),
                             noise=np.sqrt(ss / np.maximum(n_w, 1)), n_iter=it,
                             converged=converged, history=history, worker_extra={"weight": w})
