"""Dawid-Skene and its constrained variants, fitted by (MAP-)EM on sparse statistics.

Model (Dawid & Skene, 1979, "Maximum likelihood estimation of observer error-rates using the
EM algorithm", JRSS C 28(1))::

    y_n ~ Cat(pi),    answer_{n,w} | y_n = j ~ Cat(confusions_[w, j, :])

with workers independent given the truth.  EM alternates the posterior
``q_n(j) ∝ pi_j prod_w confusions_[w, j, answer_{n,w}]`` (E-step) and the smoothed counts
``confusions_[w, j, l] ∝ alpha + sum_{n: answer_{n,w}=l} q_n(j)`` (M-step).

Variants constrain the confusion matrix:

* :class:`OneCoinDawidSkene` — one accuracy ``p_w``; errors spread uniformly over the other
  K-1 classes (the "one-coin" model of the signal-processing tutorial, §2.1);
* :class:`ClassConditionalDawidSkene` — one accuracy per worker and true class.

Orientation: ``confusions_[w, true, answered]``, rows sum to 1.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from ..core.base import Tags
from ..core import kernels
from ..core.data import CrowdLabels
from ..core.stats import clamp_to_gold, confusions_from_log_table, expected_skills, vote_fractions
from .base import ConfusionAggregator
from .online import StepwiseEM

__all__ = ["DawidSkene", "OneCoinDawidSkene", "ClassConditionalDawidSkene", "check_table_size", "MAX_TABLE_CELLS"]

_TINY = 1e-300
#: refuse worker tables above this many float64 cells (400 MB per copy) instead of crawling
MAX_TABLE_CELLS = 50_000_000


def check_table_size(who: str, n_workers: int, n_classes: int) -> None:
    """Refuse a dense (workers, K, K) confusion table above :data:`MAX_TABLE_CELLS` cells.

    Raised before any work, with the memory it would take and the methods that need none.
    """
    m, k = n_workers, n_classes
    if m * k * k > MAX_TABLE_CELLS:
        raise ValueError(
            f"{who} would need {m} workers x {k}^2 confusion cells "
            f"({m * k * k * 8 / 1e9:.1f} GB); with {k} classes use 'mv', 'wawa' or 'zbs'"
        )


class DawidSkene(StepwiseEM, ConfusionAggregator):
    """Dawid-Skene: a full K x K confusion matrix per worker, fitted by MAP-EM.

    Parameters
    ----------
    max_iter : int, default 100
        Maximum number of EM iterations.
    tol : float, default 1e-7
        Stop when the log-likelihood per answer improves by less than ``tol``.
        ``tol=0`` runs exactly ``max_iter`` iterations.
    alpha : float, default 0.0
        Dirichlet pseudo-count added to every confusion cell (MAP smoothing).  With the
        default 0, a (true, answered) pair a worker never produced keeps probability 0
        (floored at 1e-300 in log space), as in the maximum-likelihood estimator.
    diag_alpha : float, default 4.0
        Extra pseudo-count on every diagonal cell ``confusions_[w, j, j]``: a Dirichlet prior
        belief that a worker answers the true class more often than any other.  A worker
        with few answers then stays close to "better than chance" instead of being fitted
        to its handful of answers, which stops the classic collapse of EM on sparse
        many-class data (one or two answers per task), where nearly unconstrained
        confusions let EM explain everything by one class.  Workers with many answers are
        hardly affected.  The default was chosen on simulated crowds (sparse workers, many
        classes, spammers, asymmetric confusions, class imbalance;
        ``benchmarks/tune_defaults.py``), not on the real benchmark sets; use 0 for the
        maximum-likelihood estimator of the paper.
    prior_alpha : float, default 1.0
        Dirichlet pseudo-count for the class prior ``pi``.
    backend : {"auto", "numpy", "numba"}
        Kernel back end (see :mod:`crowdlearn.core.kernels`).
    random_state : int, default 0
        Seed of the tie-breaking rule.
    n_jobs : int, optional
        Threads for the numba back end's E- and M-step passes (scikit-learn's convention:
        None means 1, -1 every usable core; capped at the usable cores).  Each thread takes a
        block of tasks and, in the M-step, its own (W*K x K) count table (memory grows by one
        table per thread).  The posteriors of an E-step are the same for any ``n_jobs``; the
        M-step counts differ only in float rounding (about 1e-7 relative from
        ``kernels.FLOAT32_MIN_LABELS`` answers on, 1e-16 below), and a fit is reproducible
        for a given ``n_jobs`` on a given machine (-1 depends on its core count).
        The passes are bound by memory access, which cores share, so threads help less than
        their number suggests (benchmarks/RESULTS.md, section 2).

    Attributes
    ----------
    confusions_ : ndarray (n_workers, n_classes, n_classes)
        ``confusions_[w, true, answered]``; rows sum to 1.
    priors_ : Series, class -> prior probability.
    skills_ : Series, worker -> expected accuracy ``sum_j pi_j confusions_[w, j, j]``.
    history_ : list of float
        Marginal log-likelihood of the answers after each E-step.

    Notes
    -----
    ``partial_fit(batch)`` updates the model online by stepwise EM
    (:mod:`crowdlearn.aggregation.online`); the one-coin and class-conditional variants
    inherit it.  ``fit(labels, init=...)`` accepts initial posteriors (n_tasks x n_classes); the default
    initialisation is the soft majority vote.  ``fit(labels, confusion_prior=A)`` adds the
    pseudo-counts ``A`` (K x K or W x K x K, same orientation) to the M-step, which is how
    known worker confusions are used as priors.
    """

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), accepts_init=True)

    def __init__(
        self,
        max_iter: int = 100,
        tol: float = 1e-7,
        alpha: float = 0.0,
        diag_alpha: float = 4.0,
        prior_alpha: float = 1.0,
        backend: str = "auto",
        random_state: int | None = 0,
        n_jobs: int | None = None,
    ) -> None:
        self.max_iter = max_iter
        self.tol = tol
        self.alpha = alpha
        self.diag_alpha = diag_alpha
        self.prior_alpha = prior_alpha
        self.backend = backend
        self.random_state = random_state
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------ fit
    def fit(self, labels: Any, *, gold: Any = None, init: Any = None, confusion_prior: Any = None,
            verbose: bool | None = None, callback: Any = None):
        self._confusion_prior = None if confusion_prior is None else np.asarray(confusion_prior, float)
        try:
            return super().fit(labels, gold=gold, init=init, verbose=verbose, callback=callback)
        finally:
            del self._confusion_prior

    def _fit(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None,
             max_iter: int | None = None, resume: bool = False) -> np.ndarray:
        # for a subclass running EM in stages: ``max_iter`` iterations in this call instead of
        # ``self.max_iter``; ``resume`` continues a run whose last E-step gave ``init`` (the
        # convergence test compares with the last objective of ``history_``, and ``n_iter_``
        # counts on), so that two stages give the same fit as one uninterrupted run
        k, m = data.n_classes, data.n_workers
        if self.max_iter < 0:
            raise ValueError(f"max_iter must be >= 0, got {self.max_iter}")
        max_iter = self.max_iter if max_iter is None else max_iter
        check_table_size(type(self).__name__, m, k)
        backend = kernels.resolve_backend(self.backend, data.n_labels)
        threads = kernels.resolve_n_jobs(self.n_jobs)
        pseudo = self._pseudo_counts(k, m)
        post = init if init is not None else vote_fractions(data)
        post = clamp_to_gold(post, gold)
        ll_prev = self.history_[-1] if resume and self.history_ else -np.inf
        n_answers = max(data.n_labels, 1)
        self.converged_ = False
        start_iter = self.n_iter_
        # reusable (W*K x K) count and (N x K) posterior outputs: at 10^7 answers, allocating
        # them afresh costs page faults every iteration (float32 / per-thread scratch tables
        # are still allocated per M-step)
        work = {"counts": None, "post": None}
        for it in range(max_iter):
            log_table, log_prior = self._m_step(data, post, pseudo, backend, work, threads)
            post, ll = kernels.estep(data, log_table, log_prior, backend, out=work["post"], n_threads=threads)
            work["post"] = post
            post = clamp_to_gold(post, gold)
            if self._record_iteration(ll, ll_prev, n_answers):
                break
            ll_prev = ll
        if self.n_iter_ == start_iter:  # no iteration ran: the parameters of the start
            log_table, log_prior = self._m_step(data, post, pseudo, backend)
        # the returned posteriors are the E-step of exactly these parameters, except when no
        # iteration ran (max_iter=0): then they are the start itself (majority vote, or
        # ``init``) and the parameters are those fitted to it
        self._log_table = log_table
        self._log_prior = log_prior
        self.confusions_ = confusions_from_log_table(log_table, m)
        prior = np.exp(log_prior)
        self.priors_ = pd.Series(prior, index=data.classes, name="prior")
        self.skills_ = pd.Series(expected_skills(self.confusions_, prior), index=data.workers, name="skill")
        return post

    def _pseudo_counts(self, k: int, m: int) -> np.ndarray:
        """Dirichlet pseudo-counts, (K x K) or (W x K x K), orientation [true, answered]."""
        pseudo = np.full((k, k), float(self.alpha)) + float(self.diag_alpha) * np.eye(k)
        extra = getattr(self, "_confusion_prior", None)
        if extra is not None:
            if extra.shape not in ((k, k), (m, k, k)):
                raise ValueError(
                    f"confusion_prior must have shape {(k, k)} or {(m, k, k)}, got {extra.shape}"
                )
            if np.any(extra < 0) or not np.all(np.isfinite(extra)):
                raise ValueError("confusion_prior must hold finite non-negative pseudo-counts")
            pseudo = pseudo + extra
        return pseudo

    def _m_step(self, data, post, pseudo, backend, work=None, threads=1):
        buf = None if work is None else work["counts"]
        counts, class_counts = kernels.mstep(data, post, backend, out=buf, n_threads=threads)  # (W*K obs, K true)
        if work is not None:
            work["counts"] = counts
        log_table = self._table_from_counts(counts, pseudo, backend)
        class_counts = class_counts + self.prior_alpha
        log_prior = np.log(np.maximum(class_counts / class_counts.sum(), _TINY))
        return log_table, log_prior

    def _table_from_counts(self, counts: np.ndarray, pseudo: np.ndarray, backend: str) -> np.ndarray:
        """(W*K answered, K true) soft counts -> the kernels' (W*K, K) log confusion table."""
        if backend == "numba" and type(self)._log_confusions is DawidSkene._log_confusions:
            kern = kernels.compiled_kernels()
            k = counts.shape[1]
            table = np.empty_like(counts)
            kern.confusion_table(counts, np.ascontiguousarray(pseudo.reshape(-1, k, k)), table)
            return np.log(table, out=table)
        m, k = counts.shape[0] // counts.shape[1], counts.shape[1]
        # a view in [w, true, answered] orientation; the element-wise operations of
        # _log_confusions keep the kernels' memory layout, so the reshape below copies nothing
        log_conf = self._log_confusions(counts.reshape(m, k, k).transpose(0, 2, 1), pseudo)
        return np.ascontiguousarray(log_conf.transpose(0, 2, 1).reshape(m * k, k))

    def _log_confusions(self, counts: np.ndarray, pseudo: np.ndarray) -> np.ndarray:
        """Full confusion rows: (counts + pseudo) normalised over the answered axis."""
        num = np.add(counts, pseudo, out=np.empty_like(counts))  # laid out like ``counts``
        den = num.sum(axis=2, keepdims=True)
        np.divide(num, den, out=num, where=den > 0)
        empty = den <= 0
        if empty.any():  # a row with no mass (never saw that class, no smoothing): uniform
            num[np.broadcast_to(empty, num.shape)] = 1.0 / counts.shape[2]
        np.maximum(num, _TINY, out=num)
        return np.log(num, out=num)

    # ------------------------------------------------------------- predict



class _SymmetricErrorsDawidSkene(DawidSkene):
    """Dawid-Skene with a worker's errors spread evenly over the wrong classes.

    ``confusions_[w, j, j] = p_{w,j}`` and ``confusions_[w, j, l] = (1 - p_{w,j}) / (K - 1)``
    for ``l != j``: the E-step is Dawid-Skene's, the M-step estimates only the accuracies
    (:meth:`_accuracies`, one per worker or one per worker and true class).  ``alpha`` is the
    pseudo-count of each of "right" and "wrong" (a symmetric Beta prior on the accuracy) and
    ``diag_alpha`` an extra pseudo-count on "right".  The shared base of
    :class:`OneCoinDawidSkene` and :class:`ClassConditionalDawidSkene`.
    """

    def __init__(
        self,
        max_iter: int = 100,
        tol: float = 1e-7,
        alpha: float = 1.0,
        diag_alpha: float = 1.0,
        prior_alpha: float = 1.0,
        backend: str = "auto",
        random_state: int | None = 0,
        n_jobs: int | None = None,
    ) -> None:
        super().__init__(max_iter, tol, alpha, diag_alpha, prior_alpha, backend, random_state, n_jobs)

    def _accuracies(self, counts: np.ndarray) -> np.ndarray:
        """MAP accuracies ``p`` (W, K) from the soft counts ``counts[w, true, answered]``."""
        raise NotImplementedError  # pragma: no cover - abstract

    def _log_confusions(self, counts, pseudo):
        return _coin_log_confusions(self._accuracies(counts), counts.shape[1])


class OneCoinDawidSkene(_SymmetricErrorsDawidSkene):
    """One-coin Dawid-Skene: worker ``w`` is right with probability ``p_w``.

    ``confusions_[w] = p_w I + (1 - p_w) / (K - 1) (11^T - I)``; the M-step is
    ``p_w = (correct_w + alpha_c) / (answers_w + alpha_c + alpha_e)`` with ``correct_w`` the
    posterior mass on w's answers.  ``alpha`` here is the pseudo-count for each of "right"
    and "wrong" (a symmetric Beta prior on ``p_w``) and ``diag_alpha`` (default 1) an extra
    pseudo-count on "right": the prior belief that workers beat chance.

    Why the extra count: relabelling the classes by a permutation while reflecting every
    ``p_w`` leaves the likelihood unchanged, so the uninformative point (``p_w = 1/2`` for
    K = 2, posteriors = class prior) is a fixed point of EM, and a symmetric prior alone pulls
    towards it.  With a few answers per worker (a 3 x 3 crowd) EM ends there and a unanimous
    task becomes a coin flip; with ``diag_alpha > 0`` an uninformative posterior still gives
    ``p_w > 1/2``, so the answers carry evidence again.  With many answers per worker the
    pseudo-count is negligible.
    """

    def _accuracies(self, counts):
        k = counts.shape[1]
        a_right = self.alpha + self.diag_alpha
        right = np.einsum("wjj->w", counts) + a_right
        total = counts.sum(axis=(1, 2)) + a_right + self.alpha
        p = right / total
        return p[:, None] * np.ones((1, k))


class ClassConditionalDawidSkene(_SymmetricErrorsDawidSkene):
    """Class-conditional one-coin model: an accuracy ``p_{w,j}`` per worker and true class.

    ``confusions_[w, j, j] = p_{w,j}``, the remaining mass spread evenly over the other
    classes.  Sits between one-coin (too rigid) and full DS (too many parameters on sparse
    workers).  M-step: ``p_{w,j} = (correct_{w,j} + alpha + diag_alpha) / (answers_{w,j} +
    2 alpha + diag_alpha)`` with ``answers_{w,j}`` the posterior mass of class ``j`` on w's
    tasks; ``diag_alpha`` (default 1) keeps sparse accuracies above chance, as explained in
    :class:`OneCoinDawidSkene` (each ``p_{w,j}`` sees even fewer answers than ``p_w``).
    """

    def _accuracies(self, counts):
        a_right = self.alpha + self.diag_alpha
        right = np.einsum("wjj->wj", counts) + a_right
        total = counts.sum(axis=2) + a_right + self.alpha
        return right / total


def _coin_log_confusions(p: np.ndarray, k: int) -> np.ndarray:
    """log of ``diag(p_wj)`` with ``(1 - p_wj)/(K-1)`` off the diagonal, shape (W, K, K)."""
    m = p.shape[0]
    if k == 1:
        return np.zeros((m, 1, 1))
    p = np.clip(p, 1e-12, 1 - 1e-12)
    off = np.log((1.0 - p) / (k - 1))
    out = np.repeat(off[:, :, None], k, axis=2)
    idx = np.arange(k)
    out[:, idx, idx] = np.log(p)
    return out
