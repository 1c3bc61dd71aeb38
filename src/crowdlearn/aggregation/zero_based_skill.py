"""Zero-Based Skill: a weighted vote whose worker weights are learned from zero."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ..core.base import Tags
from ..core.stats import agreement_with, split_ties, vote_fractions
from .base import BaseAggregator

__all__ = ["ZeroBasedSkill"]


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
