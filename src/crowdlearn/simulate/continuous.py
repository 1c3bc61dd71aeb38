"""Synthetic continuous crowds: planted truth and planted per-worker bias, scale and noise.

Each task ``t`` has a true value :math:`z_t \\sim \\mathcal N(\\mu, \\tau^2)`; worker ``w``
answers it as

.. math:: x_{t,w} = s_w z_t + b_w + \\varepsilon_{t,w}, \\qquad
          \\varepsilon_{t,w} \\sim \\mathcal N(0, \\sigma_w^2),

the regression crowd model of Raykar et al. (2010).  A spammer ignores the task: its scale
is 0 and its answers are drawn around the truth's mean with the truth's spread
(:math:`b_w = \\mu`, :math:`\\sigma_w = \\tau`), which is the same model with
:math:`s_w = 0`.  Which worker answers which task comes from
:func:`crowdlearn.simulate.assignment.assign_workers` (``"regular"``: every worker gets the
same number of tasks, ``n_tasks * labels_per_task / n_workers``).

The planted biases and scales are drawn in the estimators' gauge (answer-weighted mean scale
1 and mean bias 0 over the non-spammers is *not* forced: the draws are centred on 1 and 0, so
fitted parameters match the planted ones up to a small common shift).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..continuous.data import ContinuousAnswers
from .assignment import Assignment, assign_workers

__all__ = ["ContinuousPlanted", "continuous_crowd"]


@dataclass(frozen=True, eq=False)
class ContinuousPlanted:
    """The parameters a continuous crowd was drawn from.

    Attributes
    ----------
    truth : ndarray (n_tasks,)
        True value per task (also the table's ``truth``).
    bias, scale, noise : ndarray (n_workers,)
        :math:`b_w`, :math:`s_w` and :math:`\\sigma_w` (a standard deviation) per worker.
    spammer : ndarray of bool (n_workers,)
        Workers whose answers ignore the task (``scale == 0``).
    """

    truth: np.ndarray
    bias: np.ndarray
    scale: np.ndarray
    noise: np.ndarray
    spammer: np.ndarray

    def as_dict(self) -> dict[str, np.ndarray]:
        return {"truth": self.truth, "bias": self.bias, "scale": self.scale,
                "noise": self.noise, "spammer": self.spammer}


def _draw(value: Any, size: int, rng: np.random.Generator, what: str) -> np.ndarray:
    """A constant, a (low, high) uniform range, or an array of ``size`` values."""
    if np.isscalar(value):
        return np.full(size, float(value))
    arr = np.asarray(value, dtype=float)
    if arr.shape == (2,):
        low, high = float(arr[0]), float(arr[1])
        if high < low:
            raise ValueError(f"{what}: range ({low}, {high}) has high < low")
        return rng.uniform(low, high, size)
    if arr.shape == (size,):
        return arr.copy()
    raise ValueError(f"{what} must be a number, a (low, high) range or {size} values; got shape {arr.shape}")


def continuous_crowd(
    n_tasks: int = 200,
    n_workers: int = 20,
    labels_per_task: int = 5,
    *,
    assignment: Assignment = "regular",
    truth_mean: float = 0.0,
    truth_sd: float = 1.0,
    bias: Any = (-0.5, 0.5),
    scale: Any = 1.0,
    noise: Any = (0.2, 1.5),
    spammers: float = 0.0,
    n_features: int = 0,
    feature_noise: float = 0.5,
    seed: Any = 0,
) -> tuple[ContinuousAnswers, ContinuousPlanted]:
    """Draw a continuous crowd with planted truth and worker parameters.

    Parameters
    ----------
    n_tasks, n_workers, labels_per_task : int
        Sizes; each task gets ``labels_per_task`` distinct workers.  With
        ``assignment="regular"`` every worker answers ``n_tasks * labels_per_task /
        n_workers`` tasks (e.g. 1000 tasks, 50 workers, 5 per task: 100 per worker).
    assignment : {"regular", "random"}
        See :func:`~crowdlearn.simulate.assignment.assign_workers`.
    truth_mean, truth_sd : float
        The truths' normal distribution.
    bias, scale, noise : float, (low, high) or array of n_workers
        Planted :math:`b_w`, :math:`s_w`, :math:`\\sigma_w` (uniform draws in a range);
        ``bias`` and ``noise`` are in units of ``truth_sd``.
    spammers : float in [0, 1)
        Share of workers (rounded down) that answer independently of the task.
    n_features : int
        Item features to attach (end-to-end regression): ``x_t = (z_t - mu) / tau * u +
        feature_noise * N(0, I)`` for a random unit vector ``u``, so a linear model of the
        features predicts the truth up to the feature noise.  0: no features.
    feature_noise : float >= 0
        Standard deviation of the features' noise.
    seed : int, Generator or None

    Returns
    -------
    answers : ContinuousAnswers
        With ``truth`` set; task ids ``0..n_tasks-1``, worker ids ``0..n_workers-1``.
    planted : ContinuousPlanted
    """
    if truth_sd <= 0 or not np.isfinite(truth_sd):
        raise ValueError(f"truth_sd must be a finite number > 0, got {truth_sd!r}")
    if not 0 <= spammers < 1:
        raise ValueError(f"spammers must lie in [0, 1), got {spammers!r}")
    rng = np.random.default_rng(seed)
    task, worker = assign_workers(n_tasks, n_workers, labels_per_task, assignment, rng)
    truth = rng.normal(truth_mean, truth_sd, n_tasks)
    b = _draw(bias, n_workers, rng, "bias") * truth_sd
    s = _draw(scale, n_workers, rng, "scale")
    sigma = _draw(noise, n_workers, rng, "noise") * truth_sd
    if np.any(sigma < 0):
        raise ValueError("noise must be >= 0")
    spammer = np.zeros(n_workers, dtype=bool)
    n_spam = int(np.floor(spammers * n_workers))
    spammer[rng.choice(n_workers, n_spam, replace=False)] = True
    # a spammer's answers do not depend on the task: scale 0, centred on the truths' mean
    s[spammer], b[spammer], sigma[spammer] = 0.0, truth_mean, truth_sd
    values = s[worker] * truth[task] + b[worker] + sigma[worker] * rng.standard_normal(len(task))
    features = None
    if n_features:
        u = rng.standard_normal(int(n_features))
        u /= np.linalg.norm(u)
        signal = (truth - truth_mean) / truth_sd
        features = signal[:, None] * u + feature_noise * rng.standard_normal((n_tasks, int(n_features)))
    answers = ContinuousAnswers.from_codes(task, worker, values, n_tasks=n_tasks,
                                           n_workers=n_workers, truth=truth, features=features)
    return answers, ContinuousPlanted(truth=truth, bias=b, scale=s, noise=sigma, spammer=spammer)
