"""Standard errors calibrated on a few gold tasks: :class:`CalibratedContinuous`.

A continuous method's standard error measures how far its estimate would move with other
answers from the same crowd.  It does not see what the whole crowd gets wrong together (a
headline every worker reads as angrier than the experts do), so intervals built from it
cover the gold less often than they say.  Gold values on some tasks show by how much.

Model: the gold residual of task ``t`` is ``r_t = y_t - z_t ~ N(0, a * se_t^2 + b)``, ``se_t``
the base method's standard error; ``a > 0`` rescales it and ``b >= 0`` adds the error that
the crowd's answers do not reveal.  Both maximise the likelihood of the residuals of
cross-fitted estimates (each gold task's estimate from a fit given the other folds' gold,
as :class:`~crowdlearn.aggregation.calibration.CalibratedAggregator` does for class labels).
The output is the base fitted with all the gold; its estimates are unchanged and its
standard errors become ``sqrt(a * se^2 + b)``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from ..core.base import get_tags
from ..core.calibration import gold_folds, profile_fit
from ..registry import fresh_estimator, get_method
from .base import ContinuousEstimator, ContinuousFit
from .data import ContinuousAnswers

__all__ = ["CalibratedContinuous", "fit_variance_calibration"]

#: bounds of log a
_LOG_A = (np.log(1e-4), np.log(1e4))


def _gaussian_nll(r: np.ndarray, var: np.ndarray) -> float:
    """Mean negative log-density of residuals ``r`` under ``N(0, var)``."""
    return float(0.5 * np.mean(np.log(2.0 * np.pi * var) + r * r / var))


def fit_variance_calibration(residual: np.ndarray, stderr: np.ndarray) -> tuple[float, float]:
    """Maximum-likelihood ``(a, b)`` of ``residual ~ N(0, a * stderr^2 + b)``.

    ``b`` runs over a grid from 0 to the residuals' mean square (evenly in log above 1e-4 of
    it), ``a`` is the best for each (a bounded one-dimensional search), and the best pair is
    refined between its grid neighbours.
    """
    r = np.asarray(residual, dtype=float)
    se2 = np.asarray(stderr, dtype=float) ** 2
    if r.ndim != 1 or r.shape != se2.shape or len(r) < 2:
        raise ValueError("fit_variance_calibration needs one standard error per residual, and two or more")
    if not (np.all(np.isfinite(r)) and np.all(np.isfinite(se2))):
        raise ValueError("residuals and standard errors must be finite")
    scale = float(np.mean(r * r))
    if scale == 0.0:  # every estimate exact: nothing to widen
        return 1.0, 0.0
    floor = 1e-12 * scale  # a zero standard error (an unanimous task) with b = 0 stays finite

    grid = np.concatenate([[0.0], scale * np.geomspace(1e-4, 1.0, 17)])
    return profile_fit(lambda a, b: _gaussian_nll(r, a * se2 + b + floor), grid, _LOG_A, 1e-4 * scale)


class CalibratedContinuous(ContinuousEstimator):
    """Any continuous method whose standard errors are calibrated on the gold given to ``fit``.

    ``se' = sqrt(a se^2 + b)`` with ``a`` and ``b`` fitted by maximum likelihood on the
    residuals of cross-fitted estimates of the gold tasks (module docstring).  Estimates are
    those of the base fitted with all the gold.

    Parameters
    ----------
    base : str or estimator
        A registered continuous method name (``"gaussian-em"``, ``"mean"``, ...) or an
        unfitted one (cloned, never modified).
    cv : int
        Folds of the gold tasks; ``fit`` costs ``cv + 1`` fits of the base.
    random_state : int, Generator or None
        Seed of the gold folds (and the base's ``random_state`` when ``base`` is a name).

    Attributes
    ----------
    base_ : estimator
        The base fitted with all the gold.
    stderr_scale_, stderr_floor_ : float
        ``a`` and ``b``.
    calibration_ : Series
        On the cross-fitted gold estimates: ``n_gold``, ``mae``, ``rmse`` (honest estimates
        of the errors on tasks without gold), and the share of gold values inside the 95%
        intervals ``z +- 1.96 se`` before and after (``coverage95_before``,
        ``coverage95_after``; after is in sample for the two fitted parameters).
    """

    def __init__(self, base: Any = "gaussian-em", cv: int = 5, random_state: Any = 0) -> None:
        self.base = base
        self.cv = cv
        self.random_state = random_state

    def __crowd_tags__(self):
        base = get_tags(get_method(self.base, "continuous") if isinstance(self.base, str) else self.base)
        return dataclasses.replace(super().__crowd_tags__(), has_worker_model=base.has_worker_model,
                                   stochastic=base.stochastic)

    def _fit(self, data: ContinuousAnswers, gold: np.ndarray) -> ContinuousFit:
        known = np.flatnonzero(np.isfinite(gold))
        if len(known) < 3:
            raise ValueError(
                f"CalibratedContinuous learns its calibration from gold values: fit(answers, "
                f"gold=...) needs at least 3 gold tasks among the answers' tasks, got {len(known)}"
            )

        def gold_series(values):
            ok = np.isfinite(values)
            return pd.Series(values[ok], index=data.tasks[ok]) if ok.any() else None

        est, se = np.empty(data.n_tasks), np.empty(data.n_tasks)
        for fold in gold_folds(known, self.cv, self.random_state):
            others = gold.copy()
            others[fold] = np.nan
            fitted = fresh_estimator(self.base, "continuous", self.random_state).fit(data, gold=gold_series(others))
            est[fold] = fitted.estimates_.to_numpy()[fold]
            se[fold] = fitted.stderr_.to_numpy()[fold]
        r, s = gold[known] - est[known], se[known]
        a, b = fit_variance_calibration(r, s)
        self.stderr_scale_, self.stderr_floor_ = a, b
        wide = np.sqrt(a * s * s + b)
        self.calibration_ = pd.Series({
            "n_gold": float(len(known)),
            "mae": float(np.mean(np.abs(r))),
            "rmse": float(np.sqrt(np.mean(r * r))),
            "coverage95_before": float(np.mean(np.abs(r) <= 1.96 * s)),
            "coverage95_after": float(np.mean(np.abs(r) <= 1.96 * wide)),
        })
        base = fresh_estimator(self.base, "continuous", self.random_state).fit(data, gold=gold_series(gold))
        self.base_ = base
        worker = {}
        if hasattr(base, "worker_noise_"):
            worker = {"bias": base.worker_bias_.to_numpy(), "scale": base.worker_scale_.to_numpy(),
                      "noise": base.worker_noise_.to_numpy()}
        stderr = base.stderr_.to_numpy()
        return ContinuousFit(base.estimates_.to_numpy(), np.sqrt(a * stderr ** 2 + b), **worker,
                             n_iter=base.n_iter_, converged=base.converged_, history=base.history_)
