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
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone

from ..aggregation.base import BaseAggregator
from ..core.base import Tags
from ..benchmarking import gold_accuracy
from ..core.data import CrowdLabels, as_crowd_labels
from ..registry import get_method
from .oracle import require_features, make_mmlc_model

__all__ = ["MMLCFill", "fill_labels", "sweep_density", "density_threshold"]

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


def _base_estimator(base: Any, random_state) -> BaseAggregator:
    est = get_method(base)() if isinstance(base, str) else clone(base)
    if not hasattr(est, "fit") or not hasattr(est, "get_params"):
        raise ValueError(f"base must be a registered method name or an aggregator, got {base!r}")
    if random_state is not None and "random_state" in est.get_params():
        est.set_params(random_state=random_state)
    return est


class MMLCFill(BaseAggregator):
    """MMLC-df: aggregate crowd labels densified with MMLC's per-worker predictions.

    Caution: filled answers can outnumber real ones by orders of magnitude on sparse crowds
    (120 to 1 on cifar10n), and the aggregator then returns the network's own labels.
    That helps when the features predict the answers well and costs a lot when they predict
    them worse than the crowd does (benchmarks/RESULTS.md, section 8).  Compare with the base aggregator on the raw answers
    before trusting it on a new dataset.

    Parameters
    ----------
    base : str or aggregator
        The aggregator run on the filled data (any registered name, default ``"ds"``).
    b : int or "median"
        Density threshold: workers with more than ``b`` answers are filled (0 = all);
        ``"median"`` (default) = the median number of answers per worker.
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
    fill_ratio_ : float
        Predicted answers added per real answer; above ``FILL_RATIO_WARNING`` (20) ``fit``
        warns.
    """

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), requires_features=True, stochastic=True)

    def __init__(self, base="ds", b="median", model=None, random_state=0):
        self.base = base
        self.b = b
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
        self.filled_ = fill_labels(self.model_, data, self.threshold_)
        self.fill_ratio_ = (self.filled_.n_labels - data.n_labels) / max(data.n_labels, 1)
        if self.fill_ratio_ > FILL_RATIO_WARNING:
            warnings.warn(
                f"MMLC-df added {self.fill_ratio_:.0f} predicted answers per real answer; the "
                f"aggregator will mostly return the network's own labels (compare with "
                f"{self.base!r} on the raw answers, or raise b)", stacklevel=2)
        self.base_ = _base_estimator(self.base, self.random_state)
        self.base_.fit(self.filled_, gold=gold)
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
