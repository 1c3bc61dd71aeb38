"""Multi-label answers: a set of tags per answer (possibly empty).

* :class:`~crowdlearn.multilabel.data.MultiLabelAnswers`: the answer table;
* :class:`~crowdlearn.multilabel.base.MultiLabelEstimator`: the kind's estimator base;
* :class:`~crowdlearn.multilabel.binary_relevance.BinaryRelevance` (``binary-relevance``):
  one independent fit of any classification aggregator per tag.
"""

from .base import MultiLabelEstimator
from .data import MultiLabelAnswers, as_multilabel_answers

__all__ = ["MultiLabelAnswers", "MultiLabelEstimator", "as_multilabel_answers"]
