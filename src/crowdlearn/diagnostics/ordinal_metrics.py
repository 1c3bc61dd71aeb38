"""Metrics for ordinal answers: errors that respect the order of the classes.

* :func:`ordinal_mae` -- mean absolute error in classes (ranks), against gold;
* :func:`quadratic_kappa` -- Cohen's kappa with quadratic weights (Cohen, 1968), against gold;
* :func:`truth_report` -- accuracy, MAE and quadratic kappa of a fitted ordinal method against
  the gold of its answer table (the scorer of ``crowdlearn benchmark``);
* :func:`krippendorff_alpha` -- agreement of the crowd answers themselves (no gold), from the
  coincidence matrix (Krippendorff, 2004, "Content analysis", ch. 11; 2011, "Computing
  Krippendorff's alpha-reliability"), with the ordinal, interval or nominal metric.

The class order is the ordinal methods' rule (:func:`crowdlearn.ordinal.base.ordinal_order`):
``order`` when given, else numeric order when every class is a number; other labels need an
explicit ``order``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from ..core.data import CrowdLabels
from ..core.gold import keyed_gold
from ..ordinal.base import numeric_classes, ordered_classes

__all__ = ["ordinal_mae", "quadratic_kappa", "krippendorff_alpha", "class_ranks", "truth_report"]


def class_ranks(values: pd.Series, order: pd.Index) -> np.ndarray:
    """Rank of each value in ``order`` (numbers matched by value: ``"2"`` is ``2``)."""
    ranks = order.get_indexer(values)
    if np.any(ranks < 0):
        text = pd.Index([str(c) for c in order])
        miss = ranks < 0
        ranks[miss] = text.get_indexer(values[miss].astype(str))
        if np.any(ranks < 0):
            bad = values[ranks < 0].iloc[0]
            raise ValueError(f"class {bad!r} is not in the ordinal order {list(order)[:10]}")
    return ranks


def _paired_ranks(labels: Any, truth: Any, order: Iterable[Hashable] | None):
    labels, truth = keyed_gold(labels, "labels"), keyed_gold(truth, "truth")
    common = labels.index.intersection(truth.index)
    if len(common) == 0:
        raise ValueError("labels and truth share no task")
    lab, tru = labels.loc[common], truth.loc[common]
    classes = _order(pd.Index(pd.unique(pd.concat([lab, tru], ignore_index=True).to_numpy())), order)
    return class_ranks(lab, classes), class_ranks(tru, classes), classes


def _order(classes: pd.Index, order: Iterable[Hashable] | None) -> pd.Index:
    if order is not None:
        return pd.Index(list(order))
    if not numeric_classes(classes):
        raise ValueError(f"the classes {list(classes)[:10]} are not numbers: give their order "
                         "(order=[lowest, ..., highest])")
    return ordered_classes(classes)


def ordinal_mae(labels: Any, truth: Any, order: Iterable[Hashable] | None = None) -> float:
    """Mean absolute difference of ranks between ``labels`` and ``truth`` on their common tasks.

    Parameters
    ----------
    labels, truth : Series (or mapping) task -> class
        Keyed by task id; an array or list names no task and is refused (``ValueError``).
    order : sequence, optional
        Classes from lowest to highest; default numeric order (every class must be a number).
    """
    a, b, _ = _paired_ranks(labels, truth, order)
    return float(np.mean(np.abs(a - b)))


def quadratic_kappa(labels: Any, truth: Any, order: Iterable[Hashable] | None = None) -> float:
    """Cohen's kappa with quadratic disagreement weights ``(r_a - r_b)^2`` (Cohen, 1968).

    1 = perfect agreement, 0 = chance level; computed by
    ``sklearn.metrics.cohen_kappa_score(weights="quadratic")`` on the ranks.
    """
    from sklearn.metrics import cohen_kappa_score

    a, b, classes = _paired_ranks(labels, truth, order)
    if len(np.unique(np.concatenate([a, b]))) < 2:
        return 1.0 if np.array_equal(a, b) else 0.0
    return float(cohen_kappa_score(a, b, labels=np.arange(len(classes)), weights="quadratic"))


def truth_report(estimator: Any, data: CrowdLabels) -> dict[str, float]:
    """Agreement of a fitted ordinal estimator with the gold its answer table carries.

    Parameters
    ----------
    estimator : fitted ordinal method
        Its ``labels_`` (task -> class) are scored in its ``order_`` (lowest to highest).
    data : CrowdLabels
        The answers it was fitted on, with gold (``truth``).

    Returns
    -------
    dict
        ``{"accuracy", "mae", "quadratic_kappa"}`` over the tasks with gold (MAE in classes).

    Raises
    ------
    ValueError
        When the table has no gold.
    """
    if data.truth is None or not np.any(data.truth >= 0):
        raise ValueError("the answers carry no gold")
    known = data.truth >= 0
    truth = pd.Series(data.classes.take(data.truth[known]), index=data.tasks[known])
    labels = estimator.labels_.reindex(truth.index)
    order = getattr(estimator, "order_", None)
    return {"accuracy": float(np.mean(labels.to_numpy() == truth.to_numpy())),
            "mae": ordinal_mae(labels, truth, order),
            "quadratic_kappa": quadratic_kappa(labels, truth, order)}


def krippendorff_alpha(data: CrowdLabels, level: str = "ordinal",
                       order: Iterable[Hashable] | None = None) -> float:
    """Krippendorff's alpha of the crowd answers, from the coincidence matrix.

    With ``v_u`` the answer counts of unit (task) ``u`` over the K classes and ``m_u`` its
    number of answers, units with ``m_u >= 2`` contribute the coincidences
    ``o = sum_u (v_u v_u^T - diag(v_u)) / (m_u - 1)``; ``n_c = sum_k o_ck``, ``n = sum_c n_c``, and

        alpha = 1 - (n - 1) * sum_{c,k} o_ck d2_ck / sum_{c,k} n_c n_k d2_ck

    with the metric ``d2``: nominal ``[c != k]``; interval ``(v_c - v_k)^2`` (the class values,
    which must be numbers); ordinal ``(sum_{g=c}^{k} n_g - (n_c + n_k) / 2)^2`` on ranks
    (Krippendorff, 2004, "Content analysis: an introduction to its methodology", 2nd ed.,
    section 11.3).  One pass over the answers (a sparse product), O(L + K^2).

    Parameters
    ----------
    data : CrowdLabels
    level : {"ordinal", "interval", "nominal"}
    order : sequence, optional
        Classes from lowest to highest (ordinal level); default: the ordinal methods' rule
        (numeric order for numbers, else the table's class order).

    Returns
    -------
    float
        1 = perfect agreement, 0 = agreement at chance, negative = systematic disagreement;
        NaN when no unit has two answers or all answers are one class.
    """
    import scipy.sparse as sp

    from ..ordinal.base import ordinal_order

    if level not in ("ordinal", "interval", "nominal"):
        raise ValueError(f"level must be 'ordinal', 'interval' or 'nominal', got {level!r}")
    k = data.n_classes
    counts = data.vote_counts()  # N x K, O(N K)
    m_u = counts.sum(axis=1)
    pairable = m_u >= 2
    v = sp.csr_matrix(counts[pairable])
    w = 1.0 / (m_u[pairable] - 1.0)
    coinc = (v.T @ sp.diags(w) @ v).toarray() - np.diag(np.asarray(v.multiply(w[:, None]).sum(axis=0)).ravel())
    perm = ordinal_order(data.classes, order)  # classes from lowest to highest
    coinc = coinc[np.ix_(perm, perm)]
    n_c = coinc.sum(axis=1)
    n = n_c.sum()
    if n <= 1:
        return float("nan")
    idx = np.arange(k)
    if level == "nominal":
        d2 = (idx[:, None] != idx[None, :]).astype(float)
    elif level == "interval":
        values = np.array([float(str(c)) for c in data.classes.take(perm)])
        d2 = (values[:, None] - values[None, :]) ** 2
    else:
        cum = np.concatenate([[0.0], np.cumsum(n_c)])
        lo, hi = np.minimum(idx[:, None], idx[None, :]), np.maximum(idx[:, None], idx[None, :])
        d2 = (cum[hi + 1] - cum[lo] - (n_c[:, None] + n_c[None, :]) / 2.0) ** 2
    expected = float(n_c @ d2 @ n_c)
    if expected <= 0:
        return float("nan")
    return float(1.0 - (n - 1.0) * float(np.sum(coinc * d2)) / expected)
