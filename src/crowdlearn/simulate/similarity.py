"""Simulated similarity annotations (crowdclustering) with planted clusters and annotators.

:func:`similarity_crowd` draws ``n_items`` items into ``n_clusters`` planted clusters,
``n_workers`` annotators of whom a fraction answer by coin flips, and random item pairs; each
answer says whether the two items are in the same cluster.  A reliable annotator ``w`` tells
the truth with probability ``r_w`` (its planted reliability) and the opposite otherwise (a
one-coin model on the pair's same/different status); a random annotator says "same" with
probability 1/2 whatever the pair, i.e. ``r_w = 1/2``.  Vectorised over answers; the same
``seed`` gives the same output.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core.base import resolve_generator
from ..similarity.data import SimilarityAnswers

__all__ = ["SimilarityPlanted", "similarity_crowd"]


@dataclass(frozen=True, eq=False)
class SimilarityPlanted:
    """What a similarity simulation was drawn from.

    Attributes
    ----------
    clusters : ndarray of int, shape (n_items,)
        Planted cluster of every item (also the table's ``truth``).
    reliability : ndarray, shape (n_workers,)
        Probability that each annotator reports the pair's true status (1/2 for random ones).
    random : ndarray of bool, shape (n_workers,)
        Which annotators answer by coin flips.
    """

    clusters: np.ndarray
    reliability: np.ndarray
    random: np.ndarray

    @property
    def reliability_series(self) -> pd.Series:
        return pd.Series(self.reliability, index=pd.RangeIndex(len(self.reliability), name="worker"),
                         name="reliability")


def similarity_crowd(
    n_items: int = 1000,
    n_clusters: int = 5,
    n_workers: int = 50,
    answers_per_item: float = 20.0,
    random_fraction: float = 0.2,
    reliability: tuple[float, float] = (0.7, 0.95),
    same_fraction: float | None = None,
    cluster_weights: np.ndarray | None = None,
    n_features: int = 0,
    separation: float = 3.0,
    seed=0,
) -> tuple[SimilarityAnswers, SimilarityPlanted]:
    """Draw a crowd of same/different answers on random item pairs.

    Parameters
    ----------
    n_items, n_clusters, n_workers : int
    answers_per_item : float
        Mean number of answers an item takes part in; the table has
        ``round(n_items * answers_per_item / 2)`` answers (each answer involves two items).
    random_fraction : float
        Fraction of annotators who answer by fair coin flips.
    reliability : (low, high)
        The other annotators' reliabilities are uniform on this interval.
    same_fraction : float, optional
        Share of answers whose second item is redrawn from the first item's cluster (a
        design that shows annotators more positive pairs; the within-cluster share is then
        about ``same_fraction + (1 - same_fraction) / K``); default: pairs uniform over all
        pairs (about 1/K within a cluster).
    cluster_weights : array, optional
        Cluster proportions (default: equal).
    n_features : int
        When > 0, items get Gaussian features: cluster centres drawn with norm
        ``separation`` in ``n_features`` dimensions plus unit-variance noise (for the
        end-to-end learner).
    seed : int, Generator or None

    Returns
    -------
    answers : SimilarityAnswers
        With ``truth`` = planted clusters (and ``features`` when asked).
    planted : SimilarityPlanted
    """
    rng = resolve_generator(seed)
    if n_items < 2 or n_clusters < 1 or n_workers < 1:
        raise ValueError("need n_items >= 2, n_clusters >= 1 and n_workers >= 1")
    if not 0.0 <= random_fraction <= 1.0:
        raise ValueError(f"random_fraction must be in [0, 1], got {random_fraction!r}")
    weights = np.full(n_clusters, 1.0 / n_clusters) if cluster_weights is None else (
        np.asarray(cluster_weights, float) / np.sum(cluster_weights))
    clusters = rng.choice(n_clusters, size=n_items, p=weights)
    n_random = int(round(random_fraction * n_workers))
    is_random = np.zeros(n_workers, dtype=bool)
    is_random[rng.permutation(n_workers)[:n_random]] = True
    rel = rng.uniform(reliability[0], reliability[1], size=n_workers)
    rel[is_random] = 0.5

    n_answers = int(round(n_items * answers_per_item / 2))
    a = rng.integers(0, n_items, size=n_answers)
    b = rng.integers(0, n_items - 1, size=n_answers)
    b = b + (b >= a)  # uniform over the other items: never a self-pair
    if same_fraction is not None:
        # redraw the second item of a share of the answers from the first item's cluster
        by_cluster = np.argsort(clusters, kind="stable")
        start = np.searchsorted(clusters[by_cluster], np.arange(n_clusters))
        size = np.bincount(clusters, minlength=n_clusters)
        want = rng.random(n_answers) < same_fraction
        ok = want & (size[clusters[a]] > 1)
        ca = clusters[a[ok]]
        pick = by_cluster[start[ca] + rng.integers(0, size[ca] - 1)]
        pick = np.where(pick == a[ok], by_cluster[start[ca] + size[ca] - 1], pick)
        b[ok] = pick
    worker = rng.integers(0, n_workers, size=n_answers)
    truly_same = clusters[a] == clusters[b]
    honest = rng.random(n_answers) < rel[worker]
    same = np.where(honest, truly_same, ~truly_same)
    features = None
    if n_features > 0:
        centres = rng.normal(size=(n_clusters, n_features))
        centres *= separation / np.linalg.norm(centres, axis=1, keepdims=True)
        features = centres[clusters] + rng.normal(size=(n_items, n_features))
    answers = SimilarityAnswers.from_codes(worker, a, b, same.astype(np.int8), n_items=n_items,
                                           n_workers=n_workers, truth=clusters,
                                           features=features)
    return answers, SimilarityPlanted(clusters=clusters, reliability=rel, random=is_random)
