"""The one method registry: short name -> (kind, estimator class), resolved lazily.

Every method of every kind is one line of :data:`REGISTRY`: its short name, its kind and where
its class lives (``"module:Class"``).  Classes are imported the first time they are asked for,
so ``import crowdlearn`` imports no estimator module and never torch, and listing names and
kinds (:func:`method_kinds`) imports nothing.  Adding a method = one file + one line here.

Kinds (see :data:`crowdlearn.core.base.KINDS`):

``"classification"``
    Truth inference of categorical labels from crowd answers (the aggregators, and MMLC's
    aggregators, which also need item features).
``"learning"``
    End-to-end learners: train a classifier ``f(x)`` from item features and crowd answers
    (torch).
``"continuous"``, ``"ordinal"``, ``"multilabel"``, ``"pairwise"``, ``"similarity"``
    Truth inference for the other answer types; each kind fits on its own answer table
    (:data:`ANSWER_TABLES`).

What a method needs (features, two classes only, ...) is declared by the class itself, in its
tags (:func:`crowdlearn.core.base.get_tags`); the registry's kind must equal the class's
``kind`` tag (tested).
"""

from __future__ import annotations

from importlib import import_module
from typing import NamedTuple

__all__ = ["methods", "get_method", "fresh_estimator", "method_kinds", "answer_type_of", "REGISTRY", "ANSWER_TABLES",
           "DEFAULT_METHODS", "LABEL_KINDS", "Entry", "load_path"]


class Entry(NamedTuple):
    """One registered method: its kind and ``"module:Class"``."""

    kind: str
    path: str


_C, _L = "classification", "learning"
_CONT, _ORD, _ML, _PW, _SIM = "continuous", "ordinal", "multilabel", "pairwise", "similarity"

REGISTRY: dict[str, Entry] = {
    # ---- classification: truth inference from answers
    "mv": Entry(_C, "crowdlearn.aggregation.majority_vote:MajorityVote"),
    "wmv": Entry(_C, "crowdlearn.aggregation.majority_vote:WeightedMajorityVote"),
    "wawa": Entry(_C, "crowdlearn.aggregation.wawa:Wawa"),
    "zbs": Entry(_C, "crowdlearn.aggregation.zero_based_skill:ZeroBasedSkill"),
    "ds": Entry(_C, "crowdlearn.aggregation.dawid_skene:DawidSkene"),
    "hds": Entry(_C, "crowdlearn.aggregation.hierarchical_ds:HierarchicalDawidSkene"),
    "onecoin": Entry(_C, "crowdlearn.aggregation.dawid_skene:OneCoinDawidSkene"),
    "ccds": Entry(_C, "crowdlearn.aggregation.dawid_skene:ClassConditionalDawidSkene"),
    "glad": Entry(_C, "crowdlearn.aggregation.glad:GLAD"),
    "mace": Entry(_C, "crowdlearn.aggregation.mace:MACE"),
    "kos": Entry(_C, "crowdlearn.aggregation.kos:KOS"),
    "mmsr": Entry(_C, "crowdlearn.aggregation.mmsr:MMSR"),
    "bds": Entry(_C, "crowdlearn.aggregation.bayesian:BayesianDawidSkene"),
    "bp": Entry(_C, "crowdlearn.aggregation.belief_propagation:BeliefPropagation"),
    "mf": Entry(_C, "crowdlearn.aggregation.belief_propagation:MeanField"),
    "spectral-ds": Entry(_C, "crowdlearn.aggregation.spectral_ds:SpectralDawidSkene"),
    "multispa": Entry(_C, "crowdlearn.aggregation.multispa:MultiSPA"),
    "multispa-ds": Entry(_C, "crowdlearn.aggregation.multispa:MultiSPADawidSkene"),
    "multispa-kl": Entry(_C, "crowdlearn.aggregation.multispa:MultiSPAKL"),
    "cnmf": Entry(_C, "crowdlearn.aggregation.cnmf:CoupledNMF"),
    "tensor-admm": Entry(_C, "crowdlearn.aggregation.tensor_admm:TensorADMM"),
    "spammer-filtered": Entry(_C, "crowdlearn.aggregation.filtered:SpammerFiltered"),
    "group-ds": Entry(_C, "crowdlearn.aggregation.group:GroupAwareDawidSkene"),
    "minimax": Entry(_C, "crowdlearn.aggregation.minimax:MinimaxEntropy"),
    "eigenratio": Entry(_C, "crowdlearn.aggregation.eigenratio:EigenRatio"),
    "auto": Entry(_C, "crowdlearn.aggregation.auto:AutoAggregator"),
    # ---- classification with item features (MMLC)
    "mmlc-owf": Entry(_C, "crowdlearn.mmlc.oracle:MMLCOracle"),
    "mmlc-df": Entry(_C, "crowdlearn.mmlc.fill:MMLCFill"),
    # ---- learning: a classifier f(x) trained from features and answers (torch)
    "two-stage": Entry(_L, "crowdlearn.learning.two_stage:TwoStage"),
    "crowd-layer": Entry(_L, "crowdlearn.learning.crowd_layer:CrowdLayer"),
    "conal": Entry(_L, "crowdlearn.learning.crowd_layer:CoNAL"),
    "ccem": Entry(_L, "crowdlearn.learning.ccem:CCEM"),
    "geocrowdnet-f": Entry(_L, "crowdlearn.learning.ccem:GeoCrowdNetF"),
    "geocrowdnet-w": Entry(_L, "crowdlearn.learning.ccem:GeoCrowdNetW"),
    "tracereg": Entry(_L, "crowdlearn.learning.ccem:TraceReg"),
    "raykar": Entry(_L, "crowdlearn.learning.em_family:Raykar"),
    "aggnet": Entry(_L, "crowdlearn.learning.em_family:AggNet"),
    "deepmf": Entry(_L, "crowdlearn.learning.em_family:DeepMF"),
    "deepbp": Entry(_L, "crowdlearn.learning.em_family:DeepBP"),
    "bayesdgc": Entry(_L, "crowdlearn.learning.em_family:BayesDGC"),
    "maxmig": Entry(_L, "crowdlearn.learning.maxmig:MaxMIG"),
    "coinnet": Entry(_L, "crowdlearn.learning.coinnet:COINNet"),
    "doctornet": Entry(_L, "crowdlearn.learning.doctornet:DoctorNet"),
    # ---- continuous: a number per answer; estimate and standard error per task
    "mean": Entry(_CONT, "crowdlearn.continuous.location:Mean"),
    "median": Entry(_CONT, "crowdlearn.continuous.location:Median"),
    "trimmed-mean": Entry(_CONT, "crowdlearn.continuous.location:TrimmedMean"),
    "gaussian-em": Entry(_CONT, "crowdlearn.continuous.gaussian_em:GaussianEM"),
    "catd": Entry(_CONT, "crowdlearn.continuous.catd:CATD"),
    "lrs-moments": Entry(_CONT, "crowdlearn.continuous.lrs_moments:LRSMoments"),
    "crowd-layer-regression": Entry(_CONT, "crowdlearn.learning.crowd_layer_regression:CrowdLayerRegression"),

    # ---- ordinal: one of K ordered classes per answer
    "ordinal-cumulative": Entry(_ORD, "crowdlearn.ordinal.cumulative:OrdinalCumulative"),
    "ordinal-ds": Entry(_ORD, "crowdlearn.ordinal.ordinal_ds:OrdinalDawidSkene"),

    # ---- multilabel: a set of tags per answer
    "binary-relevance": Entry(_ML, "crowdlearn.multilabel.binary_relevance:BinaryRelevance"),

    # ---- pairwise: which of two items wins (or a tie); score and rank per item
    "bt": Entry(_PW, "crowdlearn.pairwise.bt:BradleyTerry"),
    "thurstone": Entry(_PW, "crowdlearn.pairwise.thurstone:Thurstone"),
    "crowd-bt": Entry(_PW, "crowdlearn.pairwise.crowd_bt:CrowdBT"),
    "noisy-bt": Entry(_PW, "crowdlearn.pairwise.noisy_bt:NoisyBT"),

    # ---- similarity: whether two items belong together; a cluster per item
    "symnmf": Entry(_SIM, "crowdlearn.similarity.symnmf:SymNMFClustering"),
    "similarity-spectral": Entry(_SIM, "crowdlearn.similarity.spectral:SpectralSimilarity"),
    "crowd-clustering": Entry(_SIM, "crowdlearn.learning.crowd_clustering:CrowdClustering"),

}

#: the method ``crowdlearn aggregate`` runs for a kind when none is named
DEFAULT_METHODS: dict[str, str] = {
    _C: "ds",
    _CONT: "gaussian-em",
    _ORD: "ordinal-ds",
    _ML: "binary-relevance",
    _PW: "bt",
    _SIM: "symnmf",
}

#: the kinds whose methods fit class labels (CrowdLabels) from the answers alone: those a
#: method built on another class-label method may run (a wrapper's ``base``, ``auto``'s
#: candidates), so that an unknown name there lists these, not every kind's
LABEL_KINDS: tuple[str, ...] = (_C, _ORD)

#: kind -> "module:Class" of the answer table its methods fit on (ordinal methods fit on
#: CrowdLabels with ordered classes); read by the CLI and the benchmarks
ANSWER_TABLES: dict[str, str] = {
    _C: "crowdlearn.core.data:CrowdLabels",
    _L: "crowdlearn.core.data:CrowdLabels",
    _CONT: "crowdlearn.continuous.data:ContinuousAnswers",
    _ORD: "crowdlearn.core.data:CrowdLabels",
    _ML: "crowdlearn.multilabel.data:MultiLabelAnswers",
    _PW: "crowdlearn.pairwise.data:Comparisons",
    _SIM: "crowdlearn.similarity.data:SimilarityAnswers",
}


def load_path(path: str):
    """The object a ``"module:attribute"`` path names (imported on first use): the one
    resolver of the registry's and the other lazy tables' entries."""
    module, _, name = path.partition(":")
    return getattr(import_module(module), name)


def _check_kind(kind: str | None) -> None:
    if kind is None:
        return
    from .core.base import KINDS

    if kind not in KINDS:
        raise ValueError(f"unknown method kind {kind!r}; known kinds: {', '.join(KINDS)}")


def get_method(name: str, kind: str | tuple[str, ...] | None = None):
    """The estimator class registered under ``name`` (of ``kind``, when given).

    Parameters
    ----------
    name : str
        A registered short name.
    kind : str or tuple of str, optional
        The kind, or the kinds (e.g. :data:`LABEL_KINDS`), the method must be of; the error
        for a name of none of them lists only their methods.

    Raises
    ------
    ValueError
        For an unknown name, or a name of another kind.
    ImportError
        When the method's optional dependency (e.g. torch) is missing.
    """
    kinds = (kind,) if isinstance(kind, str) else kind
    for k in kinds or ():
        _check_kind(k)
    entry = REGISTRY.get(name)
    if entry is None or (kinds is not None and entry.kind not in kinds):
        known = sorted(n for n, e in REGISTRY.items() if kinds is None or e.kind in kinds)
        what = "method" if kinds is None else f"{' or '.join(kinds)} method"
        raise ValueError(f"unknown {what} {name!r}; known: {', '.join(known)}") from None
    return load_path(entry.path)


def fresh_estimator(spec, kind: str | tuple[str, ...] | None = None, random_state=0):
    """An unfitted estimator for a method that fits another one (a wrapper's ``base``).

    ``spec`` is a registered name, instantiated with its defaults and given
    ``random_state`` when it takes one, or an estimator, cloned with its own parameters
    (so the caller's object is never fitted or changed).  A name must be of ``kind`` (one
    kind or several, :func:`get_method`).
    """
    if isinstance(spec, str):
        est = get_method(spec, kind)()
        if "random_state" in est.get_params():
            est.set_params(random_state=random_state)
        return est
    from sklearn.base import clone

    return clone(spec)


def methods(kind: str | None = None) -> dict[str, type]:
    """Registered methods as {short name: class}, all kinds or those of ``kind``.

    Imports each method's module; a method whose optional dependency is missing (torch for
    the learners and MMLC) is left out.
    """
    _check_kind(kind)
    out = {}
    for name, entry in REGISTRY.items():
        if kind is not None and entry.kind != kind:
            continue
        try:
            out[name] = load_path(entry.path)
        except ImportError:
            continue
    return out


def answer_type_of(kind: str) -> type:
    """The answer-table class the methods of ``kind`` fit on (see :data:`ANSWER_TABLES`)."""
    _check_kind(kind)
    return load_path(ANSWER_TABLES[kind])


def method_kinds() -> dict[str, str]:
    """{short name: kind} of every registered method, without importing any of them."""
    return {name: entry.kind for name, entry in REGISTRY.items()}
