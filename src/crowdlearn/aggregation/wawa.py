"""Wawa (Worker Agreement With Aggregate): a vote weighted by agreement with majority vote."""

from __future__ import annotations

import dataclasses

import pandas as pd

from ..core.base import Tags
from ..core.stats import agreement_with, split_ties, vote_fractions
from .base import BaseAggregator

__all__ = ["Wawa"]


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
