"""Aggregation after removing spammers: :class:`SpammerFiltered`.

Spammers (answers independent of the truth) add only noise to any aggregator, and a few
"extreme spammers" who label thousands of tasks can dominate weighted votes and the early EM
iterations.  :class:`SpammerFiltered` finds them with :func:`crowdlearn.diagnostics.detection.detect_spammers`
(low-rank model of the worker cross-covariances + a dependence test, Traganitis & Giannakis
2021), drops their answers and runs any registered aggregator on the rest.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from ..core.base import Tags, get_tags
from ..core.data import CrowdLabels
from ..registry import LABEL_KINDS, fresh_estimator, get_method
from .base import BaseAggregator

__all__ = ["SpammerFiltered"]


class SpammerFiltered(BaseAggregator):
    """Run ``base`` on the answers of the workers that are not flagged as spammers.

    Parameters
    ----------
    base : str or estimator
        A registered class-label method name (``"ds"``, ``"mv"``, ..., or an ordinal one) or an
        unfitted aggregator (cloned, never modified).
    alpha : float
        Level of the dependence test of :func:`~crowdlearn.diagnostics.detection.detect_spammers`.
    min_answers, min_shared, max_workers : int
        Passed to :func:`~crowdlearn.diagnostics.detection.detect_spammers`.
    random_state : int
        Tie-breaking seed (and the base's ``random_state`` when it has one and ``base`` is a
        name).

    Attributes
    ----------
    spammers_ : DataFrame
        The detection table (one row per worker, column ``spammer`` the flag).
    base_ : estimator
        The fitted base aggregator (on the filtered answers).
    n_removed_ : int
        Number of answers removed.
    orphans_ : Index
        Tasks whose every answer came from a flagged worker.  They keep their place in the
        output with the base's class prior (``priors_``) when it has one, else the class
        frequencies of the kept answers: no task is dropped.

    Notes
    -----
    If every worker would be flagged, nothing is removed (``spammers_`` still reports the
    flags) — filtering everything cannot be right.  Gold labels are passed to the base for
    the tasks that keep answers.
    """

    def __init__(
        self,
        base: Any = "ds",
        alpha: float = 0.01,
        min_answers: int = 20,
        min_shared: int = 10,
        max_workers: int = 500,
        random_state: int | None = 0,
    ) -> None:
        self.base = base
        self.alpha = alpha
        self.min_answers = min_answers
        self.min_shared = min_shared
        self.max_workers = max_workers
        self.random_state = random_state

    def __crowd_tags__(self) -> Tags:
        base = get_tags(get_method(self.base, LABEL_KINDS) if isinstance(self.base, str) else self.base)
        return dataclasses.replace(super().__crowd_tags__(), accepts_init=base.accepts_init,
                                   stochastic=base.stochastic, has_worker_model=base.has_worker_model,
                                   predict_matches_fit=base.predict_matches_fit)

    def _fit(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None):
        from ..diagnostics.detection import detect_spammers

        base = fresh_estimator(self.base, LABEL_KINDS, random_state=self.random_state)
        table = detect_spammers(
            data,
            alpha=self.alpha,
            min_answers=self.min_answers,
            min_shared=self.min_shared,
            max_workers=self.max_workers,
        )
        self.spammers_ = table
        flagged = table["spammer"].to_numpy()
        if flagged.all():
            flagged = np.zeros_like(flagged)
        self._kept_workers = ~flagged
        keep = ~flagged[data.worker]
        self.n_removed_ = int((~keep).sum())
        sub = data if keep.all() else data._select(keep)
        kwargs = {}
        if gold is not None:
            pos = data.tasks.get_indexer(sub.tasks)
            g = gold[pos]
            if np.any(g >= 0):
                kwargs["gold"] = pd.Series(data.classes.take(g[g >= 0]), index=sub.tasks[g >= 0])
        if init is not None and get_tags(base).accepts_init:
            kwargs["init"] = init[data.tasks.get_indexer(sub.tasks)]
        base.fit(sub, **kwargs)
        self.base_ = base
        for attr in ("n_iter_", "converged_"):
            if hasattr(base, attr):
                setattr(self, attr, getattr(base, attr))
        self.history_ = list(getattr(base, "history_", []))
        prior = getattr(base, "priors_", None)
        if prior is not None:
            fill = prior.reindex(data.classes, fill_value=0.0).to_numpy()
        else:
            fill = np.bincount(sub.label, minlength=data.n_classes).astype(float)
        self._orphan_row = fill / fill.sum() if fill.sum() > 0 else np.full(data.n_classes, 1.0 / data.n_classes)
        proba, orphan = self._merge(data, sub, base.probas_)
        self.orphans_ = data.tasks[orphan]
        return proba

    def _merge(self, data: CrowdLabels, sub: CrowdLabels, sub_proba: pd.DataFrame):
        """Posteriors of all tasks of ``data`` from those of its filtered part ``sub``; the
        tasks left without answers (orphans) take the fitted class prior."""
        proba = np.empty((data.n_tasks, data.n_classes))
        pos = data.tasks.get_indexer(sub.tasks)
        proba[pos] = sub_proba.reindex(columns=data.classes, fill_value=0.0).to_numpy()
        orphan = np.ones(data.n_tasks, dtype=bool)
        orphan[pos] = False
        proba[orphan] = self._orphan_row
        return proba, orphan

    def _predict_proba_codes(self, data: CrowdLabels) -> np.ndarray:
        """The base's worker model on the answers of the workers kept by the fit.

        On the training answers this is the fit's computation (same filtered answers, same
        orphan rows), so it reproduces ``probas_`` when the base's ``predict_proba`` does.
        """
        keep = self._kept_workers[data.worker]
        sub = data if keep.all() else data._select(keep)
        if sub.n_labels == 0:
            return np.tile(self._orphan_row, (data.n_tasks, 1))
        return self._merge(data, sub, self.base_.predict_proba(sub))[0]
