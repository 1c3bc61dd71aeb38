"""Continuous answers (a number per answer): truth inference with an estimate and a standard
error per task, and per-worker bias, scale and noise.

The answer table is :class:`~crowdlearn.continuous.data.ContinuousAnswers`; every method is a
:class:`~crowdlearn.continuous.base.ContinuousEstimator` registered under kind
``"continuous"``.  Modules are imported on first attribute access.
"""

from importlib import import_module

from ..registry import REGISTRY

_CLASSES = {
    entry.path.split(":")[1]: entry.path.split(":")[0]
    for entry in REGISTRY.values()
    if entry.path.startswith("crowdlearn.continuous.")
}
_CLASSES.update({"ContinuousAnswers": "crowdlearn.continuous.data",
                 "ContinuousEstimator": "crowdlearn.continuous.base",
                 # not a registered method: it needs gold values to fit
                 "CalibratedContinuous": "crowdlearn.continuous.calibration"})

__all__ = sorted(_CLASSES)


def __getattr__(name):
    module = _CLASSES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module), name)
