"""Rank agreement of fitted item scores with gold scores or gold groups.

:func:`spearman`, :func:`kendall_tau` and :func:`ndcg_at_k` compare scores (higher = better)
with gold (higher = better; pass ``-group`` for gold groups where lower is better, as
:class:`~crowdlearn.pairwise.data.Comparisons` stores them).  With ``groups`` (grouped
comparisons: items are only ranked within their query or prompt) each metric is computed
within every group and averaged over the groups where it is defined (at least two items with
known, not all equal, gold).  :func:`ranking_report` computes all three for a fitted
pairwise estimator and its answer table.

Scores, gold and groups are Series or mappings keyed by item id; an array or list names no
item and is refused (:func:`~crowdlearn.core.gold.keyed_gold`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import kendalltau, rankdata, spearmanr

from ..core.gold import keyed_gold

__all__ = ["spearman", "kendall_tau", "ndcg_at_k", "ranking_report"]


def _aligned(scores, truth, groups):
    scores = keyed_gold(scores, "scores", key="item", value="score")
    truth = keyed_gold(truth, "truth", key="item", value="score")
    common = scores.index.intersection(truth.index[np.isfinite(truth.to_numpy(dtype=float))])
    frame = pd.DataFrame({"score": scores.loc[common].to_numpy(dtype=float),
                          "truth": truth.loc[common].to_numpy(dtype=float)}, index=common)
    frame["group"] = 0 if groups is None else keyed_gold(groups, "groups", key="item", value="group").loc[common].to_numpy()
    return frame


def _per_group(scores, truth, groups, fn) -> float:
    values = []
    frame = _aligned(scores, truth, groups)
    # by the column's values: grouped units are indexed by (group, item), whose level of the
    # same name pandas will not choose between
    for _, part in frame.groupby(frame["group"].to_numpy(), sort=False):
        if len(part) >= 2 and part["truth"].nunique() > 1:
            values.append(fn(part["score"].to_numpy(), part["truth"].to_numpy()))
    values = [v for v in values if np.isfinite(v)]
    return float(np.mean(values)) if values else float("nan")


def spearman(scores, truth, groups=None) -> float:
    """Spearman rank correlation of scores and gold (within groups, averaged)."""
    def fn(x, y):
        if np.ptp(x) == 0:
            return 0.0
        return spearmanr(x, y).statistic
    return _per_group(scores, truth, groups, fn)


def kendall_tau(scores, truth, groups=None) -> float:
    """Kendall's tau-b of scores and gold (tau-b: tied gold groups are not counted as
    disagreements), within groups, averaged."""
    def fn(x, y):
        if np.ptp(x) == 0:
            return 0.0
        return kendalltau(x, y).statistic
    return _per_group(scores, truth, groups, fn)


def ndcg_at_k(scores, truth, k: int = 10, groups=None) -> float:
    """NDCG@k of the ranking by score, with linear gain = the gold's dense rank from the
    bottom (0 for the worst gold level, so the gain needs no scale of the gold), discount
    ``1 / log2(position + 1)``; equal scores are ordered by worst gold first (no credit for
    ties).  Within groups, averaged."""
    def fn(x, y):
        gain = rankdata(y, method="dense") - 1.0
        order = np.lexsort((gain, -x))[:k]  # by score, ties: worst gold first
        disc = 1.0 / np.log2(np.arange(2, len(order) + 2))
        ideal = np.sort(gain)[::-1][:k]
        best = float(np.sum(ideal * disc[:len(ideal)]))
        return float(np.sum(gain[order] * disc)) / best if best > 0 else float("nan")
    return _per_group(scores, truth, groups, fn)


def ranking_report(estimator: Any, data: Any, k: int = 10) -> dict[str, float]:
    """``{"spearman", "kendall_tau", "ndcg@k"}`` of a fitted pairwise estimator against the
    gold of its :class:`~crowdlearn.pairwise.data.Comparisons` (within groups if grouped)."""
    truth = data.truth_series()
    if truth is None:
        raise ValueError("the comparisons carry no truth")
    groups = pd.Series(data.item_group, index=data.items) if data.grouped else None
    scores = estimator.scores_
    return {"spearman": spearman(scores, truth, groups),
            "kendall_tau": kendall_tau(scores, truth, groups),
            f"ndcg@{k}": ndcg_at_k(scores, truth, k, groups)}
