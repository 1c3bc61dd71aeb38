"""How sure is an accuracy against gold, and is one method really better than another?

Gold sets of crowdsourcing benchmarks are small (108 tasks on bluebirds, a few hundred on
most), so a difference of a point between two aggregators is often a handful of tasks.  Two
tools, both computed from per-task correctness (1 if the method's label equals the gold):

* :func:`accuracy_interval`: the Wilson score interval of one accuracy (Wilson, 1927,
  "Probable inference, the law of succession, and statistical inference", JASA 22); unlike
  the Wald interval ``p +- z sqrt(p(1-p)/n)`` it stays inside [0, 1] and keeps its coverage
  near 0 and 1, where good aggregators live.
* :func:`paired_comparison`: two methods scored on the *same* gold tasks.  Only the
  discordant tasks (one right, the other wrong) carry information; with ``b`` tasks where
  only A is right and ``c`` where only B is, the difference of accuracies is ``(b - c) / n``,
  its standard error ``sqrt(b + c - (b - c)^2 / n) / n`` (the variance of the mean of the
  paired differences ``d_t in {-1, 0, 1}``), and the exact McNemar test (McNemar, 1947,
  Psychometrika 12) gives the two-sided p-value of ``b ~ Binomial(b + c, 1/2)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["accuracy_interval", "correct_per_task", "paired_comparison"]


def _normal_quantile(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    return float(stats.norm.ppf(0.5 + level / 2.0))


def correct_per_task(labels: pd.Series, truth: pd.Series) -> pd.Series:
    """1.0/0.0 per gold task: whether ``labels`` (task -> class) gives the gold class.

    Every task of ``truth`` is scored; a gold task without a label counts as wrong (an
    aggregator that drops a task does not get it for free).
    """
    truth = truth.dropna()
    pred = labels.reindex(truth.index)
    return pd.Series((pred.to_numpy() == truth.to_numpy()).astype(np.float64), index=truth.index,
                     name="correct")


def accuracy_interval(correct: Any, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval ``(low, high)`` of the accuracy behind per-task correctness.

    .. math:: \\frac{\\hat p + z^2/2n \\pm z \\sqrt{\\hat p(1-\\hat p)/n + z^2/4n^2}}{1 + z^2/n}

    Parameters
    ----------
    correct : array-like of bool or 0/1
        One entry per gold task.
    level : float
        Coverage of the interval.

    Returns
    -------
    (float, float)
        ``(nan, nan)`` without tasks.
    """
    x = np.asarray(correct, dtype=np.float64)
    n = x.size
    if n == 0:
        return float("nan"), float("nan")
    z = _normal_quantile(level)
    p = float(x.mean())
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def paired_comparison(correct_a: Any, correct_b: Any, level: float = 0.95) -> dict[str, float]:
    """Accuracy of A minus accuracy of B on the same gold tasks, its interval and McNemar's p.

    Parameters
    ----------
    correct_a, correct_b : array-like of bool or 0/1, same length
        Per-task correctness of the two methods, task by task in the same order.
    level : float
        Coverage of the interval of the difference (normal approximation of the mean of the
        paired differences).

    Returns
    -------
    dict
        ``difference``, ``low``, ``high``, ``only_a`` (tasks only A gets right), ``only_b``,
        ``p_value`` (exact two-sided McNemar; 1.0 when no task is discordant), ``n``.
    """
    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"correct_a and correct_b must be 1-d of one length, got shapes {a.shape} and {b.shape}")
    n = a.size
    only_a = int(np.sum(a & ~b))
    only_b = int(np.sum(b & ~a))
    if n == 0:
        nan = float("nan")
        return {"difference": nan, "low": nan, "high": nan, "only_a": 0, "only_b": 0, "p_value": nan, "n": 0}
    diff = (only_a - only_b) / n
    se = np.sqrt(max(only_a + only_b - (only_a - only_b) ** 2 / n, 0.0)) / n
    z = _normal_quantile(level)
    discordant = only_a + only_b
    p_value = 1.0 if discordant == 0 else float(stats.binomtest(only_a, discordant, 0.5).pvalue)
    return {"difference": float(diff), "low": float(diff - z * se), "high": float(diff + z * se),
            "only_a": only_a, "only_b": only_b, "p_value": p_value, "n": n}
