"""The estimator base of the continuous kind and the statistics its methods share.

A continuous method reads a :class:`~crowdlearn.continuous.data.ContinuousAnswers` table
(answers ``x_{t,w}``, a number per (task, worker)) and estimates one value per task with a
standard error.  Methods with a worker model also report, per worker, the parameters of the
regression crowd model

.. math:: x_{t,w} = s_w \\, z_t + b_w + \\varepsilon_{t,w}, \\qquad
          \\varepsilon_{t,w} \\sim \\mathcal N(0, \\sigma_w^2),

as ``worker_scale_`` (:math:`s_w`), ``worker_bias_`` (:math:`b_w`) and ``worker_noise_``
(:math:`\\sigma_w`, a standard deviation).  The model's gauge (adding a constant to every
truth and subtracting it from every bias, or multiplying every truth and dividing every scale)
is fixed the same way in every method: the answer-weighted mean bias is 0 and the
answer-weighted mean scale is 1, i.e. the crowd is right on average, so the estimates live on
the answers' own scale.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from ..aggregation.base import user_stacklevel, workers_meet
from ..core.base import AnswerEstimator
from ..core.params import check_params
from .data import ContinuousAnswers, as_continuous_answers

__all__ = ["ContinuousEstimator", "ContinuousFit", "task_sums", "worker_sums", "answer_spread",
           "pooled_variance", "shrunk_task_variance", "task_means", "fix_gauge"]

#: pseudo-count of answers with the pooled within-task variance added to each task's own
#: squared deviations (the standard errors of one-answer tasks stay finite and non-zero)
VARIANCE_PSEUDO_COUNT = 2.0


class ContinuousFit(NamedTuple):
    """What a method's ``_fit`` returns: per-task arrays for the answered tasks (any value
    where a task has no answer: the base replaces it) and, with a worker model, per-worker
    arrays (None otherwise)."""

    estimate: np.ndarray
    stderr: np.ndarray
    bias: np.ndarray | None = None
    scale: np.ndarray | None = None
    noise: np.ndarray | None = None
    n_iter: int = 0
    converged: bool = True
    #: the stopping rule's quantity per round (empty for one-pass methods)
    history: list | None = None
    #: further per-worker arrays, set as ``worker_<name>_`` Series (e.g. CATD's weights)
    worker_extra: dict | None = None
    #: False when the method estimates tasks without answers itself (from item features)
    prior_for_unanswered: bool = True


# ------------------------------------------------------------------- shared statistics
def task_sums(data: ContinuousAnswers, weights: np.ndarray | None = None) -> np.ndarray:
    """Sum of per-answer ``weights`` (counts without) per task."""
    return np.bincount(data.task, weights=weights, minlength=data.n_tasks)


def worker_sums(data: ContinuousAnswers, weights: np.ndarray | None = None) -> np.ndarray:
    """Sum of per-answer ``weights`` (counts without) per worker."""
    return np.bincount(data.worker, weights=weights, minlength=data.n_workers)


def answer_spread(data: ContinuousAnswers) -> tuple[float, float]:
    """(mean, standard deviation) of all answers; (0, 0) for a table without answers."""
    if data.n_answers == 0:
        return 0.0, 0.0
    return float(data.value.mean()), float(data.value.std())


def pooled_variance(data: ContinuousAnswers, center: np.ndarray) -> float:
    """Within-task variance pooled over tasks: sum of squared deviations from the per-task
    ``center`` over (answers - tasks with answers); falls back to the variance of all answers
    (and to 1 when that is 0 too, so that it can divide)."""
    n_t = data.labels_per_task()
    dof = data.n_answers - int(np.count_nonzero(n_t))
    ss = float(np.sum((data.value - center[data.task]) ** 2))
    if dof > 0 and ss > 0:
        return ss / dof
    total = float(data.value.var()) if data.n_answers else 0.0
    return total if total > 0 else 1.0


def shrunk_task_variance(data: ContinuousAnswers, center: np.ndarray, sq_dev: np.ndarray | None = None,
                         pseudo: float = VARIANCE_PSEUDO_COUNT) -> np.ndarray:
    """Per-task answer variance shrunk to the pooled one:
    ``(SS_t + pseudo * s2_pool) / (n_t - 1 + pseudo)`` with ``SS_t`` the task's squared
    deviations from ``center`` (or the given per-answer ``sq_dev``)."""
    if sq_dev is None:
        sq_dev = (data.value - center[data.task]) ** 2
    ss = task_sums(data, sq_dev)
    n_t = data.labels_per_task()
    s2 = pooled_variance(data, center)
    return (ss + pseudo * s2) / (np.maximum(n_t - 1, 0) + pseudo)



def task_means(data: ContinuousAnswers) -> tuple[np.ndarray, np.ndarray]:
    """Each task's mean answer and its standard error ``sqrt(s~_t^2 / n_t)``, with ``s~_t^2``
    the task's answer variance shrunk to the pooled one (:func:`shrunk_task_variance`): the
    estimate of the method ``mean``, and the fallback of the worker models."""
    n_t = task_sums(data)
    est = task_sums(data, data.value) / np.maximum(n_t, 1)
    return est, np.sqrt(shrunk_task_variance(data, est) / np.maximum(n_t, 1))


def fix_gauge(scale: np.ndarray, offset: np.ndarray, center: float, scale_weights: np.ndarray,
              offset_weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float, float]:
    """Fix the regression model's gauge in its centred form ``x - c0 = s (z - c0) + d``.

    The model is unchanged by ``z - c0 -> k (z - c0)``, ``c0 -> c0 + e`` with ``s -> s / k``,
    ``d -> d - e``.  The gauge chosen: the ``offset_weights``-weighted mean offset is 0 (with
    answer counts as weights, the estimates' mean is the answers' mean) and the
    ``scale_weights``-weighted mean scale is 1 (with the workers' information
    ``n_w s_w^2 / sigma_w^2`` as weights, the informative workers are right in scale on
    average, whatever the share of spammers with scale 0).

    Returns ``(scale, offset, center, k, e)``: a truth maps as
    ``z -> center_new + k (z - center_old)`` and a standard error by ``|k|``.
    """
    k = float(np.dot(scale_weights, scale) / scale_weights.sum()) if scale_weights.sum() > 0 else 1.0
    e = float(np.dot(offset_weights, offset) / offset_weights.sum()) if offset_weights.sum() > 0 else 0.0
    if not np.isfinite(k) or abs(k) < 1e-12:
        k = 1.0
    if not np.isfinite(e):
        e = 0.0
    return scale / k, offset - e, center + e, k, e


# --------------------------------------------------------------------------- the base
class ContinuousEstimator(AnswerEstimator):
    """Base of the continuous-answer methods: ``fit(answers, *, gold=None)``.

    Fitted attributes
    -----------------
    estimates_ : Series task -> float
        The estimated value of every task of the input, in its order.
    stderr_ : Series task -> float
        Standard error of each estimate under the method's model (0 for gold tasks).
    worker_bias_, worker_scale_, worker_noise_ : Series worker -> float
        Methods with a worker model (tag ``has_worker_model``): the regression model's
        parameters (see the module docstring); ``worker_noise_`` is a standard deviation.
    n_iter_, converged_ : int, bool
        Rounds run and whether the stopping rule was met (1 and True for one-pass methods).
    history_ : list
        The quantity the stopping rule reads, per round: the largest change of an estimate
        (empty for one-pass methods; the epoch logs of the trained models).

    Every task of the input is in the result: a task without answers gets the mean of all
    answers as its estimate and their standard deviation as its standard error (the
    population a task is drawn from), unless the method predicts it from item features; gold tasks are clamped to their value with standard
    error 0 (methods with a worker model also learn from them).

    When no task has answers from two different workers, and no gold on an answered task
    that the method learns from, a worker model cannot be estimated: nothing compares one
    worker with another.  A method with a worker model (and no item features) then warns,
    as the class-label aggregators do, and gives each answered task the mean of its answers
    with the standard error of :class:`~crowdlearn.continuous.location.Mean` (the answers'
    spread within tasks, pooled over tasks; with one answer per task, the spread of all
    answers): the one estimate every such model agrees with, and an error the data can
    back, where the model's own answer would come from parameters the data do not
    determine.  The worker attributes are those the method reached; they are not identified.
    """

    _result_attr = "estimates_"
    #: whether ``_fit`` learns its worker model from gold values (when it does, gold on an
    #: answered task identifies the model even when no two workers meet)
    _learns_from_gold = True

    def __crowd_tags__(self):
        return dataclasses.replace(super().__crowd_tags__(), kind="continuous",
                                   answer_type="continuous")

    def fit(self, answers: ContinuousAnswers | pd.DataFrame, *, gold: Any = None):
        """Fit on ``answers`` (a table or a DataFrame with columns task, worker, label).

        Parameters
        ----------
        answers : ContinuousAnswers or DataFrame
        gold : mapping or Series task -> number, optional
            Known values: clamped in the result and, with a worker model, used to fit it.
            Keyed by task id; an array or list names no task and is refused.
        """
        check_params(self)
        data = as_continuous_answers(answers)
        gold_values = data.encode_gold(gold)
        fitted = self._fit(data, gold_values)
        est = np.array(fitted.estimate, dtype=np.float64)
        se = np.array(fitted.stderr, dtype=np.float64)
        if self._unidentified(data, gold_values):
            est, se = self._answers_without_overlap(data, gold_values, est, se)
        if fitted.prior_for_unanswered:
            empty = data.labels_per_task() == 0
            mean, spread = answer_spread(data)
            est[empty], se[empty] = mean, spread
        known = np.isfinite(gold_values)
        est[known], se[known] = gold_values[known], 0.0
        if not (np.all(np.isfinite(est)) and np.all(np.isfinite(se))):
            raise RuntimeError(f"{type(self).__name__}: the fit produced NaN or inf estimates")
        self.estimates_ = pd.Series(est, index=data.tasks, name="estimate")
        self.stderr_ = pd.Series(se, index=data.tasks, name="stderr")
        if fitted.noise is not None:
            self.worker_bias_ = pd.Series(fitted.bias, index=data.workers, name="bias")
            self.worker_scale_ = pd.Series(fitted.scale, index=data.workers, name="scale")
            self.worker_noise_ = pd.Series(fitted.noise, index=data.workers, name="noise")
        for name, values in (fitted.worker_extra or {}).items():
            setattr(self, f"worker_{name}_", pd.Series(values, index=data.workers, name=name))
        self.n_iter_, self.converged_ = int(fitted.n_iter), bool(fitted.converged)
        self.history_ = list(fitted.history) if fitted.history is not None else []
        return self

    def _fit(self, data: ContinuousAnswers, gold: np.ndarray) -> ContinuousFit:
        raise NotImplementedError

    def _unidentified(self, data: ContinuousAnswers, gold: np.ndarray) -> bool:
        """Whether this method's worker model has nothing to be estimated from: no two
        workers answer one task, and no gold on an answered task is learned from."""
        tags = self.__crowd_tags__()
        if not tags.has_worker_model or tags.requires_features or workers_meet(data):
            return False
        answered = data.labels_per_task() > 0
        return not (self._learns_from_gold and np.isfinite(gold[answered]).any())

    def _answers_without_overlap(self, data: ContinuousAnswers, gold: np.ndarray, est: np.ndarray,
                                 se: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Warn, and give each answered task the mean of its answers with ``Mean``'s
        standard error (class docstring); unanswered tasks keep the method's values."""
        if not np.isfinite(gold).any():
            reason = "and no gold is given"
        elif not self._learns_from_gold:
            reason = "and the method learns nothing from gold"
        else:  # gold only on tasks without answers: it meets no worker
            reason = "and no answered task has gold"
        warnings.warn(
            f"{type(self).__name__}: no task has answers from two different workers {reason}, so "
            "worker quality cannot be estimated; each task's estimate is the mean of its answers "
            "(as the method 'mean' gives)",
            UserWarning, stacklevel=user_stacklevel(),
        )
        mean, mean_se = task_means(data)
        answered = data.labels_per_task() > 0
        est, se = est.copy(), se.copy()
        est[answered], se[answered] = mean[answered], mean_se[answered]
        return est, se

    def _result_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"task": self.estimates_.index.to_numpy(),
                             "estimate": self.estimates_.to_numpy(),
                             "stderr": self.stderr_.to_numpy()})
