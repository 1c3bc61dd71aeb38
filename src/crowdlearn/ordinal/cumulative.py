"""Cumulative binary decomposition of ordinal answers over any binary aggregator.

Raykar et al. (2010), "Learning from crowds", JMLR 11, section 4 ("ordinal regression"):
an answer on K ordered classes ``0 < 1 < ... < K-1`` is turned into K-1 binary answers
``[answer > k]``, k = 0..K-2; each binary problem ("is the true class above k?") is a
two-class crowd, solved here by any registered classification aggregator (Dawid-Skene by
default), which gives ``S_k(n) = P(y_n > k)``.  The class distribution is recovered by

    S = monotone projection of (S_0, ..., S_{K-2})      (non-increasing in k)
    P(y_n = k) = S_{k-1}(n) - S_k(n),   S_{-1} = 1,  S_{K-1} = 0

The binary problems are solved independently, so the raw ``S_k`` may increase with k; the
least-squares isotonic projection (pool-adjacent-violators,
:func:`crowdlearn.ordinal.base.monotone_survival`) restores the order before the
differences are taken.  Each binary model sees every worker's full answer history, so a
worker's reliability is learnt per threshold: a worker who confuses neighbouring grades but
never extreme ones is reliable on far thresholds and unreliable on near ones.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from ..aggregation.base import label_aggregator
from ..core.base import Tags, get_tags
from ..core.data import CrowdLabels
from .base import OrdinalAggregator, monotone_survival, survival_to_probas

__all__ = ["OrdinalCumulative"]

_BINARY = pd.Index([0, 1], name="class")


def _threshold_labels(data: CrowdLabels, k: int) -> CrowdLabels:
    """The binary crowd "answer > k" (classes 0, 1) on every task and worker of ``data``."""
    truth = None
    if data.truth is not None:
        truth = np.where(data.truth >= 0, (data.truth > k).astype(np.int32), -1)
    return CrowdLabels(data.task, data.worker, (data.label > k).astype(np.int32), tasks=data.tasks,
                       workers=data.workers, classes=_BINARY, truth=truth)


class OrdinalCumulative(OrdinalAggregator):
    """K-1 cumulative binary problems "y > k" over a binary aggregator, recombined monotonically.

    Parameters
    ----------
    method : str, class or estimator, default "ds"
        The binary aggregator solving each problem: a registered classification method name,
        an estimator class or an instance (cloned for every threshold, so no state is shared).
    params : dict, optional
        Constructor arguments of ``method``.
    classes : list, optional
        The classes from the lowest to the highest; default: the rule of
        :func:`crowdlearn.ordinal.base.ordinal_order` (numeric order when every class is a
        number, else the answer table's class order).
    random_state : int, default 0
        Seed of the tie-breaking rule; also given to each binary method that has a
        ``random_state`` (unless ``params`` sets it).

    Attributes
    ----------
    survival_ : DataFrame, tasks x thresholds
        ``P(y > k)`` after the monotone projection; column ``k`` names the class at rank k.
    raw_survival_ : DataFrame
        The binary methods' ``P(y > k)`` before the projection.
    estimators_ : list
        The K-1 fitted binary estimators, lowest threshold first.
    order_ : Index
        The classes from lowest to highest.

    Notes
    -----
    With ``method`` tagged ``has_worker_model``, ``predict_proba(new answers)`` scores every
    threshold with its fitted binary model and recombines them the same way; on the training
    answers it reproduces ``probas_``.  Gold labels are passed to each binary fit as
    ``[gold > k]``.
    """

    def __init__(self, method: Any = "ds", params: dict | None = None, classes: Any = None,
                 random_state: int | None = 0) -> None:
        self.method = method
        self.params = params
        self.classes = classes
        self.random_state = random_state

    def __crowd_tags__(self) -> Tags:
        try:
            base = get_tags(label_aggregator(self.method, self.params))
        except (ValueError, TypeError, AttributeError):
            # tags are read from default instances (and by listings): an invalid method is
            # reported by fit, not here
            base = Tags()
        return dataclasses.replace(
            super().__crowd_tags__(), has_worker_model=base.has_worker_model,
            accepts_gold=base.accepts_gold, stochastic=base.stochastic,
            invariance_atol=max(base.invariance_atol, 1e-6))

    def _fit_ordinal(self, data: CrowdLabels, gold: np.ndarray | None,
                     init: np.ndarray | None) -> np.ndarray:
        k = data.n_classes
        self.estimators_ = []
        if k <= 1:  # one class: nothing to decide
            self.survival_ = self.raw_survival_ = pd.DataFrame(index=data.tasks)
            return np.ones((data.n_tasks, 1))
        raw = np.empty((data.n_tasks, k - 1))
        for t in range(k - 1):
            binary = _threshold_labels(data, t)
            est = label_aggregator(self.method, self.params, self.random_state)
            kwargs = {}
            if gold is not None and np.any(gold >= 0) and get_tags(est).accepts_gold:
                kwargs["gold"] = pd.Series(np.where(gold > t, 1, 0)[gold >= 0], index=data.tasks[gold >= 0])
            est.fit(binary, **kwargs)
            self.estimators_.append(est)
            raw[:, t] = est.probas_[1].to_numpy(float)
        return self._recombine(raw, data)

    def _recombine(self, raw: np.ndarray, data: CrowdLabels) -> np.ndarray:
        surv = monotone_survival(raw)
        cols = pd.Index(self.order_[:-1], name="above")
        self.raw_survival_ = pd.DataFrame(raw, index=data.tasks, columns=cols)
        self.survival_ = pd.DataFrame(surv, index=data.tasks, columns=cols)
        return survival_to_probas(surv)

    def _predict_proba_codes(self, data: CrowdLabels) -> np.ndarray:
        if not get_tags(self).has_worker_model:
            return super()._predict_proba_codes(data)
        ordinal = CrowdLabels(data.task, data.worker, self._rank[data.label], tasks=data.tasks,
                              workers=data.workers, classes=self.order_)
        if len(self.order_) <= 1:
            return np.ones((data.n_tasks, 1))
        raw = np.column_stack([est.predict_proba(_threshold_labels(ordinal, t))[1].to_numpy(float)
                               for t, est in enumerate(self.estimators_)])
        return survival_to_probas(monotone_survival(raw))[:, self._rank]
