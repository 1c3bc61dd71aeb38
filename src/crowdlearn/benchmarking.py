"""Accuracy and time of registered methods on datasets with gold labels."""

from __future__ import annotations

import time
from pathlib import Path
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from .core.base import get_tags
from .core.data import CrowdLabels
from .core.io import folder_kind
from .registry import get_method, load_path, methods

__all__ = ["gold_accuracy", "run_methods", "categorical_datasets", "truth_scores", "TRUTH_SCORERS",
           "run_kind_methods"]

#: answer kind -> "module:function" ``(fitted estimator, answers) -> {metric: value}`` against
#: the gold the answer table carries (imported on first use)
TRUTH_SCORERS: dict[str, str] = {
    "continuous": "crowdlearn.diagnostics.continuous_metrics:truth_report",
    "multilabel": "crowdlearn.diagnostics.multilabel_metrics:truth_report",
    "ordinal": "crowdlearn.diagnostics.ordinal_metrics:truth_report",
    "pairwise": "crowdlearn.diagnostics.pairwise_metrics:ranking_report",
    "similarity": "crowdlearn.diagnostics.similarity_metrics:truth_report",
}


def truth_scores(estimator, data) -> dict[str, float]:
    """Agreement of a fitted estimator of an answer kind with the gold in ``data`` (empty
    when the kind has no scorer or the data no gold)."""
    path = TRUTH_SCORERS.get(get_tags(estimator).kind)
    if path is None:
        return {}
    try:
        return dict(load_path(path)(estimator, data))
    except ValueError:  # no gold in the table
        return {}


#: ``error`` of :func:`run_methods` for a method that needs item features the data lacks
NEEDS_FEATURES = "needs item features"


def categorical_datasets(root: str | Path) -> list[str]:
    """Names of the dataset folders below ``root`` (format of ../shared/data) with labels and
    gold whose kind (:func:`crowdlearn.core.io.folder_kind`) is class labels, ordered or not,
    sorted."""
    return [d.name for d in sorted(Path(root).iterdir())
            if (d / "labels.csv").exists() and (d / "truth.csv").exists()
            and folder_kind(d) in ("classification", "ordinal")]


def gold_accuracy(labels_: pd.Series, data: CrowdLabels) -> float:
    """Accuracy of ``labels_`` on the tasks of ``data`` that have gold (NaN without gold)."""
    if data.truth is None or not np.any(data.truth >= 0):
        return float("nan")
    known = data.truth >= 0
    truth = data.classes.take(data.truth[known])
    pred = labels_.reindex(data.tasks[known]).to_numpy()
    return float(np.mean(pred == truth.to_numpy()))


def run_methods(
    datasets: Mapping[str, CrowdLabels],
    method_names: Iterable[str] | None = None,
    seed: int = 0,
    level: float = 0.95,
) -> pd.DataFrame:
    """Fit each method on each dataset; a long table, one row per (dataset, method).

    Columns: ``accuracy`` on the gold tasks, ``low``/``high`` (its Wilson interval at
    ``level``), ``n_gold``, ``vs_best_p`` (exact McNemar p-value of the method against the
    most accurate method of the dataset on the same gold tasks; NaN for that method itself:
    a small p says the gap is more than a handful of lucky tasks), ``log_loss`` and ``ece``
    of the posteriors (``probas_``) on the gold tasks, ``seconds`` and ``error``
    (:mod:`crowdlearn.diagnostics.significance`, :mod:`crowdlearn.diagnostics.metrics`).

    A method that raises ``ValueError`` or ``NotImplementedError``, or lacks an optional
    dependency (``ImportError``: MMLC without torch), is reported in ``error`` instead of
    aborting the whole table.
    """
    from .diagnostics.metrics import expected_calibration_error, log_loss
    from .diagnostics.significance import accuracy_interval, correct_per_task, paired_comparison

    names = list(method_names) if method_names is not None else list(methods("classification"))
    rows = []
    for dname, data in datasets.items():
        truth = data.truth_series() if data.truth is not None else None
        if truth is not None and truth.empty:
            truth = None
        correct = {}
        for name in names:
            cls = get_method(name)
            est = cls()
            if "random_state" in est.get_params():
                est.set_params(random_state=seed)
            t0 = time.perf_counter()
            try:
                if get_tags(cls).requires_features and data.features is None:
                    raise ValueError(NEEDS_FEATURES)  # MMLC: not a failure of the method
                est.fit(data)
                err = None
            except (ValueError, NotImplementedError, ImportError) as exc:  # binary-only; torch missing
                err = str(exc).splitlines()[0]
            elapsed = time.perf_counter() - t0
            row = {"dataset": dname, "method": name, "accuracy": np.nan, "low": np.nan, "high": np.nan,
                   "n_gold": 0 if truth is None else len(truth), "vs_best_p": np.nan,
                   "log_loss": np.nan, "ece": np.nan, "seconds": elapsed, "error": err}
            if err is None and truth is not None:
                correct[name] = correct_per_task(est.labels_, truth)
                row["accuracy"] = float(correct[name].mean())
                row["low"], row["high"] = accuracy_interval(correct[name], level)
                probas = getattr(est, "probas_", None)
                if probas is not None:
                    probas = probas.reindex(truth.index)
                    if not probas.isna().any().any():
                        row["log_loss"] = log_loss(probas, truth)
                        row["ece"] = expected_calibration_error(probas, truth)
            rows.append(row)
        if correct:
            best = max(correct, key=lambda m: correct[m].mean())  # first of equals: listed order
            for row in rows:
                if row["dataset"] == dname and row["method"] in correct and row["method"] != best:
                    row["vs_best_p"] = paired_comparison(correct[row["method"]], correct[best])["p_value"]
    return pd.DataFrame(rows)


def run_kind_methods(
    datasets: Mapping[str, object],
    kind: str,
    method_names: Iterable[str] | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """Fit each method of an answer kind on each dataset of that kind; a long table
    (dataset, method, one column per metric of :func:`truth_scores`, seconds, error).

    A method that raises ``ValueError`` or ``NotImplementedError``, or lacks an optional
    dependency (``ImportError``), is reported in ``error`` instead of aborting the table.
    """
    names = list(method_names) if method_names is not None else list(methods(kind))
    rows = []
    for dname, data in datasets.items():
        for name in names:
            est = get_method(name, kind)()
            if "random_state" in est.get_params():
                est.set_params(random_state=seed)
            t0 = time.perf_counter()
            try:
                if get_tags(est).requires_features and getattr(data, "features", None) is None:
                    raise ValueError(NEEDS_FEATURES)
                est.fit(data)
                scores, err = truth_scores(est, data), None
            except (ValueError, NotImplementedError, ImportError) as exc:
                scores, err = {}, str(exc).splitlines()[0]
            rows.append({"dataset": dname, "method": name, **scores,
                         "seconds": time.perf_counter() - t0, "error": err})
    return pd.DataFrame(rows)
