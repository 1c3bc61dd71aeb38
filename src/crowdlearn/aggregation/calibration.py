"""Confidences calibrated on a few gold tasks: :class:`CalibratedAggregator`.

An EM aggregator multiplies the evidence of a task's answers as if they were independent
given its class.  Real answers are not: workers share a task's difficulty and its likely
confusions, and the latent class the model settles on can differ from the gold one on a
share of the tasks.  The posteriors are then overconfident, often close to 1 on tasks the
method gets wrong.  Withheld answers cannot reveal this: the model predicts them well, since
they come from the same crowd that defines its latent class.  Gold labels can, and many
projects have some (control tasks, test questions, an expert pass over a sample).

Model (temperature scaling, Guo, Pleiss, Sun & Weinberger 2017, "On calibration of modern
neural networks", ICML; the second term a uniform mixture, as in label smoothing)::

    q'_i(c) = (1 - eps) * q_i(c)^T / sum_c' q_i(c')^T  +  eps / K

``T > 0`` (``T < 1`` softens) and ``eps`` in ``[0, 1/2]`` maximise the likelihood of the
gold classes.  Temperature alone cannot make a confidently wrong posterior cheap without
flattening every other; ``eps`` bounds the loss of each at ``log(K / eps)``.  The family
contains plain temperature scaling (``eps = 0``, ``mix=False``) and the identity.  The
transformation is monotone in ``q_i(c)`` for each task, so every label stays the same.

The posteriors that ``T`` and ``eps`` are fitted to must not have seen their own gold: a fit
with a task's gold clamps that task to certainty.  So the gold tasks are split into ``cv``
folds, and each fold's posteriors come from a fit of the base method given the other folds'
gold (cross-fitting).  The output is the base fitted with all the gold, calibrated; the
gold tasks themselves stay at their gold class.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np
import pandas as pd

from ..core.base import Tags, get_tags
from ..core.calibration import gold_folds, profile_fit
from ..core.stats import logsumexp
from ..core.data import CrowdLabels
from ..registry import LABEL_KINDS, fresh_estimator, get_method
from .base import BaseAggregator, GoldCodes

__all__ = ["CalibratedAggregator", "fit_calibration", "apply_calibration"]

#: floor of a posterior before its log: an exact zero (a class no answer supports under a
#: hard worker model) must stay finite under the temperature
_FLOOR = 1e-300
#: bounds of the fitted parameters: log T in [log 1e-3, log 1e3], eps in [0, 1/2]
_LOG_T = (np.log(1e-3), np.log(1e3))
_EPS_MAX = 0.5


def apply_calibration(proba: np.ndarray, temperature: float, eps: float) -> np.ndarray:
    """``(1 - eps) * softmax(T * log q) + eps / K`` row by row (module docstring).

    Parameters
    ----------
    proba : ndarray, shape (n_tasks, n_classes)
        Posteriors (rows sum to 1).
    temperature : float
        ``T > 0``.
    eps : float
        Weight of the uniform distribution, in ``[0, 1]``.
    """
    proba = np.asarray(proba, dtype=float)
    z = temperature * np.log(np.maximum(proba, _FLOOR))
    z -= z.max(axis=1, keepdims=True)
    q = np.exp(z)
    q /= q.sum(axis=1, keepdims=True)
    return (1.0 - eps) * q + eps / proba.shape[1]


def _nll(logq: np.ndarray, y: np.ndarray, temperature: float, eps: float) -> float:
    """Mean negative log-likelihood of the gold classes ``y`` under the calibrated posteriors
    whose logs are ``logq`` (taken once: the fit evaluates this hundreds of times)."""
    z = temperature * logq
    log_norm = logsumexp(z, axis=1)
    p_gold = (1.0 - eps) * np.exp(z[np.arange(len(y)), y] - log_norm) + eps / logq.shape[1]
    return float(-np.log(np.maximum(p_gold, _FLOOR)).mean())


def fit_calibration(proba: np.ndarray, y: np.ndarray, mix: bool = True) -> tuple[float, float]:
    """Maximum-likelihood ``(T, eps)`` of :func:`apply_calibration` for gold classes ``y``.

    Parameters
    ----------
    proba : ndarray, shape (n, n_classes)
        Posteriors of the gold tasks, from fits that did not see their gold.
    y : ndarray of int, shape (n,)
        Gold class codes.
    mix : bool
        Fit ``eps`` too; ``False`` keeps ``eps = 0`` (temperature scaling alone).

    Returns
    -------
    (temperature, eps)
    """
    proba = np.asarray(proba, dtype=float)
    y = np.asarray(y, dtype=np.int64)
    if proba.ndim != 2 or len(proba) != len(y) or len(y) == 0:
        raise ValueError("fit_calibration needs one posterior row per gold class, and at least one")
    if np.any((y < 0) | (y >= proba.shape[1])):
        raise ValueError(f"gold class codes must lie in [0, {proba.shape[1] - 1}]")
    logq = np.log(np.maximum(proba, _FLOOR))
    grid = np.concatenate([[0.0], np.geomspace(1e-4, _EPS_MAX, 17)]) if mix else np.zeros(1)
    return profile_fit(lambda t, eps: _nll(logq, y, t, eps), grid, _LOG_T, 1e-4)


def _codes_order(proba: pd.DataFrame, data: CrowdLabels) -> np.ndarray:
    """A posterior table keyed by ids as an array in ``data``'s task and class code order."""
    return proba.reindex(index=data.tasks, columns=data.classes, fill_value=0.0).to_numpy()


class CalibratedAggregator(BaseAggregator):
    """Any aggregator whose confidences are calibrated on the gold labels given to ``fit``.

    ``q'(c) = (1 - eps) q(c)^T / sum q^T + eps / K`` with ``T`` and ``eps`` fitted by
    maximum likelihood on cross-fitted posteriors of the gold tasks (module docstring).
    Labels are those of the base method fitted with all the gold; only the confidences
    change.

    Parameters
    ----------
    base : str or estimator
        A registered classification method name (``"ds"``, ``"hds"``, ``"mv"``, ...) or an
        unfitted aggregator (cloned, never modified).
    cv : int
        Folds of the gold tasks (at most one per gold task).  Each fold's posteriors come
        from a fit of ``base`` given the other folds' gold, so ``fit`` costs ``cv + 1`` fits.
    mix : bool
        Fit the uniform mixture ``eps`` too (default); ``False``: temperature alone.
    random_state : int, Generator or None
        Seed of the gold folds and of tie-breaking (and the base's ``random_state`` when
        ``base`` is a name).

    Attributes
    ----------
    base_ : estimator
        The base fitted with all the gold.
    temperature_, eps_ : float
        The fitted calibration.
    calibration_ : Series
        On the cross-fitted gold posteriors (each from a fit that did not see its gold):
        ``n_gold``; ``accuracy`` (an honest estimate of the accuracy on tasks without gold,
        for a fit given a little less gold); ``log_loss_before`` / ``log_loss_after`` and
        ``ece_before`` / ``ece_after`` (in sample for the two fitted parameters, so slightly
        optimistic).

    Examples
    --------
    >>> import crowdlearn as cl
    >>> labels = cl.datasets.load("zencrowd_us")
    >>> gold = labels.truth_series().sample(100, random_state=0)   # a few control tasks
    >>> est = cl.CalibratedAggregator("ds").fit(labels, gold=gold)
    >>> est.calibration_["ece_after"] < est.calibration_["ece_before"]    # doctest: +SKIP
    True
    """

    def __init__(self, base: Any = "ds", cv: int = 5, mix: bool = True, random_state: Any = 0) -> None:
        self.base = base
        self.cv = cv
        self.mix = mix
        self.random_state = random_state

    def __crowd_tags__(self) -> Tags:
        base = get_tags(get_method(self.base, LABEL_KINDS) if isinstance(self.base, str) else self.base)
        return dataclasses.replace(super().__crowd_tags__(), stochastic=base.stochastic,
                                   has_worker_model=base.has_worker_model,
                                   predict_matches_fit=base.predict_matches_fit)

    def _fit(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None):
        from ..diagnostics.metrics import expected_calibration_error, log_loss

        known = np.flatnonzero(gold >= 0) if gold is not None else np.array([], dtype=np.int64)
        if len(known) < 2:
            raise ValueError(
                f"CalibratedAggregator learns its calibration from gold labels: fit(labels, "
                f"gold=...) needs at least 2 gold tasks among the answers' tasks, got {len(known)}"
            )
        held = np.empty((data.n_tasks, data.n_classes))
        for fold in gold_folds(known, self.cv, self.random_state):
            others = gold.copy()
            others[fold] = -1
            est = fresh_estimator(self.base, LABEL_KINDS, random_state=self.random_state)
            with warnings.catch_warnings():
                # a fold's warnings repeat the final fit's (which the user sees)
                warnings.simplefilter("ignore")
                est.fit(data, gold=GoldCodes(others) if np.any(others >= 0) else None)
            held[fold] = _codes_order(est.probas_, data)[fold]
        proba, y = held[known], gold[known]
        self.temperature_, self.eps_ = fit_calibration(proba, y, mix=bool(self.mix))
        after = apply_calibration(proba, self.temperature_, self.eps_)
        self.calibration_ = pd.Series({
            "n_gold": float(len(known)),
            "accuracy": float(np.mean(proba.argmax(axis=1) == y)),
            # the library's log-loss (probabilities clipped at 1e-15, as `benchmark` reports it)
            "log_loss_before": log_loss(proba, y),
            "log_loss_after": log_loss(after, y),
            "ece_before": expected_calibration_error(proba, y),
            "ece_after": expected_calibration_error(after, y),
        })
        base = fresh_estimator(self.base, LABEL_KINDS, random_state=self.random_state)
        base.fit(data, gold=GoldCodes(gold))
        self.base_ = base
        for attr in ("n_iter_", "converged_"):
            if hasattr(base, attr):
                setattr(self, attr, getattr(base, attr))
        return apply_calibration(_codes_order(base.probas_, data), self.temperature_, self.eps_)

    def _predict_proba_codes(self, data: CrowdLabels) -> np.ndarray:
        """The base's posteriors for ``data``, calibrated with the fitted ``T`` and ``eps``."""
        return apply_calibration(_codes_order(self.base_.predict_proba(data), data), self.temperature_, self.eps_)
