"""Binary relevance: one independent binary truth-inference problem per tag.

For each tag ``t`` the answers become a two-class crowd, "does ``t`` apply?" (an answer
votes 1 when it holds ``t``, 0 otherwise; an empty answer votes 0 for every tag), solved by
any registered classification aggregator (Dawid-Skene by default), as in the binary
relevance reduction of multi-label learning (Tsoumakas and Katakis, 2007, "Multi-label
classification: an overview", IJDWM 3(3)), and as crowd-kit's ``BinaryRelevance`` does for
crowds.  Every tag gets a fresh clone of the aggregator: no state is shared between tags,
so the result for a tag is exactly that of the aggregator fitted alone on that tag's crowd.
Each worker thus gets a sensitivity and a specificity per tag (with ``ds``); correlations
between tags are not modelled.  Cost: the aggregator's, once per tag (linear in answers).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..aggregation.base import label_aggregator
from .base import MultiLabelEstimator
from .data import MultiLabelAnswers

__all__ = ["BinaryRelevance"]


class BinaryRelevance(MultiLabelEstimator):
    """One classification aggregator per tag, fitted independently.

    Parameters
    ----------
    method : str, class or estimator, default "ds"
        A registered classification method name (``crowdlearn.methods(kind="classification")``),
        an estimator class or an instance (cloned per tag).
    params : dict, optional
        Constructor arguments of ``method``.
    threshold : float, default 0.5
        A tag is decided when ``P(tag) > threshold``; at exactly ``0.5`` with the default
        threshold the tag's aggregator breaks the tie (its seeded rule), so the decisions are
        the per-tag aggregators' ``labels_``.
    random_state : int, default 0
        Given to every tag's aggregator that has a ``random_state`` (unless ``params`` sets it).

    Attributes
    ----------
    estimators_ : dict tag -> fitted aggregator
    probas_, labels_, decisions_ : see :class:`MultiLabelEstimator`.
    n_iter_ : int
        The most rounds any tag's fit ran; ``converged_`` : bool, whether every tag's did.
    history_ : dict tag -> list
        Each tag's fit's ``history_``.
    """

    def __init__(self, method: Any = "ds", params: dict | None = None, threshold: float = 0.5,
                 random_state: int | None = 0) -> None:
        self.method = method
        self.params = params
        self.threshold = threshold
        self.random_state = random_state

    def _aggregator(self):
        """A fresh aggregator for one tag (no state shared between tags)."""
        return label_aggregator(self.method, self.params, self.random_state)

    def _fit(self, data: MultiLabelAnswers) -> None:
        t = self.threshold
        if not (isinstance(t, (int, float, np.number)) and 0.0 <= t < 1.0):
            raise ValueError(f"threshold must be a number in [0, 1), got {t!r}")
        proba = np.zeros((data.n_tasks, data.n_tags))
        decisions = np.zeros((data.n_tasks, data.n_tags), dtype=bool)
        self.estimators_ = {}
        for j, tag in enumerate(data.tags):
            est = self._aggregator().fit(data.tag_labels(tag))
            self.estimators_[tag] = est
            p = est.probas_[1].to_numpy(float)
            proba[:, j] = p
            decisions[:, j] = p > t
            if t == 0.5:  # exact ties: the aggregator's own seeded rule
                tie = p == 0.5
                decisions[tie, j] = est.labels_.to_numpy()[tie] == 1
        self._set_result(data, proba, decisions)
        fits = self.estimators_.values()
        self.n_iter_ = max((int(getattr(e, "n_iter_", 0)) for e in fits), default=0)
        self.converged_ = all(bool(getattr(e, "converged_", True)) for e in fits)
        self.history_ = {tag: list(getattr(e, "history_", [])) for tag, e in self.estimators_.items()}
