"""Simulated ordinal crowds: planted grades, planted worker bias and spread.

Each task has a true grade ``y_n ~ Cat(class_prior)`` on K ordered classes; worker ``w``
perceives ``y_n + b_w + s_w * eps`` (``eps`` standard logistic or normal) and answers the
grade whose threshold interval holds it -- exactly the model of
:class:`crowdlearn.ordinal.ordinal_ds.OrdinalDawidSkene` (the confusions come from the same
function, :func:`crowdlearn.ordinal.ordinal_ds.ordinal_confusions`).  Optional spammers
answer uniformly at random.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..core.data import CrowdLabels
from ..ordinal.ordinal_ds import ordinal_confusions
from .assignment import assign_workers

__all__ = ["OrdinalPlanted", "ordinal_crowd"]


@dataclass(frozen=True, eq=False)
class OrdinalPlanted:
    """The planted parameters of an ordinal crowd (workers in code order).

    Attributes
    ----------
    bias, spread : ndarray (n_workers,)
        ``b_w`` (classes; positive = answers too high) and ``s_w``; NaN for spammers.
    spammer : ndarray of bool (n_workers,)
        Workers answering uniformly at random or always the same class.
    thresholds : ndarray (K-1,)
    class_prior : ndarray (K,)
    confusions : ndarray (n_workers, K, K)
        ``[w, true, answered]``; rows sum to 1.
    link : str
    """

    bias: np.ndarray
    spread: np.ndarray
    spammer: np.ndarray
    thresholds: np.ndarray
    class_prior: np.ndarray
    confusions: np.ndarray
    link: str


def ordinal_crowd(
    n_tasks: int = 500,
    n_workers: int = 30,
    n_classes: int = 4,
    labels_per_task: int = 5,
    *,
    bias_sd: float = 0.4,
    spread: tuple[float, float] = (0.2, 0.9),
    spammers: float = 0.0,
    constant: float = 0.0,
    thresholds: Sequence[float] | None = None,
    class_prior: Sequence[float] | None = None,
    link: str = "logit",
    classes: Sequence[Any] | None = None,
    assignment: str = "random",
    seed: Any = 0,
) -> tuple[CrowdLabels, OrdinalPlanted]:
    """Draw an ordinal crowd with planted truth and planted worker bias and spread.

    Parameters
    ----------
    n_tasks, n_workers, n_classes, labels_per_task : int
        Sizes; each task gets ``labels_per_task`` distinct workers
        (:func:`crowdlearn.simulate.assign_workers`).
    bias_sd : float
        Worker biases ``b_w ~ N(0, bias_sd^2)``.
    spread : (low, high)
        Worker spreads ``s_w`` log-uniform in [low, high].
    spammers : float
        Fraction of workers answering uniformly at random.
    constant : float
        Fraction of workers giving one fixed class (drawn uniformly) whatever the task: the
        "always relevant" worker of real relevance crowds.
    thresholds : sequence of K-1 increasing numbers, optional
        Default: the midpoints ``l + 1/2``.
    class_prior : sequence of K probabilities, optional
        Default uniform.
    link : {"logit", "probit"}
    classes : sequence, optional
        Names of the classes from lowest to highest (default ``0..K-1``).
    assignment : {"random", "regular"}
    seed : int, Generator or None

    Returns
    -------
    labels : CrowdLabels
        Integer task and worker ids; ``truth`` holds every task's grade.
    planted : OrdinalPlanted
    """
    if n_classes < 2:
        raise ValueError(f"n_classes must be >= 2, got {n_classes}")
    rng = np.random.default_rng(seed)
    k = n_classes
    prior = np.full(k, 1.0 / k) if class_prior is None else np.asarray(class_prior, dtype=float)
    if prior.shape != (k,) or np.any(prior < 0) or not np.isclose(prior.sum(), 1.0):
        raise ValueError(f"class_prior must be {k} probabilities summing to 1")
    cuts = np.arange(k - 1) + 0.5 if thresholds is None else np.asarray(thresholds, dtype=float)
    if cuts.shape != (k - 1,) or np.any(np.diff(cuts) <= 0):
        raise ValueError(f"thresholds must be {k - 1} increasing numbers")
    lo, hi = spread
    if not 0 < lo <= hi:
        raise ValueError(f"spread must be (low, high) with 0 < low <= high, got {spread}")
    bias = rng.normal(0.0, bias_sd, n_workers)
    spreads = np.exp(rng.uniform(np.log(lo), np.log(hi), n_workers))
    spam = np.zeros(n_workers, dtype=bool)
    n_spam = int(round(spammers * n_workers))
    if n_spam:
        spam[rng.choice(n_workers, n_spam, replace=False)] = True
    n_const = int(round(constant * n_workers))
    const = np.zeros(n_workers, dtype=bool)
    if n_const:
        const[rng.choice(np.flatnonzero(~spam), min(n_const, int((~spam).sum())), replace=False)] = True
    conf = ordinal_confusions(bias, spreads, cuts, link=link)
    conf[spam] = 1.0 / k
    fixed = rng.integers(0, k, n_workers)
    conf[const] = np.eye(k)[fixed[const]][:, None, :]
    truth = rng.choice(k, size=n_tasks, p=prior).astype(np.int32)
    task, worker = assign_workers(n_tasks, n_workers, labels_per_task, assignment, seed=rng)
    cdf = np.cumsum(conf[worker, truth[task]], axis=1)
    u = rng.random(len(task))[:, None]
    label = np.minimum((cdf < u * cdf[:, -1:]).sum(axis=1), k - 1).astype(np.int32)
    names = pd.Index(range(k) if classes is None else list(classes))
    if len(names) != k:
        raise ValueError(f"classes must name {k} classes")
    data = CrowdLabels.from_codes(task, worker, label, tasks=pd.RangeIndex(n_tasks),
                                  workers=pd.RangeIndex(n_workers), classes=names, truth=truth)
    bias_out, spread_out = bias.copy(), spreads.copy()
    bias_out[spam | const] = np.nan
    spread_out[spam | const] = np.nan
    planted = OrdinalPlanted(bias_out, spread_out, spam | const, cuts, prior, conf, link)
    return data, planted
