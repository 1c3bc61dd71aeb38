"""Truth inference from crowd labels only (no item features).

Every class follows the estimator contract of :class:`~crowdlearn.aggregation.base.BaseAggregator`.
Modules are imported on first attribute access, so ``import crowdlearn.aggregation`` is cheap.
"""

from importlib import import_module

from ..registry import REGISTRY

_CLASSES = {
    entry.path.split(":")[1]: entry.path.split(":")[0]
    for entry in REGISTRY.values()
    if entry.path.startswith("crowdlearn.aggregation.")
}

#: meta-estimators that are not registered methods: they need gold labels to fit
_CLASSES["CalibratedAggregator"] = "crowdlearn.aggregation.calibration"

#: names of the estimator contract (:mod:`.base`): the base class, and the marker of gold
#: given as class codes
_BASE_NAMES = ("BaseAggregator", "GoldCodes")

__all__ = sorted(_CLASSES) + list(_BASE_NAMES)


def __getattr__(name):
    if name in _BASE_NAMES:
        return getattr(import_module(".base", __name__), name)
    if name in _CLASSES:
        return getattr(import_module(_CLASSES[name]), name)
    raise AttributeError(f"module 'crowdlearn.aggregation' has no attribute {name!r}")


def __dir__():
    return __all__
