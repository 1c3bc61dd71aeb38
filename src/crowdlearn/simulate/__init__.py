"""Simulated crowds with planted truth and planted worker parameters: the one simulator.

* :mod:`~crowdlearn.simulate.workers`: worker models (:class:`WorkerSpec`, :class:`Beta`).
* :mod:`~crowdlearn.simulate.assignment`: who labels what (:func:`assign_workers`).
* :mod:`~crowdlearn.simulate.crowds`: drawing a crowd (:func:`crowd`, :class:`SimulatedLabels`,
  :class:`Planted`).
* :mod:`~crowdlearn.simulate.scenarios`: crowds of the literature (:func:`dawid_skene`,
  :func:`one_coin`, :func:`hammer_spammer`, :func:`sparse_regular`,
  :func:`maxmig_structures`).
* :mod:`~crowdlearn.simulate.features`: items with features (:func:`class_features`,
  :func:`annotate`, :func:`instance_outliers`).
* the other answer kinds, each with planted truth and planted worker parameters:
  :func:`continuous_crowd`, :func:`ordinal_crowd`, :func:`multilabel_crowd`,
  :func:`pairwise_crowd`, :func:`preference_crowd` and :func:`similarity_crowd` (each
  returns the answer table and a ``<Kind>Planted`` record of the planted parameters).

Every generator is a call into :func:`crowd`; the same seed gives the same output.
"""

from . import features  # noqa: F401
from .assignment import assign_workers
from .continuous import ContinuousPlanted, continuous_crowd
from .multilabel import MultiLabelPlanted, multilabel_crowd
from .ordinal import OrdinalPlanted, ordinal_crowd
from .pairwise import PairwisePlanted, PreferencePlanted, pairwise_crowd, preference_crowd
from .similarity import SimilarityPlanted, similarity_crowd
from .crowds import Planted, SimulatedLabels, crowd
from .features import annotate, class_features, instance_outliers, outlier_classes
from .scenarios import dawid_skene, hammer_spammer, maxmig_structures, one_coin, sparse_regular
from .workers import Beta, WorkerSpec, one_coin_confusions

__all__ = [
    "Beta",
    "ContinuousPlanted",
    "MultiLabelPlanted",
    "OrdinalPlanted",
    "PairwisePlanted",
    "PreferencePlanted",
    "SimilarityPlanted",
    "Planted",
    "SimulatedLabels",
    "WorkerSpec",
    "annotate",
    "assign_workers",
    "class_features",
    "continuous_crowd",
    "crowd",
    "dawid_skene",
    "features",
    "hammer_spammer",
    "instance_outliers",
    "maxmig_structures",
    "multilabel_crowd",
    "one_coin",
    "one_coin_confusions",
    "ordinal_crowd",
    "outlier_classes",
    "pairwise_crowd",
    "preference_crowd",
    "similarity_crowd",
    "sparse_regular",
]
