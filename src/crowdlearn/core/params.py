"""Validation of estimator hyper-parameters, one rule per parameter name, shared by all methods.

The same name means the same kind of quantity in every method of the library: ``tol`` is a
stopping threshold (a finite number >= 0), ``max_iter`` / ``n_iter`` and the other round
counts are whole numbers >= 0, ``min_shared`` / ``max_workers`` and the other sizes of the
moment methods whole numbers >= 1, ``alpha`` / ``beta`` / ``prior_alpha`` / ``diag_alpha`` / ...
are Dirichlet or Beta pseudo-counts (finite numbers >= 0), and so on.  :func:`check_params`
applies those rules to an estimator's ``get_params()`` when it is fitted, so a bad value gives
one ``ValueError`` naming the parameter, instead of a comparison error deep inside a loop or a
silently meaningless fit (a negative pseudo-count makes the M-step's "probabilities"
negative).  Rules a method needs beyond these (say ``max_iter >= 1``) stay in the method.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

__all__ = [
    "check_params", "WHOLE_NUMBERS", "ROUND_COUNTS", "SIZES", "TOLERANCES", "PSEUDO_COUNTS", "POSITIVE",
    "FRACTIONS",
]

#: numbers of iterations, rounds or restarts: whole numbers >= 0
ROUND_COUNTS = frozenset({
    "max_iter", "n_iter", "inner_iter", "m_step_max_iter", "n_em_iter", "n_kl_iter",
    "n_power_iter", "n_restarts", "n_outer", "n_inner", "n_impute_iter", "n_nmf_iter",
    "n_diag_iter", "n_refine_iter",
})
#: sizes of the worker-pair statistics of the moment methods (shared tasks a pair needs,
#: partners and workers kept, matrix side): whole numbers >= 1
SIZES = frozenset({
    "min_shared", "max_partners", "max_workers", "max_dim", "min_partners", "min_shared_triple",
})
#: the parameters whose values are whole numbers (ints): counts and sizes
WHOLE_NUMBERS = ROUND_COUNTS | SIZES
#: stopping thresholds: finite numbers >= 0 (0 = run every round)
TOLERANCES = frozenset({"tol", "outer_tol", "eps"})
#: Dirichlet / Beta pseudo-counts and smoothing constants: finite numbers >= 0
PSEUDO_COUNTS = frozenset({
    "alpha", "beta", "diag_alpha", "prior_alpha", "alpha_diag", "alpha_off", "smoothing",
    "strategy_prior", "bias_prior", "scale_prior", "noise_prior", "reliability_prior",
    "unobserved_weight",
})
#: scales and variances that must be finite and > 0
POSITIVE = frozenset({"lambda_worker", "lr_init", "alpha_prior_var", "log_beta_prior_var",
                      "prior_strength"})
#: probabilities and fractions: (name -> (low, high, high included))
FRACTIONS = {"default_noise": (0.0, 1.0, True), "trim": (0.0, 0.5, False), "floor": (0.0, 1.0, False)}
#: parameters for which None means "the method's own choice"
_NONE_ALLOWED = frozenset({"alpha_off", "smoothing"})


def _is_number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def check_params(estimator: Any) -> None:
    """Raise ``ValueError("<name> must be ..., got <value>")`` for the first invalid parameter.

    Parameters not named in the tables of this module are left to their method.
    """
    for name, value in estimator.get_params(deep=False).items():
        message = _problem(name, value)
        if message is not None:
            raise ValueError(f"{name} must be {message}, got {value!r} ({type(estimator).__name__})")


def _problem(name: str, value: Any) -> str | None:
    """What ``value`` should have been for ``name``; None when it is fine or not ruled here."""
    if value is None and name in _NONE_ALLOWED:
        return None
    # counts and sizes are ints: the fits use them in range() and as array sizes, where
    # 1000.0 fails deep inside the fit (the CLI reads "1e3" for them as 1000)
    if name in ROUND_COUNTS:
        ok = _is_int(value) and value >= 0
        return None if ok else "a whole number >= 0 (an int)"
    if name in SIZES:
        ok = _is_int(value) and value >= 1
        return None if ok else "a whole number >= 1 (an int)"
    if name in TOLERANCES:
        ok = _is_number(value) and math.isfinite(value) and value >= 0
        return None if ok else "a finite number >= 0"
    if name in PSEUDO_COUNTS:
        ok = _is_number(value) and math.isfinite(value) and value >= 0
        return None if ok else "a finite number >= 0 (a Dirichlet/Beta pseudo-count)"
    if name in POSITIVE:
        ok = _is_number(value) and math.isfinite(value) and value > 0
        return None if ok else "a finite number > 0"
    if name in FRACTIONS:
        low, high, closed = FRACTIONS[name]
        ok = _is_number(value) and low <= value and (value <= high if closed else value < high)
        return None if ok else f"a number in [{low:g}, {high:g}{']' if closed else ')'}"
    return None
