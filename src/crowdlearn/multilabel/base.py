"""The estimator base of the multi-label kind."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..core.base import AnswerEstimator, Tags
from ..core.params import check_params
from .data import MultiLabelAnswers, as_multilabel_answers

__all__ = ["MultiLabelEstimator"]


class MultiLabelEstimator(AnswerEstimator):
    """Base of the multi-label methods.

    ``fit(answers)`` takes a :class:`MultiLabelAnswers` (or a DataFrame with task, worker,
    label columns), validates the hyper-parameters, never mutates the input, and calls
    ``_fit(data)``, which sets:

    probas_ : DataFrame, tasks x tags
        ``P(tag applies to the task)``.
    labels_ : Series of tuples, by task
        The tags decided for each task, in tag order (``()`` = no tag).
    decisions_ : ndarray of bool (tasks x tags)

    :meth:`result_frame` is ``task, label, confidence, p:<tag>...``: ``label`` the decided
    tags joined by the input's delimiter, ``confidence`` the probability of the whole decision
    (the product over tags of the probability of the choice taken, as the tags are inferred
    independently).
    """

    _result_attr = "probas_"

    def __crowd_tags__(self) -> Tags:
        return Tags(kind="multilabel", answer_type="multilabel", accepts_gold=False)

    def fit(self, answers: Any) -> "MultiLabelEstimator":
        """Infer the tag set of every task from the answers."""
        check_params(self)
        data = as_multilabel_answers(answers)
        if data.n_answers == 0:
            raise ValueError("no crowd answers to aggregate")
        self._fit(data)
        self.delimiter_ = data.delimiter
        return self

    def _fit(self, data: MultiLabelAnswers) -> None:
        raise NotImplementedError

    def _set_result(self, data: MultiLabelAnswers, proba: np.ndarray, decisions: np.ndarray) -> None:
        self.tasks_, self.workers_, self.tags_ = data.tasks, data.workers, data.tags
        self.probas_ = pd.DataFrame(proba, index=data.tasks, columns=data.tags)
        self.decisions_ = decisions
        tags = np.asarray(data.tags, dtype=object)
        self.labels_ = pd.Series([tuple(tags[row]) for row in decisions], index=data.tasks,
                                 name="label", dtype=object)

    def _result_frame(self) -> pd.DataFrame:
        p = self.probas_.to_numpy(float)
        chosen = np.where(self.decisions_, p, 1.0 - p)
        head = pd.DataFrame({
            "task": self.probas_.index.to_numpy(),
            "label": [self.delimiter_.join(str(t) for t in row) for row in self.labels_],
            "confidence": chosen.prod(axis=1) if p.shape[1] else np.ones(len(p)),
        })
        cols = pd.DataFrame(p, columns=[f"p:{t}" for t in self.probas_.columns])
        return pd.concat([head, cols], axis=1)
