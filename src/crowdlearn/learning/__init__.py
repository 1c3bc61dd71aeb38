"""End-to-end learning from crowds: train a classifier f(x) directly from features and crowd labels.

torch is an optional dependency: importing this package imports no torch; the estimator
modules import it (through :mod:`crowdlearn.learning.torch_utils`) when a method is first resolved.

Every estimator is a :class:`crowdlearn.learning.base.CrowdClassifier` — one input path,
backbone factory (:mod:`~crowdlearn.learning.backbones`), seeding scheme and prediction code —
and either trains with its mini-batch trainer (two-stage, Crowd Layer, CoNAL, CCEM and
variants) or with its own loop on :class:`~crowdlearn.learning.base.CustomLoopClassifier`
(the EM family, Max-MIG, COINNet, DoctorNet).  One face::

    model.fit(X, labels)          # X: array (row n = task code n), DataFrame indexed by task,
                                  # or fit(labels) with features attached
    model.predict_proba(X_new)    # the data classifier f(x)
    model.probas_                 # posteriors of the training tasks (DataFrame task x class)
    model.confusions_             # (W, K, K), oriented [worker, true, answered], rows sum to 1

Confusion-matrix orientation is the library's: ``confusions_[w, j, l] = P(worker w answers l |
true class j)``.  Papers that use column-stochastic matrices (COINNet, CCEM) are converted at
the boundary.
"""

from __future__ import annotations

from .. import registry

__all__ = ["methods", "get_method", "make_classifier"]

_KIND = "learning"


def make_classifier(method: str, **params):
    """One estimator face for every learner: ``make_classifier("ccem", epochs=50)``."""
    return get_method(method)(**params)


def get_method(name: str):
    """The learning estimator class registered under ``name`` in :mod:`crowdlearn.registry`."""
    return registry.get_method(name, kind=_KIND)


def methods() -> dict[str, type]:
    """All learning methods as {short name: class}; empty when torch is not installed."""
    return registry.methods(kind=_KIND)
