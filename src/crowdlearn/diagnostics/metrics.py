"""Evaluation metrics: accuracy against gold, inter-annotator agreement, worker-model error
and calibration of posteriors.

Every function reads the library's native objects (:class:`~crowdlearn.core.data.CrowdLabels`,
``labels_`` Series, ``probas_`` DataFrames, ``confusions_`` arrays) and never allocates
anything of size tasks x workers.

Agreement
    :func:`krippendorff_alpha` (nominal, ordinal, interval, ratio) and :func:`fleiss_kappa`
    are computed from sparse task x class answer counts, so they run on millions of answers.
Truth inference
    :func:`accuracy`, :func:`log_loss`, :func:`expected_calibration_error`.
Worker models
    :func:`confusion_error` (estimated vs planted confusions) and :func:`worker_accuracy`
    (each worker's answers against the gold labels).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import pandas as pd

from ..core.data import CrowdLabels, as_crowd_labels
from ..core.gold import keyed_gold
from ..core.ids import equal_by_value, positions_by_value

__all__ = [
    "accuracy",
    "confusion_error",
    "expected_calibration_error",
    "fleiss_kappa",
    "krippendorff_alpha",
    "log_loss",
    "worker_accuracy",
]

AlphaLevel = Literal["nominal", "ordinal", "interval", "ratio"]


# --------------------------------------------------------------------------- helpers
def _gold_series(truth: Any) -> pd.Series:
    """Gold labels as a Series task -> class without missing values.

    An array or list names no task: it is refused (:func:`~crowdlearn.core.gold.keyed_gold`),
    except where array ``probas`` take integer codes per row (:func:`log_loss`).
    """
    if isinstance(truth, CrowdLabels):
        series = truth.truth_series()
        if series is None:
            raise ValueError("the CrowdLabels has no gold labels (its truth is None)")
        return series
    return keyed_gold(truth, "truth", dtype=object,
                      hint="; a CrowdLabels with gold works too (class codes per row only "
                      "with array probas)").dropna()


def _task_class_counts(labels: CrowdLabels):
    """Sparse (n_tasks, n_classes) CSR matrix of answer counts (duplicates summed)."""
    import scipy.sparse as sp

    counts = sp.csr_matrix(
        (np.ones(labels.n_labels, dtype=np.float64), labels.label.copy(), labels.task_ptr.copy()),
        shape=(labels.n_tasks, labels.n_classes),
    )
    counts.has_canonical_format = False  # repeated classes within a task are summed
    counts.sum_duplicates()
    return counts


def _proba_truth_codes(probas: Any, truth: Any) -> tuple[np.ndarray, np.ndarray]:
    """(P, y): posteriors rows and true class codes of the tasks that have gold."""
    if isinstance(probas, pd.DataFrame):
        gold = _gold_series(truth)
        rows = positions_by_value(probas.index, gold.index, "the probas index")
        has = rows >= 0
        if not has.any():
            raise ValueError(
                "no task has both a posterior and a gold label: the probas index and the "
                "truth index do not overlap"
            )
        gold_values = gold.to_numpy()[has]
        y = positions_by_value(probas.columns, gold_values, "the probas columns")
        if np.any(y < 0):
            bad = gold_values[y < 0][0]
            raise ValueError(
                f"gold class {bad!r} is not a column of probas {list(probas.columns)[:10]}"
            )
        proba = probas.to_numpy(dtype=np.float64)[rows[has]]
    else:
        proba = np.asarray(probas, dtype=np.float64)
        y = np.asarray(truth.truth if isinstance(truth, CrowdLabels) else truth)
        if proba.ndim != 2 or y.shape != (proba.shape[0],):
            raise ValueError(
                "array probas must have shape (n_tasks, n_classes) and truth one integer "
                f"code per task (-1 unknown); got {proba.shape} and {y.shape}"
            )
        if y.dtype.kind not in "iu":
            raise ValueError("with array probas, truth must hold integer class codes")
        known = y >= 0
        if not known.any():
            raise ValueError("no task has a gold label (all truth codes are -1)")
        if np.any(y[known] >= proba.shape[1]):
            raise ValueError(f"truth codes must lie in [-1, {proba.shape[1]})")
        proba, y = proba[known], y[known].astype(np.int64)
    if not np.all(np.isfinite(proba)):
        raise ValueError("probas must be finite")
    return proba, y


# --------------------------------------------------------------------------- accuracy
def accuracy(pred: pd.Series | Mapping, truth: Any) -> float:
    """Fraction of gold tasks whose predicted class is the gold class.

    Parameters
    ----------
    pred : Series or mapping task -> class
        Predictions, e.g. an aggregator's ``labels_`` (an array or list, which names no
        task, is refused like such a ``truth``).
    truth : Series or mapping task -> class, or CrowdLabels
        Gold labels; missing values (NaN) mean "unknown".  A ``CrowdLabels`` contributes its
        ``truth`` codes.  An array or list names no task and is refused (``ValueError``).

    Returns
    -------
    float
        Accuracy over the tasks present in ``pred`` that have a gold label.  A task present
        in ``pred`` with a missing prediction counts as an error.

    Raises
    ------
    ValueError
        When no task of ``pred`` has a gold label.

    Notes
    -----
    Ids and classes are compared by value when the two sides hold different types: the
    library reads files as text (task ``"17"``, class ``"1"``) while ``pd.read_csv`` of a
    truth file gives numbers (``17``, ``1``); they match here (``1``, ``1.0``, ``"1"`` are one
    value).  Sides of the same type are compared exactly (``"007"`` is not ``"7"``).
    """
    gold = _gold_series(truth)
    pred = keyed_gold(pred, "pred", dtype=object)
    at = positions_by_value(gold.index, pred.index, "the truth index")
    has = at >= 0
    if not has.any():
        raise ValueError(
            "accuracy: no predicted task has a gold label (the prediction and truth "
            f"indexes do not overlap; {len(pred)} predictions, {len(gold)} gold labels)"
        )
    correct = equal_by_value(pred.to_numpy()[has], gold.to_numpy()[at[has]])
    return float(correct.mean())


# ------------------------------------------------------------------------- agreement
def _coincidences(labels: CrowdLabels) -> np.ndarray:
    """Krippendorff's K x K coincidence matrix ``o``.

    For a unit (task) u with m_u >= 2 pairable values and class counts n_uc, every ordered
    pair of *distinct* values (i, j), i != j, adds 1 / (m_u - 1) to o[c_i, c_j].  The number
    of ordered pairs with classes (c, k) is n_uc * n_uk when c != k and n_uc * (n_uc - 1)
    when c == k, so

        o[c, k] = sum_u (n_uc * n_uk - [c == k] * n_uc) / (m_u - 1).

    Each unit then contributes exactly m_u to the total, so o.sum() = n = sum of m_u over
    pairable units; units with a single value contribute nothing.
    """
    import scipy.sparse as sp

    counts = _task_class_counts(labels)
    m = labels.labels_per_task().astype(np.float64)
    weight = np.zeros_like(m)
    pairable = m >= 2
    weight[pairable] = 1.0 / (m[pairable] - 1.0)
    weighted = sp.diags(weight) @ counts  # row u scaled by 1 / (m_u - 1)
    o = (counts.T @ weighted).toarray()
    o -= np.diag(np.asarray(weighted.sum(axis=0)).ravel())
    return o


def _numeric_class_values(classes: pd.Index, level: str) -> np.ndarray:
    try:
        values = np.asarray(classes, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"level={level!r} needs numeric classes; got {list(classes)[:5]}"
        ) from None
    if not np.all(np.isfinite(values)):
        raise ValueError(f"level={level!r} needs finite numeric classes")
    return values


def _delta2(level: str, classes: pd.Index, marginals: np.ndarray) -> np.ndarray:
    """Squared difference function delta^2[c, k] of Krippendorff's alpha."""
    k = len(classes)
    if level == "nominal":
        return 1.0 - np.eye(k)
    if level == "ordinal":
        # ranks follow the numeric value when the classes are numbers, the class order else
        try:
            order = np.argsort(_numeric_class_values(classes, level), kind="stable")
        except ValueError:
            order = np.arange(k)
        n_sorted = marginals[order]
        cum = np.concatenate([[0.0], np.cumsum(n_sorted)])
        i, j = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
        lo, hi = np.minimum(i, j), np.maximum(i, j)
        between = cum[hi + 1] - cum[lo]  # sum of n_g for ranks lo..hi inclusive
        d_sorted = (between - (n_sorted[i] + n_sorted[j]) / 2.0) ** 2
        d = np.empty_like(d_sorted)
        d[np.ix_(order, order)] = d_sorted
        return d
    values = _numeric_class_values(classes, level)
    diff = values[:, None] - values[None, :]
    if level == "interval":
        return diff**2
    if level == "ratio":
        total = values[:, None] + values[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            d = np.where(total != 0, (diff / np.where(total != 0, total, 1.0)) ** 2, 0.0)
        return d
    raise ValueError(
        f"level must be 'nominal', 'ordinal', 'interval' or 'ratio'; got {level!r}"
    )


def krippendorff_alpha(labels: Any, level: AlphaLevel = "nominal") -> float:
    """Krippendorff's alpha reliability of the crowd answers.

    Computed natively from the coincidence matrix (Krippendorff, "Computing Krippendorff's
    Alpha-Reliability", 2011): with ``o`` the coincidences of pairable values, ``n_c`` its
    marginals, ``n`` the number of pairable values and ``delta^2`` the level's metric,

    .. math:: \\alpha = 1 - (n - 1) \\frac{\\sum_{c,k} o_{ck} \\delta^2_{ck}}
                                       {\\sum_{c,k} n_c n_k \\delta^2_{ck}}

    Tasks with fewer than two answers are not pairable and are ignored.  Any number of
    answers per task is allowed, and repeated answers of one worker count as separate
    values.  Runs in O(L + nnz(task x class counts) + K^2) time and memory.

    Parameters
    ----------
    labels : CrowdLabels or long DataFrame (task, worker, label)
    level : {"nominal", "ordinal", "interval", "ratio"}
        Measurement level.  "interval" and "ratio" need numeric classes (their values are
        used); "ordinal" ranks numeric classes by value and other classes by their order in
        ``labels.classes``.

    Returns
    -------
    float
        Alpha in (-inf, 1]; 1 is perfect agreement, 0 agreement at chance.  NaN when the
        pairable values show no variation at all (a single class): alpha is then undefined.

    Raises
    ------
    ValueError
        When no task has two or more answers, or ``level`` is unknown / needs numbers.
    """
    labels = as_crowd_labels(labels)
    if level not in ("nominal", "ordinal", "interval", "ratio"):
        raise ValueError(
            f"level must be 'nominal', 'ordinal', 'interval' or 'ratio'; got {level!r}"
        )
    o = _coincidences(labels)
    marginals = o.sum(axis=1)
    n = marginals.sum()
    if n < 2:
        raise ValueError("krippendorff_alpha: no task has two or more answers (nothing to pair)")
    d2 = _delta2(level, labels.classes, marginals)
    observed = float((o * d2).sum())
    expected = float(marginals @ d2 @ marginals)
    if expected <= 0:
        return float("nan")
    return 1.0 - (n - 1.0) * observed / expected


def fleiss_kappa(labels: Any) -> float:
    """Fleiss' kappa, generalised to a variable number of answers per task.

    With ``n_ij`` the number of answers of class j on task i and ``n_i`` the task's answer
    count, the per-task agreement is ``P_i = sum_j n_ij (n_ij - 1) / (n_i (n_i - 1))``,
    ``P_bar`` its mean over tasks with ``n_i >= 2``, ``p_j`` the share of class j among all
    their answers and ``P_e = sum_j p_j^2``; ``kappa = (P_bar - P_e) / (1 - P_e)``.  With an
    equal number of answers per task this is exactly Fleiss (1971).  Tasks with a single
    answer are ignored.

    Parameters
    ----------
    labels : CrowdLabels, long DataFrame (task, worker, label), or ndarray (n_tasks, n_classes)
        Crowd answers, or directly the table of answer counts per task and class.

    Returns
    -------
    float
        Kappa; NaN when every answer is the same class (``P_e = 1``).
    """
    if isinstance(labels, np.ndarray):
        counts = np.asarray(labels, dtype=np.float64)
        if counts.ndim != 2 or np.any(counts < 0):
            raise ValueError("a count table must be a 2-D array of non-negative counts")
        n_i = counts.sum(axis=1)
        sq = (counts**2).sum(axis=1)
        class_totals = counts[n_i >= 2].sum(axis=0)
    else:
        labels = as_crowd_labels(labels)
        counts = _task_class_counts(labels)
        n_i = labels.labels_per_task().astype(np.float64)
        sq = np.asarray(counts.multiply(counts).sum(axis=1)).ravel()
        class_totals = np.asarray(counts[np.flatnonzero(n_i >= 2)].sum(axis=0)).ravel()
    ok = n_i >= 2
    if not ok.any():
        raise ValueError("fleiss_kappa: no task has two or more answers")
    p_i = (sq[ok] - n_i[ok]) / (n_i[ok] * (n_i[ok] - 1.0))
    p_bar = p_i.mean()
    p_j = class_totals / class_totals.sum()
    p_e = float((p_j**2).sum())
    if p_e >= 1.0 - 1e-15:
        return float("nan")
    return float((p_bar - p_e) / (1.0 - p_e))


# ---------------------------------------------------------------------- worker models
def confusion_error(estimated: np.ndarray, true: np.ndarray) -> dict[str, float]:
    """Distance between estimated and true confusion arrays.

    Parameters
    ----------
    estimated, true : array, shape (n_workers, n_classes, n_classes)
        Confusions in the library orientation ``[w, true, answered]`` (a single K x K
        matrix is treated as one worker).

    Returns
    -------
    dict
        ``"frobenius"``: mean over workers of ``||estimated[w] - true[w]||_F``;
        ``"max_abs"``: largest absolute entry-wise difference.
    """
    est = np.asarray(estimated, dtype=np.float64)
    ref = np.asarray(true, dtype=np.float64)
    if est.ndim == 2:
        est = est[None]
    if ref.ndim == 2:
        ref = ref[None]
    if est.shape != ref.shape or est.ndim != 3 or est.shape[1] != est.shape[2]:
        raise ValueError(
            "confusion arrays must both have shape (n_workers, K, K); got "
            f"{np.shape(estimated)} and {np.shape(true)}"
        )
    if not (np.all(np.isfinite(est)) and np.all(np.isfinite(ref))):
        raise ValueError("confusion arrays must be finite")
    if est.shape[0] == 0:
        raise ValueError("confusion arrays hold no worker")
    diff = est - ref
    return {
        "frobenius": float(np.sqrt((diff**2).sum(axis=(1, 2))).mean()),
        "max_abs": float(np.abs(diff).max()),
    }


def worker_accuracy(labels: CrowdLabels, truth: Any = None) -> pd.DataFrame:
    """Each worker's accuracy on the tasks with a gold label.

    Parameters
    ----------
    labels : CrowdLabels
        Answers; its ``truth`` codes are the gold unless ``truth`` is given.
    truth : Series or mapping task -> class, optional
        Gold labels overriding ``labels.truth``, keyed by task id (an array or list names
        no task and is refused with a ``ValueError``).

    Returns
    -------
    DataFrame indexed by worker
        ``n_gold`` (answers on gold tasks), ``n_correct`` and ``accuracy``
        (``n_correct / n_gold``, NaN for a worker with no gold answer).
    """
    labels = as_crowd_labels(labels)
    codes = labels.encode_gold(_in_label_types(labels, truth)) if truth is not None else labels.truth
    if codes is None or not np.any(codes >= 0):
        raise ValueError("worker_accuracy needs gold labels: labels.truth is empty")
    gold_of_answer = codes[labels.task]
    on_gold = gold_of_answer >= 0
    m = labels.n_workers
    n_gold = np.bincount(labels.worker[on_gold], minlength=m)
    hits = on_gold & (labels.label == gold_of_answer)
    n_correct = np.bincount(labels.worker[hits], minlength=m)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(n_gold > 0, n_correct / np.maximum(n_gold, 1), np.nan)
    return pd.DataFrame(
        {"n_gold": n_gold, "n_correct": n_correct, "accuracy": acc}, index=labels.workers
    )


def _in_label_types(labels: CrowdLabels, truth: Any) -> pd.Series:
    """``truth`` re-keyed to the task ids and class names of ``labels`` where they spell the
    same values (see :func:`accuracy`); tasks absent from ``labels`` are dropped, and gold
    classes it does not know are kept as given (``encode_gold`` names them)."""
    gold = _gold_series(truth)
    rows = positions_by_value(labels.tasks, gold.index, "the answers' tasks")
    gold = gold[rows >= 0]
    cls = positions_by_value(labels.classes, gold.to_numpy(), "the answers' classes")
    values = np.where(cls >= 0, labels.classes.to_numpy()[np.maximum(cls, 0)], gold.to_numpy())
    return pd.Series(values, index=labels.tasks[rows[rows >= 0]], dtype=object)


# ------------------------------------------------------------------------ posteriors
def log_loss(probas: pd.DataFrame | np.ndarray, truth: Any, eps: float = 1e-15) -> float:
    """Mean negative log posterior of the gold class.

    Parameters
    ----------
    probas : DataFrame tasks x classes, or ndarray (n_tasks, n_classes)
        Posteriors, e.g. an aggregator's ``probas_``.
    truth : Series or mapping task -> class, or CrowdLabels
        Gold labels (only tasks present in both are scored).  With an ndarray ``probas``,
        an int array of class codes per row (-1 unknown) or a CrowdLabels: the one place an
        unkeyed truth is read, by position, as the rows of ``probas`` have no task id.  With
        a DataFrame ``probas``, an array or list truth is refused (``ValueError``).
    eps : float
        Probabilities are clipped to ``[eps, 1]`` before the log.

    Returns
    -------
    float
        Mean of ``-log p(gold)`` in nats.
    """
    proba, y = _proba_truth_codes(probas, truth)
    p_true = np.clip(proba[np.arange(len(y)), y], eps, 1.0)
    return float(-np.log(p_true).mean())


def expected_calibration_error(
    probas: pd.DataFrame | np.ndarray, truth: Any, n_bins: int = 10
) -> float:
    """Top-label expected calibration error of posteriors.

    Each gold task is put in one of ``n_bins`` equal-width bins of its confidence
    ``max_k p_k`` (bins ``(b_{i-1}, b_i]``); ECE is ``sum_b (n_b / n) |acc_b - conf_b|`` with
    ``acc_b`` the share of the bin whose argmax class is the gold class and ``conf_b`` its
    mean confidence.

    Parameters
    ----------
    probas, truth
        As in :func:`log_loss`.
    n_bins : int
        Number of confidence bins on [0, 1].

    Returns
    -------
    float
        ECE in [0, 1]; 0 for perfectly calibrated posteriors (up to sampling noise).
    """
    if int(n_bins) < 1:
        raise ValueError("n_bins must be a positive integer")
    n_bins = int(n_bins)
    proba, y = _proba_truth_codes(probas, truth)
    pred = proba.argmax(axis=1)
    conf = proba[np.arange(len(y)), pred]
    correct = (pred == y).astype(np.float64)
    bins = np.clip(np.ceil(conf * n_bins).astype(np.int64) - 1, 0, n_bins - 1)
    gap = np.bincount(bins, weights=correct - conf, minlength=n_bins)
    return float(np.abs(gap).sum() / len(y))
