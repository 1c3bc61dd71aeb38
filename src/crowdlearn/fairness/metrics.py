"""Fairness of aggregated crowd labels across groups of tasks, and of each worker across groups.

For binary labels with a positive class ``+`` and a group attribute ``z`` per task (e.g. a
defendant's race), per group ``g``::

    accuracy_g = P(yhat = y | z = g)       positive_rate_g = P(yhat = + | z = g)
    TPR_g = P(yhat = + | y = +, z = g)     FPR_g = P(yhat = + | y = -, z = g)     FNR_g = 1 - TPR_g

and across groups the *demographic parity difference* ``max_g positive_rate_g - min_g
positive_rate_g`` and the equalised-odds gaps (largest FPR and FNR differences).  Li, Sun &
Wang (2020, "Towards fair truth discovery from biased crowdsourced answers", KDD) call an
aggregation *theta-fair* (theta-disparity) when the probabilities that the inferred truth is
positive differ by at most ``theta`` between the protected and the unprotected group: the
demographic parity difference, compared with ``theta``.

Rates with no task behind them (e.g. a group without gold negatives) are reported as ``NaN``
with the counts beside them, never as 0.

Task ids, labels and the positive class are compared as :func:`crowdlearn.metrics.accuracy`
compares them: exactly when both sides hold the same type of value, by value when they do not
(files read by this library give text, ``pd.read_csv`` numbers: task ``"17"`` is task ``17``,
class ``"1"`` is ``positive=1``).  Predictions, truth, references and groups are Series (or
mappings) keyed by task id; an array or list names no task and is refused with a
``ValueError`` (:func:`crowdlearn.core.gold.keyed_gold`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..core.gold import keyed_gold
from ..core.ids import equal_by_value, label_number, positions_by_value

__all__ = ["group_report", "disparities", "worker_bias_table", "task_groups"]


def task_groups(groups: Any, tasks: pd.Index, what: str = "groups") -> pd.Series:
    """``groups`` (Series task -> group, or a mapping) aligned on ``tasks``; every task needs one."""
    g = keyed_gold(groups, what, value="group")
    if g.index.has_duplicates:
        dup = g.index[g.index.duplicated()][0]
        two = pd.unique(g[g.index == dup].to_numpy(dtype=object))[:2]  # which groups, to find it
        if len(two) == 1:
            raise ValueError(f"{what}: task {dup!r} is given more than once (group {two[0]!r})")
        raise ValueError(f"{what}: task {dup!r} has more than one group: {two[0]!r} and {two[1]!r}")
    at = positions_by_value(g.index, tasks, what)  # by value when the ids' types differ
    out = pd.Series(_take_or_nan(g.to_numpy(dtype=object), at), index=tasks, name=g.name).infer_objects()
    if out.isna().any():
        missing = tasks[out.isna().to_numpy()]
        raise ValueError(f"{what}: no group for task {missing[0]!r} ({len(missing)} task(s) without one)")
    if out.nunique() < 2:
        raise ValueError(f"{what}: fairness needs at least two groups, got {out.unique().tolist()}")
    return out


def _binary(values: Any, positive: Any) -> np.ndarray:
    """1.0 where ``values`` is the ``positive`` class (by value when the types differ), else 0.0."""
    codes, uniques = pd.factorize(np.asarray(values, dtype=object))  # each distinct value once
    hit = equal_by_value(np.asarray(uniques, dtype=object), np.full(len(uniques), positive, dtype=object))
    return np.append(hit, False)[codes].astype(float)  # code -1 (missing): not positive


def _aligned(values: Any, tasks: pd.Index, what: str) -> np.ndarray:
    """``values`` (Series task -> value) at ``tasks`` (ids by value), NaN where absent."""
    values = keyed_gold(values, what)
    if values.index.has_duplicates:
        raise ValueError(f"{what}: task {values.index[values.index.duplicated()][0]!r} appears more than once")
    at = positions_by_value(values.index, tasks, what)
    return _take_or_nan(values.to_numpy(dtype=object), at)


def _take_or_nan(values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``values[at]`` as objects, NaN where ``at`` is -1.

    Only the found positions are indexed: ``values`` may be empty (an empty truth or group
    Series), where any take, even one masked afterwards, would raise an IndexError.
    """
    out = np.full(len(at), np.nan, dtype=object)
    found = at >= 0
    out[found] = values[at[found]]
    return out


def group_report(predicted: pd.Series, truth: pd.Series | None, groups: Any, positive: Any = 1) -> pd.DataFrame:
    """One row per group: counts, accuracy, positive rate, TPR, FPR and FNR of ``predicted``.

    Parameters
    ----------
    predicted : Series task -> label (e.g. an aggregator's ``labels_``)
    truth : Series task -> true label, optional (without it only counts and positive rates)
    groups : Series task -> group (every predicted task needs one)
    positive : the positive class (default 1; ``1`` and ``"1"`` are one class, see the
        module docstring)

    With more than two classes, ``accuracy`` counts the exact class and the other rates are
    those of the positive class against the rest.
    """
    predicted = keyed_gold(predicted, "predicted")
    g = task_groups(groups, predicted.index)
    pos = _binary(predicted, positive)
    y = None
    if truth is not None:
        t = _aligned(truth, predicted.index, "truth")
        y = np.where(pd.isna(t), np.nan, _binary(t, positive))
        # the exact class (not the positive/negative side: with three or more classes two
        # different negatives are not a right answer)
        right = equal_by_value(np.asarray(predicted, dtype=object), t)
    rows = {}
    for name in sorted(g.unique(), key=_group_order):
        m = (g == name).to_numpy()
        row = {"tasks": int(m.sum()), "positive_rate": float(pos[m].mean())}
        if y is not None:
            known = m & ~np.isnan(y)
            p, yy = pos[known], y[known]
            n_pos, n_neg = int((yy == 1).sum()), int((yy == 0).sum())
            row.update({
                "gold": int(known.sum()), "gold_positive": n_pos, "gold_negative": n_neg,
                "accuracy": float(right[known].mean()) if known.any() else np.nan,
                "tpr": float(p[yy == 1].mean()) if n_pos else np.nan,
                "fpr": float(p[yy == 0].mean()) if n_neg else np.nan,
            })
            row["fnr"] = 1.0 - row["tpr"] if n_pos else np.nan
        rows[name] = row
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "group"
    return out


def _group_order(group: Any) -> tuple:
    """Sort key of the report's rows: groups spelling numbers by value, first (ages 9, 10, 18,
    also when read as text, not "10" < "18" < "9"), then the others by their text."""
    number = label_number(group)
    return (0, number, "") if number is not None else (1, 0, str(group))


def disparities(report: pd.DataFrame, theta: float | None = None) -> dict:
    """Gaps across the groups of :func:`group_report`: demographic parity difference (max -
    min positive rate), FPR and FNR gaps, accuracy gap; ``theta_fair`` when ``theta`` is given."""
    def gap(col):
        if col not in report:
            return np.nan
        v = report[col].dropna()
        return float(v.max() - v.min()) if len(v) >= 2 else np.nan

    out = {"demographic_parity_difference": gap("positive_rate"), "fpr_gap": gap("fpr"),
           "fnr_gap": gap("fnr"), "accuracy_gap": gap("accuracy")}
    if theta is not None:
        out["theta_fair"] = bool(out["demographic_parity_difference"] <= theta)
    return out


def worker_bias_table(labels: Any, reference: pd.Series, groups: Any, positive: Any = 1) -> pd.DataFrame:
    """How each worker's error rates differ between task groups.

    ``reference`` is what the worker is compared with: gold where known, or the aggregated
    labels.  One row per (worker, group) with the answers behind each figure: ``answers``,
    ``negatives``/``positives`` (reference), ``fpr``, ``fnr`` and ``error`` (answers not the
    reference's class; FPR and FNR are the positive class against the rest); plus per worker the
    largest FPR and FNR difference between its groups (``fpr_gap``, ``fnr_gap``), NaN when
    the worker has no answer in some group.  Ids and classes are compared by value when their
    types differ (module docstring).
    """
    from ..core.data import as_crowd_labels

    data = as_crowd_labels(labels)
    g = task_groups(groups, data.tasks)
    ref = _aligned(reference, data.tasks, "reference")
    if not pd.notna(ref).any():  # no answer could be compared: the table would have no row
        raise ValueError(f"reference has no label for any of the {data.n_tasks} answered task(s) "
                         f"(e.g. {data.tasks[0]!r}); it must be keyed by task id")
    frame = pd.DataFrame({
        "worker": data.workers.take(data.worker),
        "group": g.to_numpy()[data.task],
        "said_positive": _binary(data.classes, positive)[data.label] == 1.0,
        "said": data.classes.take(data.label),
        "ref": ref[data.task],
    }).dropna(subset=["ref"])
    frame["ref_positive"] = _binary(frame["ref"], positive) == 1.0
    frame["fp"] = frame["said_positive"] & ~frame["ref_positive"]
    frame["fn"] = ~frame["said_positive"] & frame["ref_positive"]
    # the exact class: with three or more classes a wrong negative is an error too
    frame["wrong"] = ~equal_by_value(frame["said"].to_numpy(dtype=object), frame["ref"].to_numpy(dtype=object))
    agg = frame.groupby(["worker", "group"], sort=True).agg(
        answers=("ref", "size"), positives=("ref_positive", "sum"), fp=("fp", "sum"), fn=("fn", "sum"),
        wrong=("wrong", "sum"))
    agg["negatives"] = agg["answers"] - agg["positives"]
    agg["fpr"] = np.where(agg["negatives"] > 0, agg["fp"] / agg["negatives"].where(agg["negatives"] > 0, 1), np.nan)
    agg["fnr"] = np.where(agg["positives"] > 0, agg["fn"] / agg["positives"].where(agg["positives"] > 0, 1), np.nan)
    agg["error"] = agg["wrong"] / agg["answers"]
    spread = agg.groupby(level="worker")[["fpr", "fnr"]].agg(lambda v: v.max() - v.min() if v.notna().sum() >= 2 else np.nan)
    agg = agg.join(spread.rename(columns={"fpr": "fpr_gap", "fnr": "fnr_gap"}), on="worker")
    return agg[["answers", "negatives", "positives", "fpr", "fnr", "error", "fpr_gap", "fnr_gap"]]
