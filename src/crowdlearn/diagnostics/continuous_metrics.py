"""Metrics of continuous estimates against gold values: MAE, RMSE, Pearson and Spearman.

Each function takes the estimates (a Series task -> value, or a fitted continuous estimator)
and the gold (a Series task -> value, a mapping, or a
:class:`~crowdlearn.continuous.data.ContinuousAnswers` with truth) and scores the tasks that
have both, aligned by task id (an array or list names no task and is refused with a
``ValueError``).  Rank correlation (Spearman) is the one to use when the gold is
on another scale than the answers (snow_wordsim: answers 0-10, gold 0-4).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import pearsonr, spearmanr

from ..continuous.data import ContinuousAnswers
from ..core.gold import keyed_gold

__all__ = ["mae", "rmse", "pearson", "spearman", "continuous_scores", "truth_report", "aligned"]


def _as_series(obj: Any, what: str) -> pd.Series:
    if isinstance(obj, ContinuousAnswers):
        truth = obj.truth_series()
        if truth is None:
            raise ValueError(f"{what}: the answer table has no truth")
        return truth
    if hasattr(obj, "estimates_"):
        return obj.estimates_
    return keyed_gold(obj, what, value="number", dtype=float,
                      hint="; a fitted continuous estimator or ContinuousAnswers works too")


def aligned(estimates: Any, gold: Any) -> tuple[np.ndarray, np.ndarray]:
    """(estimates, gold) as float arrays on the tasks both know (gold NaN = unknown).

    Raises ``ValueError`` when no task has both.
    """
    est = _as_series(estimates, "estimates").astype(float)
    ref = _as_series(gold, "gold").astype(float)
    ref = ref[np.isfinite(ref.to_numpy())]
    common = est.index.intersection(ref.index)
    if len(common) == 0:
        raise ValueError("no task has both an estimate and a gold value")
    return est.loc[common].to_numpy(), ref.loc[common].to_numpy()


def mae(estimates: Any, gold: Any) -> float:
    """Mean absolute error on the tasks with gold."""
    e, g = aligned(estimates, gold)
    return float(np.mean(np.abs(e - g)))


def rmse(estimates: Any, gold: Any) -> float:
    """Root mean squared error on the tasks with gold."""
    e, g = aligned(estimates, gold)
    return float(np.sqrt(np.mean((e - g) ** 2)))


def _correlation(fn, estimates, gold) -> float:
    e, g = aligned(estimates, gold)
    if len(e) < 2 or np.ptp(e) == 0 or np.ptp(g) == 0:
        return float("nan")  # undefined for a constant side, not an error of the method
    return float(fn(e, g)[0])


def pearson(estimates: Any, gold: Any) -> float:
    """Pearson correlation with the gold (NaN when either side is constant)."""
    return _correlation(pearsonr, estimates, gold)


def spearman(estimates: Any, gold: Any) -> float:
    """Spearman rank correlation with the gold (NaN when either side is constant)."""
    return _correlation(spearmanr, estimates, gold)


def continuous_scores(estimates: Any, gold: Any) -> dict[str, float]:
    """All four metrics and the number of tasks scored, as a dict."""
    e, _ = aligned(estimates, gold)
    return {"mae": mae(estimates, gold), "rmse": rmse(estimates, gold),
            "pearson": pearson(estimates, gold), "spearman": spearman(estimates, gold),
            "n": float(len(e))}


def truth_report(estimator: Any, data: ContinuousAnswers) -> dict[str, float]:
    """``{"mae", "rmse", "pearson", "spearman"}`` of a fitted continuous estimator against the
    gold its answer table carries (the scorer of ``crowdlearn aggregate --gold`` and the
    benchmarks); ``ValueError`` when the table has no gold."""
    scores = continuous_scores(estimator, data)
    scores.pop("n")
    return scores
