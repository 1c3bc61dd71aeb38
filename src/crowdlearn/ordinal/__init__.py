"""Ordinal answers: one of K ordered classes per answer (graded relevance, Likert scales).

Ordinal methods are aggregators over :class:`~crowdlearn.core.data.CrowdLabels` whose classes
are ordered (:func:`crowdlearn.ordinal.base.ordinal_order` states the ordering rule once):
they have the aggregators' outputs (``labels_``, ``probas_``, gold) and are registered under
the kind ``"ordinal"``.

* :class:`~crowdlearn.ordinal.cumulative.OrdinalCumulative` (``ordinal-cumulative``): K-1
  binary problems "y > k", each solved by any binary aggregator, recombined monotonically;
* :class:`~crowdlearn.ordinal.ordinal_ds.OrdinalDawidSkene` (``ordinal-ds``): Dawid-Skene
  whose confusion rows are a discretised logistic or normal around the true class, with a
  bias and a spread per worker.
"""

from .base import OrdinalAggregator, monotone_survival, ordinal_order

__all__ = ["OrdinalAggregator", "ordinal_order", "monotone_survival"]
