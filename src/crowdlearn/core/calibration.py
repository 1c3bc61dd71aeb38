"""What the calibration wrappers share (:class:`~crowdlearn.aggregation.calibration.CalibratedAggregator`,
:class:`~crowdlearn.continuous.calibration.CalibratedContinuous`): the folds of the gold
tasks their cross-fitting uses, and the fit of their two-parameter maps.

Both maps have a positive scale (a temperature, a variance factor) searched on a log scale
and a non-negative second parameter (a uniform mixture, a variance floor) whose likelihood is
flat near 0 on a log scale, where a gradient search started there stalls; both are fitted as
a profile: the best scale for each value of a grid of the second parameter, refined between
the neighbours of the best grid value.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from scipy.optimize import minimize_scalar

from .base import resolve_generator

__all__ = ["gold_folds", "profile_fit"]


def gold_folds(known: np.ndarray, cv: Any, random_state: Any) -> list[np.ndarray]:
    """The positions ``known`` of the gold tasks in ``cv`` seeded folds (at most one per task).

    Raises
    ------
    ValueError
        When ``cv`` is not an integer >= 2.
    """
    if isinstance(cv, bool) or not isinstance(cv, (int, np.integer)) or cv < 2:
        raise ValueError(f"cv must be an integer >= 2 (folds of the gold tasks), got {cv!r}")
    rng = resolve_generator(random_state)
    return np.array_split(rng.permutation(known), min(int(cv), len(known)))


def profile_fit(objective: Callable[[float, float], float], grid: np.ndarray,
                log_bounds: tuple[float, float], tol: float) -> tuple[float, float]:
    """``(scale, second)`` minimising ``objective(scale, second)``.

    For each ``second`` of ``grid`` (increasing, starting at 0), the best ``scale`` by a
    bounded search over ``log(scale)`` in ``log_bounds``; then ``second`` is refined between
    the grid neighbours of the best value (to ``tol``).
    """
    def best_scale(second: float) -> tuple[float, float]:
        res = minimize_scalar(lambda ls: objective(np.exp(ls), second), bounds=log_bounds,
                              method="bounded", options={"xatol": 1e-5})
        return float(res.fun), float(np.exp(res.x))

    fits = [best_scale(g) for g in grid]
    i = int(np.argmin([f for f, _ in fits]))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    if hi > lo:
        res = minimize_scalar(lambda g: best_scale(g)[0], bounds=(lo, hi), method="bounded",
                              options={"xatol": tol})
        if res.fun < fits[i][0]:
            return best_scale(float(res.x))[1], float(res.x)
    return fits[i][1], float(grid[i])
