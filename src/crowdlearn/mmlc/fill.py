"""MMLC-df: fill sparse crowd data with MMLC predictions, then aggregate (Han et al., AAAI 2025).

For a threshold b, every *dense* worker (more than b answers) gets a label on every task: the
real answer where there is one, otherwise the MMLC prediction for that worker,
``argmax_k P(y = k | x_i, g(w))`` (the worker's own projection).  Answers of sparse workers are
kept unchanged.  Any registered aggregator then runs on the filled matrix.

The default ``b = "median"`` (the median number of answers per worker) fills the denser half
of the workers, whose behaviour the network has seen most of.  Filling everyone (``b = 0``,
one reading of the paper) hands the aggregator far more predicted than real answers, and the
aggregators then drift towards the network's own accuracy, which hurts when the features
predict the truth less well than the crowd does.  The default was compared with ``b = 0`` on
simulated crowds with features of different strength (``benchmarks/tune_defaults.py``), not
on the real benchmark sets.

Not in the paper: the *gate* (:func:`fill_gate`, on by default) keeps the filling only if,
with a share of the answers set aside, the aggregate of the filled answers agrees with the
set-aside answers at least as often as the aggregate of the raw ones.  Where the features
predict less well than the crowd, filling pulls the aggregate towards the network's labels,
and the check sees it on answers neither fit used.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone

from ..aggregation.base import BaseAggregator, GoldCodes
from ..core.base import Tags, resolve_seed
from ..benchmarking import gold_accuracy
from ..core.data import CrowdLabels, as_crowd_labels
from ..registry import get_method
from .oracle import require_features, make_mmlc_model

__all__ = ["MMLCFill", "fill_labels", "fill_gate", "sweep_density", "density_threshold"]

#: ``MMLCFill.fit`` warns when filling adds more predicted answers per real answer than this
FILL_RATIO_WARNING = 20.0


def density_threshold(data: CrowdLabels, b: int | str) -> int:
    """``b`` as a number of answers: ``"median"`` = median answers per worker (rounded down)."""
    if isinstance(b, str):
        if b != "median":
            raise ValueError(f"b must be a non-negative integer or 'median', got {b!r}")
        return int(np.median(data.labels_per_worker())) if data.n_workers else 0
    if not (isinstance(b, (int, np.integer)) and b >= 0):
        raise ValueError(f"b must be a non-negative integer or 'median', got {b!r}")
    return int(b)


def fill_labels(model, data: CrowdLabels, b: int | str = "median") -> CrowdLabels:
    """``data`` plus predicted answers of the workers with more than ``b`` answers.

    ``model`` is an MMLC fitted on ``data`` (same task/worker ids).  Real answers are never
    replaced; the result has the same tasks, workers, classes, truth and features.
    ``b = "median"``: the median number of answers per worker (see the module docstring).
    """
    require_features(data, "data filling")
    b = density_threshold(data, b)
    w_map = model.workers_.get_indexer(data.workers)
    per_worker = np.bincount(data.worker, minlength=data.n_workers)
    dense = np.flatnonzero((per_worker > b) & (w_map >= 0))
    answered = np.zeros((data.n_tasks, data.n_workers), dtype=bool)
    answered[data.task, data.worker] = True
    tasks, workers, labels = [data.task], [data.worker], [data.label]
    proj = model.worker_projections_.to_numpy()
    cls_map = data.classes.get_indexer(model.classes_)  # model class code -> data class code
    todo = [(w, np.flatnonzero(~answered[:, w])) for w in dense]
    todo = [(w, missing) for w, missing in todo if missing.size]
    preds = model.predict_workers(data.features, [m for _, m in todo], proj[w_map[[w for w, _ in todo]]]) \
        if todo else []
    for (w, missing), pred in zip(todo, preds):
        tasks.append(missing.astype(np.int32))
        workers.append(np.full(missing.size, w, dtype=np.int32))
        labels.append(cls_map[pred].astype(np.int32))
    return CrowdLabels.from_codes(
        np.concatenate(tasks), np.concatenate(workers), np.concatenate(labels),
        tasks=data.tasks, workers=data.workers, classes=data.classes,
        truth=data.truth, features=data.features,
    )


def fill_gate(labels: Any, b: int | str = "median", base: Any = "ds", model=None,
              random_state=0, held_out: float = 0.2) -> pd.Series:
    """Does filling improve ``base`` on these answers?  A check on answers nobody saw.

    A seeded share ``held_out`` of the answers is set aside.  On the rest, MMLC is fitted
    and ``base`` aggregates both the raw and the filled answers; each aggregate's labels are
    compared with the set-aside answers.  An aggregate closer to the truth agrees with a
    better-than-chance worker more often (for symmetric errors the agreement
    ``a q + (1 - a)(1 - q) / (K - 1)`` grows with the aggregate's accuracy ``a`` whenever the
    worker's ``q > 1/K``), so filling is kept when its labels agree with the set-aside answers
    at least as often as the raw aggregate's do.  Costs one more MMLC fit (on
    ``1 - held_out`` of the answers) and two fits of ``base``.

    Returns a Series: ``held_out`` (answers set aside), ``agreement_raw``,
    ``agreement_filled`` and ``fill`` (bool); for a list of bases, a frame with one such row
    per base (all checked on the one held-out MMLC fit).
    """
    data = as_crowd_labels(labels)
    require_features(data, "fill_gate")
    if not 0.0 < held_out < 1.0:
        raise ValueError(f"held_out must be in (0, 1), got {held_out!r}")
    n = data.n_labels
    aside = np.zeros(n, dtype=bool)
    # drawn per answer in (task, worker, label) order: the split ignores the rows' order
    aside[data.canonical_order()] = np.random.default_rng(resolve_seed(random_state)).random(n) < held_out
    rest = data._select_keep_ids(~aside)  # every task, worker and class id kept
    mdl = make_mmlc_model(model, random_state).fit(rest)
    filled = fill_labels(mdl, rest, density_threshold(data, b))
    task, label = data.task[aside], data.label[aside]

    def check(one):
        agree = [float(np.mean(_base_estimator(one, random_state).fit(d).label_codes_[task] == label))
                 if task.size else np.nan for d in (rest, filled)]
        return pd.Series({"held_out": int(task.size), "agreement_raw": agree[0],
                          "agreement_filled": agree[1], "fill": not agree[1] < agree[0]})

    if isinstance(base, (list, tuple)):  # several bases, one MMLC fit
        return pd.DataFrame([check(one) for one in base], index=[str(one) for one in base])
    return check(base)


def _base_estimator(base: Any, random_state) -> BaseAggregator:
    est = get_method(base)() if isinstance(base, str) else clone(base)
    if not hasattr(est, "fit") or not hasattr(est, "get_params"):
        raise ValueError(f"base must be a registered method name or an aggregator, got {base!r}")
    if random_state is not None and "random_state" in est.get_params():
        est.set_params(random_state=random_state)
    return est


class MMLCFill(BaseAggregator):
    """MMLC-df: aggregate crowd labels densified with MMLC's per-worker predictions.

    Caution: filled answers can outnumber real ones by orders of magnitude on sparse crowds,
    and the aggregator then returns the network's own labels.  That helps when the features
    predict the answers well and costs a lot when they predict them worse than the crowd
    does (benchmarks/RESULTS.md, section 8); the gate (``gate=True``, :func:`fill_gate`)
    falls back to the raw answers when filling makes the aggregate agree less with answers
    set aside.  ``gate_`` says what it measured and chose.

    Parameters
    ----------
    base : str or aggregator
        The aggregator run on the filled data (any registered name, default ``"ds"``).
    b : int or "median"
        Density threshold: workers with more than ``b`` answers are filled (0 = all);
        ``"median"`` (default) = the median number of answers per worker.
    gate : bool
        Keep the filling only if it passes :func:`fill_gate`'s check on answers set aside
        (else ``base`` runs on the raw answers).  Default True, chosen
        on simulated crowds with features of different strength (benchmarks/tune_defaults.py,
        section ``tune-mmlc-df.gate`` of benchmarks/RESULTS.md), not on the real sets.
    model : MMLC or dict, optional
        Network configuration: an MMLC (cloned) or a dict of MMLC keyword arguments.
    random_state : int
        Seed of the network and of the base aggregator.

    Attributes
    ----------
    model_, base_ : the fitted MMLC and base aggregator
    filled_ : CrowdLabels
        The filled data the base aggregator saw.
    threshold_ : int
        The threshold used (``b`` resolved to a number of answers).
    gate_ : Series or None
        :func:`fill_gate`'s result (None with ``gate=False``); ``gate_["fill"]`` False means
        ``filled_`` is the raw answers.
    fill_ratio_ : float
        Predicted answers added per real answer; above ``FILL_RATIO_WARNING`` (20) ``fit``
        warns.
    """

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), requires_features=True, stochastic=True)

    def __init__(self, base="ds", b="median", gate=True, model=None, random_state=0):
        self.base = base
        self.b = b
        self.gate = gate
        self.model = model
        self.random_state = random_state

    def _check_data(self, data: CrowdLabels) -> None:
        super()._check_data(data)
        require_features(data, "mmlc-df")
        if isinstance(self.base, str) and self.base in ("mmlc-df", "mmlc-owf"):
            raise ValueError(f"base must be a label-only aggregator, got {self.base!r}")
        density_threshold(data, self.b)  # validates b

    def _fit(self, data, gold, init):
        self.model_ = make_mmlc_model(self.model, self.random_state).fit(data)
        self.threshold_ = density_threshold(data, self.b)
        self.gate_ = fill_gate(data, self.threshold_, self.base, self.model, self.random_state) \
            if self.gate else None
        self.filled_ = fill_labels(self.model_, data, self.threshold_) \
            if self.gate_ is None or self.gate_["fill"] else data
        self.fill_ratio_ = (self.filled_.n_labels - data.n_labels) / max(data.n_labels, 1)
        if self.fill_ratio_ > FILL_RATIO_WARNING:
            warnings.warn(
                f"MMLC-df added {self.fill_ratio_:.0f} predicted answers per real answer; the "
                f"aggregator will mostly return the network's own labels (compare with "
                f"{self.base!r} on the raw answers, or raise b)", stacklevel=2)
        self.base_ = _base_estimator(self.base, self.random_state)
        # ``filled_`` has the tasks and classes of ``data``, so this fit's gold codes are codes
        # of ``filled_`` too; as a plain array ``fit`` would refuse them
        self.base_.fit(self.filled_, gold=None if gold is None else GoldCodes(gold))
        # every task of ``data`` is a task of ``filled_`` (same index), so this is a plain copy
        return np.array(self.base_.probas_.reindex(index=data.tasks, columns=data.classes).to_numpy(), dtype=np.float64)


def sweep_density(labels: Any, bs, base: Any = "ds", model=None, random_state: int = 0) -> pd.DataFrame:
    """Accuracy of ``base`` on data filled at each threshold in ``bs`` (one MMLC fit).

    Returns a table with columns ``b, dense_workers, n_labels, density, accuracy`` and a first
    row ``b = None`` for the unfilled data.  ``density`` = answers / (tasks x workers);
    ``accuracy`` is against the labels' gold (NaN without gold).
    """
    data = as_crowd_labels(labels)
    require_features(data, "sweep_density")
    mdl = make_mmlc_model(model, random_state).fit(data)
    per_worker = np.bincount(data.worker, minlength=data.n_workers)
    rows = []
    for b in [None, *list(bs)]:
        b = None if b is None else density_threshold(data, b)
        filled = data if b is None else fill_labels(mdl, data, b)
        est = _base_estimator(base, random_state).fit(filled)
        rows.append({
            "b": b,
            "dense_workers": 0 if b is None else int(np.sum(per_worker > b)),
            "n_labels": filled.n_labels,
            "density": filled.n_labels / (data.n_tasks * data.n_workers),
            "accuracy": gold_accuracy(est.labels_, data),
        })
    return pd.DataFrame(rows)
