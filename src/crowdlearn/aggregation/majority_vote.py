"""Majority vote and weighted majority vote.

Both score task ``n`` and class ``j`` by ``s_{n,j} = sum_{answers i of n} v_{w_i}
1[label_i = j]`` for worker weights ``v``: all ones (majority vote), given weights, or the
one-coin log-odds weights learned against the consensus.  The vote statistics are
:mod:`crowdlearn.core.stats`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import softmax

from ..core.base import Tags
from ..core.ids import positions_by_value, show_value
from ..core.stats import agreement_with, split_ties, vote_fractions, weighted_votes
from .base import BaseAggregator

__all__ = ["MajorityVote", "WeightedMajorityVote"]


class MajorityVote(BaseAggregator):
    """Majority vote: the class with the most answers.

    ``probas_`` holds the vote shares.  Ties are broken by a seeded uniform draw among the
    tied classes (:func:`~crowdlearn.core.stats.argmax_random_ties`).
    ``skills_`` is each worker's agreement with the majority.
    """

    def __crowd_tags__(self) -> Tags:
        # the worker model is "every worker is equally reliable": new answers are scored by
        # their vote shares
        return dataclasses.replace(super().__crowd_tags__(), has_worker_model=True)

    def __init__(self, random_state: int | None = 0) -> None:
        self.random_state = random_state

    def _fit(self, data, gold, init):
        proba = vote_fractions(data)
        consensus = split_ties(proba)
        self.skills_ = pd.Series(agreement_with(data, consensus), index=data.workers, name="skill")
        return proba

    def _predict_proba_codes(self, data):
        return vote_fractions(data)


class WeightedMajorityVote(BaseAggregator):
    """Weighted majority vote with given or learned worker weights.

    Parameters
    ----------
    weights : mapping worker -> weight, Series, or None
        Fixed non-negative weights (missing workers get ``default_weight``).  ``None``
        learns them: the weight of a worker with accuracy ``p`` is the one-coin log-odds
        ``log((K - 1) p / (1 - p))``, the Bayes-optimal weight under the one-coin model
        (Nitzan & Paroush, 1982), with ``p`` the smoothed agreement with the current
        consensus, iterated ``n_iter`` times from majority vote.
    default_weight : float
        Weight of workers absent from ``weights``.
    n_iter : int
        Refinement rounds when learning weights.

    ``probas_``: with fixed weights, the weighted vote shares; with learned log-odds weights,
    the one-coin posterior ``softmax(sum of weights per class)``.
    """

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), has_worker_model=True)

    def __init__(
        self,
        weights: Mapping[Any, float] | pd.Series | None = None,
        default_weight: float = 1.0,
        n_iter: int = 10,
        random_state: int | None = 0,
    ) -> None:
        self.weights = weights
        self.default_weight = default_weight
        self.n_iter = n_iter
        self.random_state = random_state

    def _given_weights(self, data) -> pd.Series:
        """``weights`` as a Series over ``data.workers`` (``default_weight`` where absent).

        Keys are matched by value (worker ``17`` of a numeric frame is ``"17"`` of a CSV).  A
        list or array is refused, as gold is: its values name no worker.  Weights of which
        no key names a worker of the answers are refused too (every worker would get the
        default weight without a word).
        """
        if not isinstance(self.weights, (Mapping, pd.Series)):
            raise ValueError(f"weights must be a mapping worker -> weight (or a Series indexed by worker), "
                             f"got {type(self.weights).__name__}")
        given = pd.Series(dict(self.weights) if isinstance(self.weights, Mapping) else self.weights, dtype=float)
        pos = positions_by_value(data.workers, given.index, "the answers' workers")
        if len(given) and not (pos >= 0).any():
            raise ValueError(f"weights name no worker of the answers (e.g. {show_value(given.index[0])}; "
                             f"the answers' workers are e.g. {show_value(data.workers[0])})")
        w = np.full(data.n_workers, float(self.default_weight))
        w[pos[pos >= 0]] = given.to_numpy()[pos >= 0]
        return pd.Series(w, index=data.workers)

    def _fit(self, data, gold, init):
        if self.weights is not None:
            w = self._given_weights(data)
            if np.any(w.to_numpy() < 0) or not np.all(np.isfinite(w.to_numpy())):
                raise ValueError("weights must be finite and non-negative")
            self.weights_ = w.rename("weight")
            self.skills_ = self.weights_.rename("skill")
            return vote_fractions(data, w.to_numpy())
        k = data.n_classes
        proba = vote_fractions(data)
        n = np.bincount(data.worker, minlength=data.n_workers)
        for it in range(self.n_iter):
            consensus = split_ties(proba, gold)
            hits = np.bincount(
                data.worker, weights=consensus[data.task, data.label], minlength=data.n_workers
            )
            # Laplace smoothing keeps a one-answer worker from getting an infinite weight
            p = (hits + 1.0) / (n + 2.0)
            p = np.clip(p, 1e-3, 1 - 1e-3)
            w = np.log(max(k - 1, 1) * p / (1 - p)) if k > 1 else np.zeros_like(p)
            new = softmax(weighted_votes(data, w), axis=1)
            self.n_iter_ = it + 1
            if np.allclose(new, proba, atol=1e-10):
                proba = new
                break
            proba = new
        self.weights_ = pd.Series(w if self.n_iter else np.ones(data.n_workers), index=data.workers, name="weight")
        self.skills_ = pd.Series(p if self.n_iter else np.full(data.n_workers, 0.5), index=data.workers, name="skill")
        return proba

    def _predict_proba_codes(self, data):
        w = self.weights_.to_numpy()
        if self.weights is not None:
            return vote_fractions(data, w)
        return softmax(weighted_votes(data, w), axis=1)
