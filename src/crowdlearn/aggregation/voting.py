"""Voting aggregators: majority vote and its worker-weighted relatives.

All of them score task ``n`` and class ``j`` by ``s_{n,j} = sum_{answers i of n} v_{w_i}
1[label_i = j]`` for some worker weights ``v``; they differ in where ``v`` comes from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import softmax

from ..core.base import Tags
from ..core.data import CrowdLabels
from .base import BaseAggregator

__all__ = [
    "MajorityVote",
    "WeightedMajorityVote",
    "Wawa",
    "ZeroBasedSkill",
    "vote_fractions",
    "split_ties",
    "agreement_with",
    "weighted_votes",
]


def weighted_votes(data: CrowdLabels, worker_weights: np.ndarray | None = None) -> np.ndarray:
    """(n_tasks, n_classes) sums of worker weights per class (plain counts without weights)."""
    k = data.n_classes
    w = None if worker_weights is None else np.asarray(worker_weights, float)[data.worker]
    flat = np.bincount(
        data.task.astype(np.int64) * k + data.label, weights=w, minlength=data.n_tasks * k
    )
    return flat.reshape(data.n_tasks, k).astype(np.float64)


def vote_fractions(data: CrowdLabels, worker_weights: np.ndarray | None = None) -> np.ndarray:
    """Share of (weighted) votes per class; uniform where a task has no vote weight."""
    votes = weighted_votes(data, worker_weights)
    total = votes.sum(axis=1, keepdims=True)
    empty = total[:, 0] <= 0
    total[empty] = 1.0
    out = votes / total
    out[empty] = 1.0 / data.n_classes
    return out


def split_ties(proba: np.ndarray, gold: np.ndarray | None = None) -> np.ndarray:
    """One-hot argmax where tied classes share the unit mass (order-free, unlike argmax)."""
    best = proba.max(axis=1, keepdims=True)
    top = (proba >= best - 1e-12).astype(np.float64)
    top /= top.sum(axis=1, keepdims=True)
    if gold is not None:
        known = gold >= 0
        top[known] = 0.0
        top[known, gold[known]] = 1.0
    return top


def agreement_with(data: CrowdLabels, consensus: np.ndarray) -> np.ndarray:
    """Per worker, the share of answers equal to the consensus (0.5 with no answers).

    ``consensus`` is either a class code per task or a (tasks x classes) soft assignment, in
    which case an answer counts by the weight its class has in its task's row.
    """
    if consensus.ndim == 2:
        hits = consensus[data.task, data.label]
    else:
        hits = (data.label == consensus[data.task]).astype(np.float64)
    n = np.bincount(data.worker, minlength=data.n_workers)
    agree = np.bincount(data.worker, weights=hits, minlength=data.n_workers)
    return np.divide(agree, n, out=np.full(data.n_workers, 0.5), where=n > 0)


class MajorityVote(BaseAggregator):
    """Majority vote: the class with the most answers.

    ``probas_`` holds the vote shares.  Ties are broken by a seeded uniform draw among the
    tied classes (:func:`~crowdlearn.aggregation.base.argmax_random_ties`).
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

    def _fit(self, data, gold, init):
        if self.weights is not None:
            w = pd.Series(self.weights, dtype=float).reindex(data.workers).fillna(self.default_weight)
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


class Wawa(BaseAggregator):
    """Worker Agreement With Aggregate: majority vote, then a vote weighted by agreement.

    ``skills_[w]`` = fraction of w's answers equal to the majority vote; the final label is
    the vote weighted by those skills (as in Appen's "trust" scores and crowd-kit's Wawa).
    """

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), has_worker_model=True)

    def __init__(self, random_state: int | None = 0) -> None:
        self.random_state = random_state

    def _fit(self, data, gold, init):
        skills = agreement_with(data, split_ties(vote_fractions(data), gold))
        self.skills_ = pd.Series(skills, index=data.workers, name="skill")
        return vote_fractions(data, skills)

    def _predict_proba_codes(self, data):
        return vote_fractions(data, self.skills_.to_numpy())


class ZeroBasedSkill(BaseAggregator):
    """Zero-Based Skill: weighted vote whose weights move toward agreement with the consensus.

    Start from skills 0 (majority vote); each round sets the consensus to the skill-weighted
    vote and moves every skill a step ``lr`` toward its agreement with that consensus::

        skill_w <- skill_w + lr * (agree_w - skill_w)

    ``lr`` starts at ``lr_init`` and is multiplied by ``lr_reduce_factor`` every
    ``lr_steps_to_reduce`` rounds; the loop stops when no skill moves more than ``eps``.
    """

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), has_worker_model=True)

    def __init__(
        self,
        n_iter: int = 100,
        lr_init: float = 1.0,
        lr_steps_to_reduce: int = 20,
        lr_reduce_factor: float = 0.5,
        eps: float = 1e-5,
        random_state: int | None = 0,
    ) -> None:
        self.n_iter = n_iter
        self.lr_init = lr_init
        self.lr_steps_to_reduce = lr_steps_to_reduce
        self.lr_reduce_factor = lr_reduce_factor
        self.eps = eps
        self.random_state = random_state

    def _fit(self, data, gold, init):
        skills = np.zeros(data.n_workers)
        lr = self.lr_init
        self.converged_ = False
        proba = vote_fractions(data)
        for it in range(self.n_iter):
            proba = vote_fractions(data, skills) if it else vote_fractions(data)
            consensus = split_ties(proba, gold)
            new = skills + lr * (agreement_with(data, consensus) - skills)
            delta = np.abs(new - skills).max(initial=0.0)
            skills = new
            self.n_iter_ = it + 1
            if (it + 1) % self.lr_steps_to_reduce == 0:
                lr *= self.lr_reduce_factor
            if delta < self.eps:
                self.converged_ = True
                break
        self.skills_ = pd.Series(skills, index=data.workers, name="skill")
        return vote_fractions(data, skills)

    def _predict_proba_codes(self, data):
        return vote_fractions(data, self.skills_.to_numpy())
