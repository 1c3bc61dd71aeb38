"""Aggregation that accounts for groups: worker behaviour per group, and fair decision thresholds.

* :func:`split_workers_by_group` — Dawid-Skene with a confusion matrix per worker *and per
  task group*, the tutorial's ``A_m(z)``: worker ``m`` answering a task of group ``z`` is the
  pseudo-worker ``(m, z)``.  Any aggregator run on the result learns group-dependent error
  rates (a worker harsher on one group than another is modelled as such instead of being
  averaged), at the price of splitting each worker's answers between its groups.
* :func:`fair_thresholds` — post-processing of binary posteriors with one decision threshold
  per group (in the spirit of Li, Sun & Wang 2020's Post-TD and of Hardt, Price & Srebro
  2016's group thresholds): group ``g``'s threshold is set so that its positive rate is
  ``(1 - strength) r_g + strength r`` where ``r_g`` is its rate at threshold 1/2 and ``r``
  the rate over all tasks.  ``strength`` trades accuracy for demographic parity: 0 leaves
  the labels as they are, 1 equalises the positive rates (up to ties).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..core.base import resolve_random_state
from ..core.data import CrowdLabels, as_crowd_labels
from ..core.ids import equal_by_value
from ..core.stats import argmax_random_ties
from .metrics import task_groups

__all__ = ["split_workers_by_group", "fair_thresholds"]


def split_workers_by_group(labels: Any, groups: Any, sep: str = "|") -> CrowdLabels:
    """The answers with worker ``w`` on a task of group ``g`` renamed ``f"{w}{sep}{g}"``.

    Tasks (including tasks without answers), classes, gold and features are unchanged, so the
    posteriors of any aggregator fitted on the result line up with a fit on the original
    answers.
    """
    data = as_crowd_labels(labels)
    g = task_groups(groups, data.tasks)
    # recoded in place, not rebuilt from a frame of the answers: a frame holds no unanswered
    # task, no gold of one and no features, and the split data silently lost them
    names = (data.workers.astype(str).to_numpy(dtype=object)[data.worker] + sep
             + g.astype(str).to_numpy(dtype=object)[data.task])
    codes, workers = pd.factorize(names, sort=True)
    return CrowdLabels.from_codes(data.task, codes, data.label, tasks=data.tasks,
                                  workers=pd.Index(workers, name="worker"),
                                  classes=data.classes, truth=data.truth, features=data.features)


def fair_thresholds(probas: pd.DataFrame, groups: Any, positive: Any = 1, strength: float = 1.0,
                    random_state: int | None = 0) -> pd.Series:
    """Binary labels with a per-group threshold on ``P(positive)`` (see the module docstring).

    Parameters
    ----------
    probas : DataFrame task x class (two classes), e.g. an aggregator's ``probas_``
    groups : Series task -> group
    positive : the positive class (``1`` names the column ``"1"``: compared by value)
    strength : float in [0, 1]
        0: threshold 1/2 for every group; 1: equal positive rates across groups.
    random_state : int, optional
        Seed of the draw that decides tasks at exactly ``P(positive) = 1/2``, the draw of
        the aggregators' ``labels_`` (:func:`crowdlearn.core.stats.argmax_random_ties`, keyed
        on the task ids): with the aggregator's seed, strength 0 gives its ``labels_``.

    Returns
    -------
    Series task -> label.
    """
    if not 0.0 <= strength <= 1.0:
        raise ValueError(f"strength must lie in [0, 1], got {strength!r}")
    is_positive = equal_by_value(np.asarray(probas.columns, dtype=object),
                                np.full(probas.shape[1], positive, dtype=object))  # "1" is 1
    if probas.shape[1] != 2 or is_positive.sum() != 1:
        raise ValueError(f"fair_thresholds needs binary posteriors with a column {positive!r}, "
                         f"got columns {list(probas.columns)}")
    positive, negative = probas.columns[is_positive][0], probas.columns[~is_positive][0]
    p = probas[positive].to_numpy(float)
    if not np.all(np.isfinite(p)):
        # a NaN compares False with every threshold: its task would be labelled negative
        # without any evidence, and counted in its group's rates
        bad = probas.index[~np.isfinite(p)]
        raise ValueError(f"probas has no finite P({positive!r}) for task {bad[0]!r} ({len(bad)} task(s))")
    g = task_groups(groups, probas.index).to_numpy()
    # the labels at threshold 1/2, ties drawn as the aggregators draw them
    base = argmax_random_ties(probas.to_numpy(float), resolve_random_state(random_state), probas.index) \
        == int(np.flatnonzero(is_positive)[0])
    overall = float(base.mean())
    out = base.copy()
    for name in pd.unique(g):
        m = g == name
        own = float(base[m].mean())
        target = (1.0 - strength) * own + strength * overall
        n_pos = int(round(target * m.sum()))
        # the n_pos most probable positives of the group; among equal probabilities the
        # tasks positive at threshold 1/2 first (so strength 0 changes nothing), then by
        # task order
        order = np.lexsort((~base[m], -p[m]))
        lab = np.zeros(m.sum(), dtype=bool)
        lab[order[:n_pos]] = True
        out[m] = lab
    return pd.Series(np.where(out, positive, negative), index=probas.index, name="label")
