"""Agreement of a recovered clustering with gold clusters (crowdclustering).

Cluster labels only name a partition, so every score here is invariant to relabelling the
clusters of either side.  Items whose gold is unknown (``-1`` in a
:class:`~crowdlearn.similarity.data.SimilarityAnswers` ``truth``) are left out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["adjusted_rand", "nmi", "pairwise_f1", "clustering_scores", "truth_report"]


def _aligned(truth, pred):
    """Two integer arrays over the items with known truth (Series are aligned on the index)."""
    if isinstance(truth, pd.Series) and isinstance(pred, pd.Series):
        truth, pred = truth.align(pred, join="inner")
    t = np.asarray(truth)
    p = np.asarray(pred)
    if t.shape != p.shape:
        raise ValueError(f"truth and prediction must have the same length, got {t.shape} and {p.shape}")
    keep = pd.notna(t) & (t.astype(object) != -1) if t.dtype == object else (t != -1)
    t, p = t[keep], p[keep]
    return pd.factorize(t)[0], pd.factorize(p)[0]


def adjusted_rand(truth, pred) -> float:
    """Adjusted Rand index (Hubert and Arabie 1985): 1 = same partition, ~0 = chance."""
    from sklearn.metrics import adjusted_rand_score

    t, p = _aligned(truth, pred)
    return float(adjusted_rand_score(t, p))


def nmi(truth, pred) -> float:
    """Normalised mutual information (arithmetic normalisation, as scikit-learn's default)."""
    from sklearn.metrics import normalized_mutual_info_score

    t, p = _aligned(truth, pred)
    return float(normalized_mutual_info_score(t, p))


def pairwise_f1(truth, pred) -> float:
    """F1 of the "same cluster" relation over all item pairs.

    Precision = share of predicted same-cluster pairs that are same in the truth, recall =
    share of true same-cluster pairs predicted together; counted from the contingency table
    in O(n + K_true K_pred), never over the n^2 pairs.
    """
    t, p = _aligned(truth, pred)
    if len(t) < 2:
        return 1.0
    table = np.zeros((t.max() + 1, p.max() + 1))
    np.add.at(table, (t, p), 1.0)
    pairs = lambda c: float(np.sum(c * (c - 1) / 2))  # noqa: E731
    both = pairs(table)
    in_pred = pairs(table.sum(axis=0))
    in_true = pairs(table.sum(axis=1))
    if in_pred == 0 and in_true == 0:
        return 1.0
    precision = both / in_pred if in_pred else 0.0
    recall = both / in_true if in_true else 0.0
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def clustering_scores(truth, pred) -> dict[str, float]:
    """``{"ari", "nmi", "pairwise_f1"}`` of a clustering against gold."""
    return {"ari": adjusted_rand(truth, pred), "nmi": nmi(truth, pred),
            "pairwise_f1": pairwise_f1(truth, pred)}


def truth_report(estimator, data) -> dict[str, float]:
    """:func:`clustering_scores` of a fitted similarity estimator against the gold clusters its
    :class:`~crowdlearn.similarity.data.SimilarityAnswers` carries."""
    gold = data.truth_series()
    if gold is None or not len(gold):
        raise ValueError("the answers carry no truth")
    return clustering_scores(gold, estimator.clusters_)
