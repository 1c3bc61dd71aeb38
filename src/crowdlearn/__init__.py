"""crowdlearn: learning from crowds — truth inference, end-to-end learning and MMLC.

>>> import crowdlearn as cl
>>> labels = cl.datasets.load("zencrowd_us")          # a bundled real dataset
>>> ds = cl.DawidSkene().fit(labels)
>>> ds.labels_.head()                                   # doctest: +SKIP

Heavy modules (estimators, torch-based learning) load on first use: importing the package
imports only numpy and pandas.
"""

from importlib import import_module

from .core.data import CrowdLabels
from .registry import get_method, method_kinds, methods

__version__ = "0.1.0"

#: public name -> module (relative to this package), imported on first attribute access
_LAZY_MODULES = {
    "aggregation": "aggregation", "datasets": "datasets", "diagnostics": "diagnostics",
    "learning": "learning", "mmlc": "mmlc", "report": "report", "simulate": "simulate",
    "testing": "testing", "io": "io", "kernels": "core.kernels", "metrics": "diagnostics.metrics",
    # the answer kinds beyond class labels, one package each
    "continuous": "continuous", "ordinal": "ordinal", "multilabel": "multilabel",
    "pairwise": "pairwise", "similarity": "similarity",
    # fits beyond memory: on Dask, or streamed from disk
    "scale": "scale",
}
_LAZY_FUNCTIONS = {"detect_spammers": "diagnostics.detection", "detect_adversaries": "diagnostics.detection"}


def __getattr__(name):
    if name in _LAZY_MODULES:
        return import_module(f".{_LAZY_MODULES[name]}", __name__)
    if name in _LAZY_FUNCTIONS:
        return getattr(import_module(f".{_LAZY_FUNCTIONS[name]}", __name__), name)
    from . import aggregation

    if name in aggregation.__all__:
        return getattr(aggregation, name)
    raise AttributeError(f"module 'crowdlearn' has no attribute {name!r}")


def __dir__():
    from . import aggregation

    return sorted(set(globals()) | set(_LAZY_MODULES) | set(_LAZY_FUNCTIONS) | set(aggregation.__all__))


__all__ = ["CrowdLabels", "methods", "get_method", "method_kinds", "__version__"]
