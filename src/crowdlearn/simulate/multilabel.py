"""Simulated multi-label crowds: planted tag sets, planted worker sensitivity and specificity.

Each task has a true tag set: tag ``t`` applies with probability ``tag_prior[t]``,
independently.  Worker ``w`` includes a tag that applies with probability
``sensitivity[w]`` and a tag that does not with probability ``1 - specificity[w]``,
independently per tag (the two-coin model of Raykar et al., 2010, per tag); spammers
include every tag with probability 1/2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..multilabel.data import MultiLabelAnswers
from .assignment import assign_workers

__all__ = ["MultiLabelPlanted", "multilabel_crowd"]


@dataclass(frozen=True, eq=False)
class MultiLabelPlanted:
    """Planted parameters (workers in code order, tags in tag order).

    Attributes
    ----------
    sensitivity, specificity : ndarray (n_workers,)
        ``P(tag given | tag applies)``, ``P(tag not given | tag does not apply)``.
    spammer : ndarray of bool (n_workers,)
    tag_prior : ndarray (n_tags,)
    truth : ndarray of int8 (n_tasks, n_tags)
    """

    sensitivity: np.ndarray
    specificity: np.ndarray
    spammer: np.ndarray
    tag_prior: np.ndarray
    truth: np.ndarray


def multilabel_crowd(
    n_tasks: int = 400,
    n_workers: int = 20,
    n_tags: int = 5,
    labels_per_task: int = 5,
    *,
    tag_prior: float | Sequence[float] = 0.3,
    sensitivity: tuple[float, float] = (0.6, 0.95),
    specificity: tuple[float, float] = (0.8, 0.98),
    spammers: float = 0.0,
    tags: Sequence[Any] | None = None,
    delimiter: str = "|",
    seed: Any = 0,
) -> tuple[MultiLabelAnswers, MultiLabelPlanted]:
    """Draw a multi-label crowd with planted truth and planted worker parameters.

    Parameters
    ----------
    n_tasks, n_workers, n_tags, labels_per_task : int
        Each task gets ``labels_per_task`` distinct workers (:func:`assign_workers`).
    tag_prior : float or sequence of n_tags floats
        Probability that each tag applies to a task.
    sensitivity, specificity : (low, high)
        Uniform ranges of the workers' sensitivity and specificity.
    spammers : float
        Fraction of workers giving each tag with probability 1/2.
    tags : sequence, optional
        Tag names (default ``"tag0"...``).
    delimiter : str
    seed : int, Generator or None

    Returns
    -------
    answers : MultiLabelAnswers
        Integer task and worker ids, truth known for every task.
    planted : MultiLabelPlanted
    """
    rng = np.random.default_rng(seed)
    prior = np.broadcast_to(np.asarray(tag_prior, dtype=float), (n_tags,)).copy()
    if np.any((prior < 0) | (prior > 1)):
        raise ValueError("tag_prior must lie in [0, 1]")
    names = [f"tag{i}" for i in range(n_tags)] if tags is None else list(tags)
    if len(names) != n_tags:
        raise ValueError(f"tags must name {n_tags} tags")
    sens = rng.uniform(*sensitivity, n_workers)
    spec = rng.uniform(*specificity, n_workers)
    spam = np.zeros(n_workers, dtype=bool)
    n_spam = int(round(spammers * n_workers))
    if n_spam:
        spam[rng.choice(n_workers, n_spam, replace=False)] = True
    sens[spam] = 0.5
    spec[spam] = 0.5
    truth = (rng.random((n_tasks, n_tags)) < prior).astype(np.int8)
    task, worker = assign_workers(n_tasks, n_workers, labels_per_task, "random", seed=rng)
    on = truth[task] == 1
    p_give = np.where(on, sens[worker][:, None], 1.0 - spec[worker][:, None])
    given = rng.random(p_give.shape) < p_give
    cols = np.nonzero(given)[1]  # row-major: each answer's tags in tag order
    tag_ptr = np.concatenate([[0], np.cumsum(given.sum(axis=1))])
    t_cols = np.nonzero(truth)[1]
    truth_ptr = np.concatenate([[0], np.cumsum(truth.sum(axis=1))])
    answers = MultiLabelAnswers(task, worker, tag_ptr, cols, tasks=pd.RangeIndex(n_tasks),
                                workers=pd.RangeIndex(n_workers), tags=pd.Index(names),
                                truth_ptr=truth_ptr, truth_code=t_cols,
                                truth_known=np.ones(n_tasks, dtype=bool), delimiter=delimiter)
    return answers, MultiLabelPlanted(sens, spec, spam, prior, truth)
