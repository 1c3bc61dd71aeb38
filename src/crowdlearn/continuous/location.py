"""Robust location estimates of each task's answers: mean, median and trimmed mean.

No worker model: every answer counts the same.  Standard errors use each task's own spread
shrunk towards the spread pooled over tasks (:func:`~crowdlearn.continuous.base.shrunk_task_variance`),
so a task with one answer, or with identical answers, still gets a finite, non-zero error.
All three are equivariant under affine maps of the answers (``a x + b`` gives ``a e + b``).
"""

from __future__ import annotations

import numpy as np

from .base import ContinuousEstimator, ContinuousFit, shrunk_task_variance, task_means, task_sums
from .data import ContinuousAnswers

__all__ = ["Mean", "Median", "TrimmedMean", "sorted_within_tasks"]


def sorted_within_tasks(data: ContinuousAnswers) -> tuple[np.ndarray, np.ndarray]:
    """(answer values sorted within each task, rank of each sorted answer in its task).

    The table is sorted by task already, so one stable lexsort orders the values inside each
    task's slice ``task_ptr[t]:task_ptr[t + 1]``.
    """
    order = np.lexsort((data.value, data.task))
    ranks = np.arange(data.n_answers) - data.task_ptr[data.task]
    return data.value[order], ranks


class Mean(ContinuousEstimator):
    """The mean of each task's answers.

    .. math:: \\hat z_t = \\frac{1}{n_t} \\sum_w x_{t,w}, \\qquad
              \\mathrm{se}_t = \\sqrt{\\tilde s_t^2 / n_t}

    with :math:`\\tilde s_t^2` the task's answer variance shrunk to the pooled within-task
    variance.  The baseline every continuous method is compared with.

    Parameters
    ----------
    random_state : int, default 0
        Unused (the fit is deterministic); kept for the common interface.
    """

    def __init__(self, random_state=0):
        self.random_state = random_state

    def _fit(self, data, gold):
        est, se = task_means(data)
        return ContinuousFit(est, se, n_iter=1)


class Median(ContinuousEstimator):
    """The median of each task's answers (the mean of the two middle ones for even counts).

    Standard error: the large-sample one of the median of normal answers,
    :math:`\\sqrt{\\pi/2}\\,\\tilde s_t / \\sqrt{n_t}`, with :math:`\\tilde s_t^2` the task's
    variance around its median shrunk to the pooled one.

    Parameters
    ----------
    random_state : int, default 0
        Unused (the fit is deterministic); kept for the common interface.
    """

    def __init__(self, random_state=0):
        self.random_state = random_state

    def _fit(self, data, gold):
        n_t = task_sums(data).astype(np.int64)
        values, _ = sorted_within_tasks(data)
        ptr = data.task_ptr[:-1]
        has = n_t > 0
        lo = np.where(has, ptr + (n_t - 1) // 2, 0)
        hi = np.where(has, ptr + n_t // 2, 0)
        est = np.zeros(data.n_tasks)
        if data.n_answers:
            est = np.where(has, 0.5 * (values[lo] + values[hi]), 0.0)
        var = shrunk_task_variance(data, est)
        return ContinuousFit(est, np.sqrt(np.pi / 2 * var / np.maximum(n_t, 1)), n_iter=1)


class TrimmedMean(ContinuousEstimator):
    """The mean of each task's answers after dropping the ``floor(trim * n_t)`` smallest and
    as many largest ones (Tukey's trimmed mean).

    Standard error (Tukey & McLaughlin 1963): the winsorised standard deviation over
    :math:`(1 - 2g)\\sqrt{n_t}`, with :math:`g` the trimmed fraction of the task and the
    winsorised variance shrunk to the pooled one.

    Parameters
    ----------
    trim : float in [0, 0.5)
        Fraction trimmed at each end (0 = the mean).
    random_state : int, default 0
        Unused (the fit is deterministic); kept for the common interface.
    """

    def __init__(self, trim: float = 0.2, random_state=0):
        self.trim = trim
        self.random_state = random_state

    def _fit(self, data, gold):
        n_t = task_sums(data).astype(np.int64)
        values, ranks = sorted_within_tasks(data)
        cut = np.floor(self.trim * n_t).astype(np.int64)
        task = data.task
        keep = (ranks >= cut[task]) & (ranks < (n_t - cut)[task])
        kept = task_sums(data, keep.astype(np.float64))
        est = task_sums(data, np.where(keep, values, 0.0)) / np.maximum(kept, 1)
        if data.n_answers:
            ptr = data.task_ptr[:-1]
            low = values[np.minimum(ptr + cut, data.n_answers - 1)]
            high = values[np.clip(ptr + n_t - cut - 1, 0, data.n_answers - 1)]
            wins = np.clip(values, low[task], high[task])
            wmean = task_sums(data, wins) / np.maximum(n_t, 1)
            var = shrunk_task_variance(data, wmean, (wins - wmean[task]) ** 2)
        else:
            var = np.ones(data.n_tasks)
        kept_share = np.maximum(kept, 1) / np.maximum(n_t, 1)
        se = np.sqrt(var / np.maximum(n_t, 1)) / kept_share
        return ContinuousFit(est, se, n_iter=1)
