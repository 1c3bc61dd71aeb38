"""What every ordinal method shares: the class-order rule and monotone recombination.

Ordinal methods fit on :class:`~crowdlearn.core.data.CrowdLabels` like the categorical
aggregators, and their outputs (``probas_`` columns, ``classes_``) keep the table's class
order, so that they pass the same contract checks.  Internally they work in the *ordinal*
order, given by :func:`ordinal_order` (the one place that rule is written):

1. the order the user gave to the estimator (``classes=[...]``);
2. otherwise, when every class is a number (``2``, ``"10"``, ``"-2"``, ``1.5``), the numeric
   order -- ``CrowdLabels`` orders numbers by value by default, but a table built with its
   own ``classes=`` (``"1", "10", "2", ...``) keeps that order, which is not the grades';
3. otherwise the table's own class order: the ``classes=`` given to
   :meth:`CrowdLabels.from_frame` (or ``crowdlearn aggregate --classes``), else sorted.

The models are symmetric under reversing that order, so "low to high" and "high to low"
give the same posteriors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from ..aggregation.base import BaseAggregator
from ..core.base import Tags
from ..core.data import CrowdLabels
from ..core.ids import label_number

__all__ = ["ordinal_order", "ordered_classes", "numeric_classes", "monotone_survival", "survival_to_probas",
           "OrdinalAggregator"]


def numeric_classes(classes: Iterable[Any]) -> bool:
    """True when every class is a finite number (``2``, ``"10"``, ``"-2"``, ``1.5``)."""
    return all(label_number(c) is not None for c in classes)


def ordinal_order(classes: pd.Index, given: Iterable[Hashable] | None = None) -> np.ndarray:
    """Codes of ``classes`` (positions in the index) from the lowest to the highest class.

    Parameters
    ----------
    classes : Index
        The classes of a crowd table (``CrowdLabels.classes``).
    given : iterable, optional
        The order stated by the user; must hold each class exactly once (a class may be given
        by another spelling of the same number: ``1`` for ``"1"``).

    Returns
    -------
    ndarray of int
        ``order[r]`` is the code of the class of rank ``r`` (see the module docstring for
        the rule).

    Raises
    ------
    ValueError
        When ``given`` misses a class of the table, repeats one or names an unknown one.
    """
    classes = pd.Index(classes)
    k = len(classes)
    if given is not None:
        given = list(given)
        codes = classes.get_indexer(pd.Index(given, dtype=object)) if given else np.array([], int)
        numbers = {label_number(c): i for i, c in enumerate(classes) if label_number(c) is not None}
        codes = np.array([c if c >= 0 else numbers.get(label_number(g), -1) for c, g in zip(codes, given)],
                         dtype=np.int64)
        if np.any(codes < 0):
            raise ValueError(f"ordinal classes: {given[int(np.flatnonzero(codes < 0)[0])]!r} is "
                             f"not a class of the answers {list(classes)[:10]}")
        seen = set(codes.tolist())
        if len(seen) != len(codes) or len(codes) != k:
            missing = [c for i, c in enumerate(classes) if i not in seen]
            what = f"missing {missing}" if missing else "a class is repeated"
            raise ValueError(f"ordinal classes must list every class of the answers once; "
                             f"got {given}: {what}")
        return codes
    if k and numeric_classes(classes):
        numbers = [label_number(c) for c in classes]
        return np.array(sorted(range(k), key=lambda i: numbers[i]), dtype=np.int64)
    return np.arange(k, dtype=np.int64)


def ordered_classes(classes: pd.Index, given: Iterable[Hashable] | None = None) -> pd.Index:
    """The classes from lowest to highest (:func:`ordinal_order` applied to the index)."""
    classes = pd.Index(classes)
    return classes.take(ordinal_order(classes, given))


def monotone_survival(survival: np.ndarray) -> np.ndarray:
    """Row-wise least-squares projection onto non-increasing sequences (isotonic regression).

    ``survival[n, k]`` estimates ``P(y_n > k)``, which cannot increase with ``k``; binary
    problems solved independently may violate that.  The projection is the pool-adjacent-
    violators solution, computed in closed form as
    ``f_i = min_{a <= i} max_{b >= i} mean(s[a..b])`` (Barlow et al., 1972, "Statistical
    inference under order restrictions", the min-max formula), vectorised over rows: O(N K^3)
    work for K - 1 columns, with K small.  The result lies in [min, max] of each row's input.
    """
    s = np.asarray(survival, dtype=np.float64)
    n, m = s.shape
    if m <= 1:
        return s.copy()
    csum = np.concatenate([np.zeros((n, 1)), np.cumsum(s, axis=1)], axis=1)
    out = np.empty_like(s)
    for i in range(m):
        best = None
        for a in range(i + 1):
            # max over b >= i of the mean of s[a..b]
            b = np.arange(i, m)
            means = (csum[:, b + 1] - csum[:, [a]]) / (b - a + 1)
            hi = means.max(axis=1)
            best = hi if best is None else np.minimum(best, hi)
        out[:, i] = best
    return out


def survival_to_probas(survival: np.ndarray) -> np.ndarray:
    """Class probabilities from a non-increasing ``P(y > k)`` (N x K-1): differences.

    ``P(y = 0) = 1 - S_0``, ``P(y = k) = S_{k-1} - S_k``, ``P(y = K-1) = S_{K-2}``; values are
    clipped to [0, 1] first, so the result is a distribution whenever the rows are
    non-increasing (:func:`monotone_survival`).
    """
    s = np.clip(np.asarray(survival, dtype=np.float64), 0.0, 1.0)
    n = s.shape[0]
    upper = np.concatenate([np.ones((n, 1)), s], axis=1)
    lower = np.concatenate([s, np.zeros((n, 1))], axis=1)
    return np.maximum(upper - lower, 0.0)


def recode_classes(data: CrowdLabels, order: np.ndarray) -> CrowdLabels:
    """``data`` with class codes renumbered so that code ``r`` is the class of rank ``r``."""
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    truth = None if data.truth is None else np.where(data.truth >= 0, rank[np.maximum(data.truth, 0)], -1)
    return CrowdLabels(data.task, data.worker, rank[data.label], tasks=data.tasks,
                       workers=data.workers, classes=data.classes.take(order), truth=truth)


class OrdinalAggregator(BaseAggregator):
    """Base of the ordinal methods: a :class:`BaseAggregator` that fits in the ordinal order.

    Subclasses implement ``_fit_ordinal(data, gold, init) -> posteriors`` on a table whose
    class codes are ranks (code 0 = the lowest class, see :func:`ordinal_order`); the base
    recodes the input, gold and initial posteriors, and puts the posteriors back in the
    table's class order, so ``probas_`` columns are the input's classes as for every
    aggregator.  Subclasses have a ``classes`` parameter (the user's order, or None).

    Fitted attribute ``order_`` (Index): the classes from the lowest to the highest.
    """

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), kind="ordinal", answer_type="ordinal")

    def _fit(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None) -> np.ndarray:
        order = ordinal_order(data.classes, getattr(self, "classes", None))
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        self.order_ = data.classes.take(order)
        self._rank = rank  # ordinal code of each table class code, for the subclasses' tables
        ordinal = recode_classes(data, order)
        gold_o = None if gold is None else np.where(gold >= 0, rank[np.maximum(gold, 0)], -1).astype(np.int32)
        init_o = None if init is None else init[:, order]
        post = self._fit_ordinal(ordinal, gold_o, init_o)
        return np.asarray(post)[:, rank]

    def _fit_ordinal(self, data: CrowdLabels, gold: np.ndarray | None,
                     init: np.ndarray | None) -> np.ndarray:
        raise NotImplementedError
