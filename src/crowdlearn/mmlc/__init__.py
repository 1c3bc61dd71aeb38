"""MMLC: mixture-of-experts worker model, oracle worker finding and data filling.

Han et al., "Mixture of Experts based Multi-task Supervised Learning from Crowds", AAAI 2025
(arXiv:2407.13268).  Submodules load lazily; torch is imported only by :mod:`.model` (and the
estimators that use it), never by ``import crowdlearn``.
"""

from importlib import import_module

_ATTRS = {
    "MMLC": "model",
    "PRESETS": "model",
    "MMLCOracle": "oracle",
    "MMLCFill": "fill",
    "sweep_density": "fill",
    "fill_gate": "fill",
    "fill_labels": "fill",
    "estimate_oracle": "oracle_estimators",
    "ESTIMATORS": "oracle_estimators",
    "worker_space": "worker_space",
    "plot_worker_space": "worker_space",
}

__all__ = sorted(_ATTRS)


def __getattr__(name):
    if name in _ATTRS:
        return getattr(import_module(f".{_ATTRS[name]}", __name__), name)
    raise AttributeError(f"module 'crowdlearn.mmlc' has no attribute {name!r}")
