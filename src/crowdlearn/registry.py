"""The method registry: short name -> estimator class, resolved lazily.

The table maps names to ``"module:Class"`` strings so that ``import crowdlearn`` imports no
estimator module (and never torch); a class is imported the first time it is asked for.
Adding a method = one file + one line here.
"""

from __future__ import annotations

from importlib import import_module

__all__ = ["methods", "get_method", "REGISTRY"]

REGISTRY: dict[str, str] = {
    "mv": "crowdlearn.aggregation.majority_vote:MajorityVote",
    "wmv": "crowdlearn.aggregation.majority_vote:WeightedMajorityVote",
    "wawa": "crowdlearn.aggregation.wawa:Wawa",
    "zbs": "crowdlearn.aggregation.zero_based_skill:ZeroBasedSkill",
    "ds": "crowdlearn.aggregation.dawid_skene:DawidSkene",
    "onecoin": "crowdlearn.aggregation.dawid_skene:OneCoinDawidSkene",
    "ccds": "crowdlearn.aggregation.dawid_skene:ClassConditionalDawidSkene",
    "glad": "crowdlearn.aggregation.glad:GLAD",
    "mace": "crowdlearn.aggregation.mace:MACE",
    "kos": "crowdlearn.aggregation.kos:KOS",
    "mmsr": "crowdlearn.aggregation.mmsr:MMSR",
    "bds": "crowdlearn.aggregation.bayesian:BayesianDawidSkene",
    "bp": "crowdlearn.aggregation.belief_propagation:BeliefPropagation",
    "mf": "crowdlearn.aggregation.belief_propagation:MeanField",
    "spectral-ds": "crowdlearn.aggregation.spectral_ds:SpectralDawidSkene",
    "multispa": "crowdlearn.aggregation.multispa:MultiSPA",
    "multispa-ds": "crowdlearn.aggregation.multispa:MultiSPADawidSkene",
    "multispa-kl": "crowdlearn.aggregation.multispa:MultiSPAKL",
    "cnmf": "crowdlearn.aggregation.cnmf:CoupledNMF",
    "tensor-admm": "crowdlearn.aggregation.tensor_admm:TensorADMM",
    "spammer-filtered": "crowdlearn.aggregation.filtered:SpammerFiltered",
    "group-ds": "crowdlearn.aggregation.group:GroupAwareDawidSkene",
    "minimax": "crowdlearn.aggregation.minimax:MinimaxEntropy",
    "eigenratio": "crowdlearn.aggregation.eigenratio:EigenRatio",
    "auto": "crowdlearn.aggregation.auto:AutoAggregator",
    "mmlc-owf": "crowdlearn.mmlc.oracle:MMLCOracle",
    "mmlc-df": "crowdlearn.mmlc.fill:MMLCFill",
}


def _load(path: str):
    module, _, name = path.partition(":")
    return getattr(import_module(module), name)


def get_method(name: str):
    """The estimator class registered under ``name``."""
    try:
        path = REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown method {name!r}; known methods: {', '.join(sorted(REGISTRY))}"
        ) from None
    return _load(path)


def methods() -> dict[str, type]:
    """All registered methods as {short name: class} (imports each module once)."""
    out = {}
    for name, path in REGISTRY.items():
        try:
            out[name] = _load(path)
        except ImportError:  # a method whose optional dependency is missing is not offered
            continue
    return out
