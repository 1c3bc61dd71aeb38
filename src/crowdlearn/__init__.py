"""crowdlearn: learning from crowds — truth inference, end-to-end learning and MMLC.

>>> import crowdlearn as cl
>>> labels = cl.datasets.load("zencrowd_us")          # a bundled real dataset
>>> ds = cl.DawidSkene().fit(labels)
>>> ds.labels_.head()                                   # doctest: +SKIP

Heavy modules (estimators, torch-based learning) load on first use: importing the package
imports only numpy and pandas.
"""

from importlib import import_module

from .data import CrowdLabels
from .registry import get_method, methods

__version__ = "0.1.0"

_LAZY_MODULES = {"aggregation", "datasets", "io", "kernels", "metrics", "report", "robust", "simulate", "testing"}
_LAZY_FUNCTIONS = {"detect_spammers": "robust", "detect_adversaries": "robust"}


def __getattr__(name):
    if name in _LAZY_MODULES:
        return import_module(f".{name}", __name__)
    if name in _LAZY_FUNCTIONS:
        return getattr(import_module(f".{_LAZY_FUNCTIONS[name]}", __name__), name)
    from . import aggregation

    if name in aggregation.__all__:
        return getattr(aggregation, name)
    raise AttributeError(f"module 'crowdlearn' has no attribute {name!r}")


def __dir__():
    from . import aggregation

    return sorted(set(globals()) | _LAZY_MODULES | set(_LAZY_FUNCTIONS) | set(aggregation.__all__))


__all__ = ["CrowdLabels", "methods", "get_method", "__version__"]
