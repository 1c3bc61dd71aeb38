"""Bayesian Dawid-Skene fitted by mean-field variational Bayes.

Model: the Dawid-Skene model of :mod:`crowdlearn.aggregation.dawid_skene` with conjugate
Dirichlet priors on every parameter::

    pi ~ Dir(prior_alpha * 1),     confusions_[w, j, :] ~ Dir(alpha_j),
    alpha_j = alpha_off * 1 + (alpha_diag - alpha_off) e_j      (diagonal-heavy),
    y_n ~ Cat(pi),    answer_{n,w} | y_n = j ~ Cat(confusions_[w, j, :]).

Mean-field posterior ``q(y) q(pi) prod_w prod_j q(confusions_[w, j, :])`` (Liu, Peng & Ihler,
2012, "Variational inference for crowdsourcing", NIPS; Simpson et al.'s IBCC has the same
updates), found by coordinate ascent:

* VB M-step: ``q(confusions_[w, j, :]) = Dir(alpha_j + counts[w, j, :])`` with the soft counts
  ``counts[w, j, l] = sum_{n: answer_{n,w} = l} q_n(j)``, and ``q(pi) = Dir(prior_alpha +
  sum_n q_n)``;
* VB E-step: ``q_n(j) ∝ exp(E[log pi_j] + sum_w E[log confusions_[w, j, answer_{n,w}]])``
  with ``E[log theta_l] = digamma(a_l) - digamma(sum_l a_l)`` for ``theta ~ Dir(a)``.  This is
  exactly the DS E-step with ``log_table = E[log confusion]``, so the sparse kernels of
  :mod:`crowdlearn.core.kernels` are reused unchanged.

The objective is the evidence lower bound (ELBO).  Right after an E-step it equals::

    ELBO = sum_n log sum_j exp(E[log pi_j] + sum_w E[log theta_{w, j, answer}])
           - sum_{w, j} KL(q(theta_{w, j}) || Dir(alpha_j)) - KL(q(pi) || Dir(prior_alpha))

(for a gold task the first term is its clamped class's logit instead), which is what
``history_`` records.  Each step maximises it over one factor, so ``history_`` never
decreases (up to rounding).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ..core.base import Tags
from ..core import kernels
from ..core.data import CrowdLabels
from ..core.stats import (clamp_to_gold, dirichlet_expected_log, dirichlet_kl, expected_skills, logsumexp,
                          vote_fractions)
from .base import ConfusionAggregator
from .dawid_skene import check_table_size

__all__ = ["BayesianDawidSkene"]

#: refuse W x K x K tables above this many float64 cells, as DawidSkene does


class BayesianDawidSkene(ConfusionAggregator):
    """Dawid-Skene with Dirichlet priors, fitted by variational Bayes (registry name ``bds``).

    Parameters
    ----------
    alpha_diag : float, default 4.0
        Dirichlet concentration of a confusion row on its own class (true = answered): the
        prior belief that a worker is better than chance, worth ``alpha_diag`` answers.
        The default was chosen on simulated crowds (``benchmarks/tune_defaults.py``), not
        on the real benchmark sets.
    alpha_off : float or None, default None
        Dirichlet concentration on each other class.  ``None`` means ``0.5 / (K - 1)``: the
        K - 1 wrong answers share a total of 0.5, so the prior mean accuracy
        ``alpha_diag / (alpha_diag + 0.5)`` (8/9 by default) does not shrink as K grows.  A
        constant such as 1 would put it at ``alpha_diag / (alpha_diag + K - 1)``, falling
        towards 0 as K grows, and on sparse
        many-class data (one or two answers per task) VB then prefers the degenerate fit
        that puts every task in one class.
    prior_alpha : float, default 1.0
        Dirichlet concentration of the class prior ``pi`` (symmetric).
    max_iter : int, default 100
        Maximum number of VB iterations (one M-step and one E-step each).
    tol : float, default 1e-7
        Stop when the ELBO per answer improves by less than ``tol``; ``tol=0`` runs
        ``max_iter`` iterations.
    backend : {"auto", "numpy", "numba"}
        Kernel back end (see :mod:`crowdlearn.core.kernels`).
    random_state : int, default 0
        Seed of the tie-breaking rule.

    Attributes
    ----------
    confusion_concentrations_ : ndarray (n_workers, n_classes, n_classes)
        Dirichlet parameters of the posterior of each confusion row, ``[w, true, answered]``.
    confusions_ : ndarray (n_workers, n_classes, n_classes)
        Posterior mean confusions (rows sum to 1), same orientation.
    prior_concentration_ : ndarray (n_classes,)
        Dirichlet parameters of the posterior of the class prior.
    priors_ : Series, class -> posterior mean class probability.
    skills_ : Series, worker -> ``sum_j priors_[j] confusions_[w, j, j]``.
    history_ : list of float
        ELBO after every E-step (non-decreasing).

    Notes
    -----
    ``fit(labels, init=...)`` accepts initial posteriors (default: the soft majority vote).
    Gold labels clamp their tasks' posteriors during the fit, so the workers are also judged
    on them.  ``predict_proba`` on new tasks uses ``E[log confusion]`` (the VB predictive
    rule of the E-step).
    """

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), accepts_init=True)

    def __init__(
        self,
        alpha_diag: float = 4.0,
        alpha_off: float | None = None,
        prior_alpha: float = 1.0,
        max_iter: int = 100,
        tol: float = 1e-7,
        backend: str = "auto",
        random_state: int | None = 0,
    ) -> None:
        self.alpha_diag = alpha_diag
        self.alpha_off = alpha_off
        self.prior_alpha = prior_alpha
        self.max_iter = max_iter
        self.tol = tol
        self.backend = backend
        self.random_state = random_state

    # ------------------------------------------------------------------ fit
    def _prior_rows(self, k: int) -> np.ndarray:
        """Prior Dirichlet parameters of a confusion row, (K x K) [true, answered]."""
        off = 0.5 / max(k - 1, 1) if self.alpha_off is None else self.alpha_off
        for name, value in (("alpha_diag", self.alpha_diag), ("alpha_off", off),
                            ("prior_alpha", self.prior_alpha)):
            value = float(value)
            if not np.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive Dirichlet concentration, got {value}")
        rows = np.full((k, k), float(off))
        np.fill_diagonal(rows, float(self.alpha_diag))
        return rows

    def _fit(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None) -> np.ndarray:
        k, m = data.n_classes, data.n_workers
        if self.max_iter < 0:
            raise ValueError(f"max_iter must be >= 0, got {self.max_iter}")
        check_table_size(type(self).__name__, m, k)
        prior_rows = self._prior_rows(k)
        prior_pi = np.full(k, float(self.prior_alpha))
        backend = kernels.resolve_backend(self.backend, data.n_labels)
        gold_info = _gold_rows(data, gold)

        post = init if init is not None else vote_fractions(data)
        post = clamp_to_gold(post, gold)
        n_answers = max(data.n_labels, 1)
        prev = -np.inf
        self.converged_ = False
        conc, conc_pi = self._m_step(data, post, prior_rows, prior_pi, backend)
        for it in range(self.max_iter):
            if it:
                conc, conc_pi = self._m_step(data, post, prior_rows, prior_pi, backend)
            elog = dirichlet_expected_log(conc)  # [w, true, answered]
            log_table, log_prior = _expected_logs(elog, conc_pi)
            post, ll = kernels.estep(data, log_table, log_prior, backend)
            if gold_info is not None:
                ll += _gold_correction(gold_info, log_table, log_prior)
            post = clamp_to_gold(post, gold)
            elbo = (
                ll
                - float(dirichlet_kl(conc, prior_rows, elog).sum())
                - float(dirichlet_kl(conc_pi, prior_pi, log_prior))
            )
            if self._record_iteration(elbo, prev, n_answers):
                break
            prev = elbo
        if self.n_iter_ == 0:
            log_table, log_prior = _expected_logs(dirichlet_expected_log(conc), conc_pi)
        # the returned posteriors are the E-step of exactly these Dirichlet parameters
        self._log_table = log_table
        self._log_prior = log_prior
        self.confusion_concentrations_ = conc
        self.confusions_ = conc / conc.sum(axis=2, keepdims=True)
        self.prior_concentration_ = conc_pi
        prior = conc_pi / conc_pi.sum()
        self.priors_ = pd.Series(prior, index=data.classes, name="prior")
        self.skills_ = pd.Series(expected_skills(self.confusions_, prior), index=data.workers, name="skill")
        return post

    @staticmethod
    def _m_step(data, post, prior_rows, prior_pi, backend):
        k, m = data.n_classes, data.n_workers
        counts, class_counts = kernels.mstep(data, post, backend)  # (W*K answered, K true)
        conc = counts.reshape(m, k, k).transpose(0, 2, 1) + prior_rows  # [w, true, answered]
        return np.ascontiguousarray(conc), class_counts + prior_pi

    # ------------------------------------------------------------- predict



# ---------------------------------------------------------------------------- helpers
def _expected_logs(elog: np.ndarray, conc_pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """E-step tables from ``elog[w, j, l] = E[log theta_{w, j, l}]``: ``log_table[w*K + l, j]``
    and ``E[log pi]``."""
    m, k, _ = elog.shape
    log_table = np.ascontiguousarray(elog.transpose(0, 2, 1).reshape(m * k, k))
    return log_table, dirichlet_expected_log(conc_pi)


def _gold_rows(data: CrowdLabels, gold: np.ndarray | None):
    """(incidence rows of the gold tasks, their gold classes) or None."""
    if gold is None:
        return None
    rows = np.flatnonzero(gold >= 0)
    return data.incidence()[rows], gold[rows]


def _gold_correction(gold_info, log_table: np.ndarray, log_prior: np.ndarray) -> float:
    """ELBO term of clamped tasks: their gold logit replaces the log-sum-exp of the E-step."""
    inc, cls = gold_info
    logits = np.asarray(inc @ log_table) + log_prior
    return float(logits[np.arange(len(cls)), cls].sum() - logsumexp(logits, axis=1).sum())
