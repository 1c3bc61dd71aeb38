"""Metrics for multi-label answers: predicted tag sets against true tag sets.

Inputs are Series (task -> tag collection: tuple, list, set or a delimited string) or
0/1 indicator arrays (tasks x tags); the metrics are computed on the tasks both Series
share (an array or list other than two indicator arrays names no task and is refused).
Hamming loss and subset accuracy follow Tsoumakas and Katakis (2007); micro and
macro F1 are scikit-learn's ``f1_score`` on the indicator matrices (``zero_division=0``).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from ..core.classes import class_codes
from ..core.gold import keyed_gold
from ..multilabel.data import parse_tag_sets

__all__ = ["tag_indicator", "hamming_loss", "subset_accuracy", "micro_f1", "macro_f1", "truth_report"]


def tag_indicator(sets: pd.Series, tags: Iterable[Hashable] | None = None,
                  delimiter: str = "|") -> tuple[np.ndarray, pd.Index]:
    """A (len(sets) x tags) 0/1 matrix from a Series of tag collections, and the tag Index."""
    counts, flat = parse_tag_sets(sets.to_numpy(), delimiter)
    if tags is None and flat:
        # the tags in the classes' order, as MultiLabelAnswers has them: numbers by value
        # ("2" before "10"), then text
        codes, index = class_codes(pd.Series(flat, dtype=object))
        index = pd.Index(list(index), dtype=object)
    else:
        index = pd.Index([] if tags is None else list(tags))
        codes = index.get_indexer(pd.Index(flat, dtype=object)) if flat else np.zeros(0, np.int64)
    if np.any(codes < 0):
        raise ValueError(f"tag {flat[int(np.flatnonzero(codes < 0)[0])]!r} is not one of {list(index)[:10]}")
    out = np.zeros((len(sets), len(index)), dtype=np.int8)
    out[np.repeat(np.arange(len(sets)), counts), codes] = 1
    return out, index


def _pair(pred: Any, truth: Any, tags, delimiter) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(pred, np.ndarray) and isinstance(truth, np.ndarray):
        if pred.shape != truth.shape:
            raise ValueError(f"indicator shapes differ: {pred.shape} and {truth.shape}")
        return (pred > 0).astype(np.int8), (truth > 0).astype(np.int8)
    both = "; or give both as 0/1 indicator arrays (tasks x tags)"
    pred = keyed_gold(pred, "pred", value="tag set", hint=both)
    truth = keyed_gold(truth, "truth", value="tag set", hint=both)
    common = pred.index.intersection(truth.index)
    if len(common) == 0:
        raise ValueError("predictions and truth share no task")
    if tags is None:
        tags = tag_indicator(pd.concat([pred.loc[common], truth.loc[common]]), None, delimiter)[1]
    return (tag_indicator(pred.loc[common], tags, delimiter)[0],
            tag_indicator(truth.loc[common], tags, delimiter)[0])


def hamming_loss(pred: Any, truth: Any, tags=None, delimiter: str = "|") -> float:
    """Share of (task, tag) decisions that are wrong."""
    a, b = _pair(pred, truth, tags, delimiter)
    return float(np.mean(a != b)) if a.size else 0.0


def subset_accuracy(pred: Any, truth: Any, tags=None, delimiter: str = "|") -> float:
    """Share of tasks whose whole tag set is right."""
    a, b = _pair(pred, truth, tags, delimiter)
    return float(np.mean(np.all(a == b, axis=1)))


def micro_f1(pred: Any, truth: Any, tags=None, delimiter: str = "|") -> float:
    """F1 of all (task, tag) decisions pooled."""
    from sklearn.metrics import f1_score

    a, b = _pair(pred, truth, tags, delimiter)
    return float(f1_score(b, a, average="micro", zero_division=0))


def macro_f1(pred: Any, truth: Any, tags=None, delimiter: str = "|") -> float:
    """Mean over tags of each tag's F1."""
    from sklearn.metrics import f1_score

    a, b = _pair(pred, truth, tags, delimiter)
    return float(f1_score(b, a, average="macro", zero_division=0))


def truth_report(estimator: Any, data: Any) -> dict[str, float]:
    """Hamming loss, subset accuracy and micro/macro F1 of a fitted multi-label estimator
    against the gold tag sets its :class:`~crowdlearn.multilabel.data.MultiLabelAnswers`
    carries."""
    gold = data.truth_series()
    if gold is None or not len(gold):
        raise ValueError("the answers carry no truth")
    pred, tags = estimator.labels_, list(data.tags)
    return {"hamming_loss": hamming_loss(pred, gold, tags), "subset_accuracy": subset_accuracy(pred, gold, tags),
            "micro_f1": micro_f1(pred, gold, tags), "macro_f1": macro_f1(pred, gold, tags)}
