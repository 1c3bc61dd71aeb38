"""Diagnostics of a crowd and of a fit: spammer, adversary and dependency detection
(:mod:`.detection`), metrics against gold and of agreement (:mod:`.metrics`), and the
consensus of a crowd with a classifier's probabilities (:func:`model_consensus`, in
:mod:`.model_consensus`)."""

from .model_consensus import ModelConsensus, model_consensus

__all__ = ["model_consensus", "ModelConsensus"]
