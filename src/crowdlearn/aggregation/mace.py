"""MACE: Multi-Annotator Competence Estimation, fitted by vectorised (variational) EM.

Model (Hovy, Berg-Kirkpatrick, Vaswani & Hovy, 2013, "Learning whom to trust with MACE",
NAACL-HLT)::

    T_n ~ Uniform(K)                      true label (``fit_priors=True``: T_n ~ Cat(pi))
    S_{n,w} ~ Bernoulli(1 - theta_w)      1 = worker w is spamming on task n
    A_{n,w} = T_n                         if S_{n,w} = 0 (the worker knows)
    A_{n,w} ~ Cat(xi_w)                   if S_{n,w} = 1 (the worker's spamming strategy)

so ``P(A = l | T = t) = theta_w [l = t] + (1 - theta_w) xi_{w,l}``.  ``theta_w`` is the
competence; a pure spammer has ``theta_w = 0`` whatever strategy it follows (always the same
class, or uniform guessing).

Training
--------
``method="vb"`` (the paper's recommended variant): mean-field variational Bayes with
``theta_w ~ Beta(alpha, beta)`` and ``xi_w ~ Dirichlet(strategy_prior)``.  The E-step uses
the geometric-mean weights ``exp E[log theta]`` etc.; ``history_`` is the evidence lower
bound (marginal log-likelihood under those weights minus the Beta and Dirichlet KL terms),
which never decreases.
``method="em"``: EM with ``smoothing`` added to the fractional counts (MACE's default
``0.01 / K``; ``smoothing=0`` is plain maximum likelihood); ``history_`` is the marginal
log-likelihood plus the matching log prior density.

Both run ``n_restarts`` times from random parameters (as MACE does) and keep the run with the
best final objective.  All statistics are per-answer gathers and ``np.bincount`` sums: with
``r_i = q_n(l_i)`` and ``P(knows | A = l, T = l) = theta / (theta + (1 - theta) xi_l)``, which
depends on (worker, label) only, the expected "knows" counts and the strategy counts are one
bincount over ``worker * K + label``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
from scipy.special import digamma, gammaln

from ..core import kernels
from ..core.base import Tags, resolve_random_state
from ..core.data import CrowdLabels
from .base import BaseAggregator
from ..core.stats import beta_expected_logs, beta_kl, clamp_to_gold, dirichlet_expected_log, dirichlet_kl
from .glad import coin_estep

__all__ = ["MACE"]

_TINY = 1e-300
_EPS = 1e-12


class MACE(BaseAggregator):
    """MACE: each worker either knows the answer or spams from its own label distribution.

    Parameters
    ----------
    n_restarts : int, default 10
        Number of runs from random starting parameters; the run with the best final
        objective is kept.
    max_iter : int, default 50
        Maximum (variational) EM iterations per run (MACE's default is 50).
    tol : float, default 1e-7
        Stop a run when its objective changes by less than ``tol`` per answer;
        ``tol=0`` runs exactly ``max_iter`` iterations, as the original tool does.
    method : {"vb", "em"}, default "vb"
        Variational Bayes with Beta/Dirichlet priors, or EM with additive smoothing.
    alpha, beta : float, default 0.5, 0.5
        ``theta_w ~ Beta(alpha, beta)``: ``alpha`` is the prior pseudo-count of "knows",
        ``beta`` of "spams" (VB only; MACE's defaults).
    strategy_prior : float, default 10.0
        Symmetric Dirichlet parameter of every strategy ``xi_w`` (VB only; MACE's default).
    smoothing : float or None, default None
        Added to the fractional counts in EM before normalising; ``None`` means MACE's
        ``0.01 / K``.
    default_noise : float, default 0.5
        Random starts draw every unnormalised parameter from ``U(1, 1 + default_noise)``.
    fit_priors : bool, default True
        Learn the class prior (Dirichlet(``prior_alpha``) under VB, MAP with that many
        pseudo-counts under EM) instead of the paper's uniform ``T_n``.  Helps on strongly
        imbalanced data, where a uniform prior sends uncertain tasks to the rare classes.
        Confirmed on simulated crowds (``benchmarks/tune_defaults.py``): equal elsewhere,
        much better on imbalanced crowds.
    prior_alpha : float, default 1.0
        Pseudo-count of every class when ``fit_priors`` is on.
    random_state : int, default 0
        Seed of the random starts and of the tie-breaking rule.  The starts are drawn per
        worker and class in the order of the sorted ids, so new ids (another sort order) act
        like another seed.
    backend : {"auto", "numpy", "numba"}, default "auto"
        "numba" runs the E-step (without gold) and the variational M-step as compiled loops
        over the answers and the workers (the same sums to rounding, faster, most of all
        when there are many workers); "auto" uses it from
        :data:`crowdlearn.core.kernels.NUMBA_MIN_LABELS` answers on when numba is installed.

    Attributes
    ----------
    skills_ : Series, worker -> theta_w = P(not spamming) (posterior mean under VB).
    spam_probabilities_ : Series, worker -> 1 - theta_w.
    strategies_ : DataFrame, workers x classes -> xi_{w,l}, the spamming distribution.
    priors_ : Series, class -> prior probability (1/K unless ``fit_priors``).
    history_ : list of float
        Objective per iteration of the kept run (ELBO for VB, MAP objective for EM).
    restart_objectives_ : list of float
        Final objective of every run; ``best_restart_`` is the index of the kept one.

    Notes
    -----
    ``fit(labels, init=...)`` turns the given posteriors into the first run's start (every
    answer that agrees with ``init`` counts as "knows" with that posterior probability);
    the other ``n_restarts - 1`` runs start at random.  ``gold`` tasks have their true label
    clamped during EM, which pins down the competence of the workers who answered them.
    """

    def __crowd_tags__(self) -> Tags:
        # random restarts depend on the order of workers and classes: relabelled data is asked
        # for the same labels, not identical posteriors
        return dataclasses.replace(super().__crowd_tags__(), accepts_init=True, stochastic=True, has_worker_model=True)

    def __init__(
        self,
        n_restarts: int = 10,
        max_iter: int = 50,
        tol: float = 1e-7,
        method: str = "vb",
        alpha: float = 0.5,
        beta: float = 0.5,
        strategy_prior: float = 10.0,
        smoothing: float | None = None,
        default_noise: float = 0.5,
        fit_priors: bool = True,
        prior_alpha: float = 1.0,
        random_state: int | None = 0,
        backend: str = "auto",
    ) -> None:
        self.n_restarts = n_restarts
        self.max_iter = max_iter
        self.tol = tol
        self.method = method
        self.alpha = alpha
        self.beta = beta
        self.strategy_prior = strategy_prior
        self.smoothing = smoothing
        self.default_noise = default_noise
        self.fit_priors = fit_priors
        self.prior_alpha = prior_alpha
        self.random_state = random_state
        self.backend = backend

    # ------------------------------------------------------------------ fit
    def _check_params(self) -> None:
        if self.method not in ("vb", "em"):
            raise ValueError(f"method must be 'vb' or 'em', got {self.method!r}")
        if self.n_restarts < 1:
            raise ValueError(f"n_restarts must be >= 1, got {self.n_restarts}")
        if self.max_iter < 0:
            raise ValueError(f"max_iter must be >= 0, got {self.max_iter}")
        if self.method == "vb":
            for name in ("alpha", "beta", "strategy_prior"):
                v = getattr(self, name)
                if not (np.isfinite(v) and v > 0):
                    raise ValueError(f"{name} must be a positive finite number, got {v}")
        if self.smoothing is not None and not (np.isfinite(self.smoothing) and self.smoothing >= 0):
            raise ValueError(f"smoothing must be a finite number >= 0, got {self.smoothing}")
        if self.fit_priors and not (np.isfinite(self.prior_alpha) and self.prior_alpha >= 0
                                    and (self.prior_alpha > 0 or self.method == "em")):
            raise ValueError(f"prior_alpha must be > 0 (>= 0 for EM), got {self.prior_alpha}")
        if not (np.isfinite(self.default_noise) and self.default_noise >= 0):
            raise ValueError(f"default_noise must be a finite number >= 0, got {self.default_noise}")

    def _fit(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None) -> np.ndarray:
        self._check_params()
        m, k = data.n_workers, data.n_classes
        self._smoothing = 0.01 / k if self.smoothing is None else float(self.smoothing)
        ctx = AnswerKeys(data, gold)
        if kernels.resolve_backend(self.backend, data.n_labels) == "numba":
            ctx.kern = kernels.compiled_kernels()
            # the variational M-step's theta_w ~ Beta(know_w + a, spam_w + b) always has
            # know_w + spam_w = n_w: the digamma and log-gamma of n_w + a + b, once per fit
            total = ctx.n_w + float(self.alpha) + float(self.beta)
            ctx.totals = (digamma(total), gammaln(total))
        rng = resolve_random_state(self.random_state)
        n_answers = max(data.n_labels, 1)

        best = None
        self.restart_objectives_: list[float] = []
        for restart in range(int(self.n_restarts)):
            if restart == 0 and init is not None:
                # statistics as if every answer that agrees with the posterior were "known"
                init = clamp_to_gold(init.copy(), gold)
                stats = (
                    np.bincount(ctx.wl, weights=init.ravel()[ctx.task_label], minlength=m * k),
                    init.sum(axis=0),
                )
                tables, _ = self._m_step(ctx, stats)
            else:
                tables = self._random_tables(rng, m, k)
            post, obj, stats = self._e_step(ctx, tables)
            fitted_stats = None  # the statistics ``tables`` were computed from
            history: list[float] = []
            converged = False
            for it in range(int(self.max_iter)):
                tables, penalty = self._m_step(ctx, stats)
                fitted_stats = stats
                post, ll, stats = self._e_step(ctx, tables)
                obj = ll + penalty
                history.append(obj)
                self._progress_step(obj)
                if self.tol > 0 and it > 0 and abs(history[-1] - history[-2]) / n_answers < self.tol:
                    converged = True
                    break
            self.restart_objectives_.append(float(obj))
            if best is None or obj > best["obj"]:
                best = dict(
                    obj=obj, post=post, tables=tables, stats=fitted_stats, history=history,
                    converged=converged, restart=restart,
                )

        self.history_ = best["history"]
        self.n_iter_ = len(best["history"])
        self.converged_ = best["converged"] or k == 1
        self.best_restart_ = best["restart"]
        self._tables = best["tables"]
        theta, xi, prior = self._point_estimates(ctx, best["stats"], best["tables"])
        self.skills_ = pd.Series(theta, index=data.workers, name="skill")
        self.spam_probabilities_ = pd.Series(1.0 - theta, index=data.workers, name="spam_probability")
        self.strategies_ = pd.DataFrame(
            xi, index=data.workers, columns=pd.Index(data.classes, name="answered")
        )
        self.priors_ = pd.Series(prior, index=data.classes, name="prior")
        return best["post"]

    # ------------------------------------------------------------ the steps
    # ``tables`` = (log_know (W,), log_spam (W,), log_xi (W, K), log_prior (K,)): probabilities
    # under EM, the weights exp E[log .] under VB.  ``stats`` = (expected "knows" count per
    # (worker, label), expected class counts).
    def _random_tables(self, rng, m: int, k: int):
        hi = 1.0 + float(self.default_noise)
        raw = rng.uniform(1.0, hi, size=(m, 2))
        raw /= raw.sum(axis=1, keepdims=True)
        xi = rng.uniform(1.0, hi, size=(m, k))
        xi /= xi.sum(axis=1, keepdims=True)
        return np.log(raw[:, 0]), np.log(raw[:, 1]), np.log(xi), np.full(k, -np.log(k))

    @staticmethod
    def _e_step(ctx: "AnswerKeys", tables):
        """Posteriors, marginal log-likelihood and the expected statistics."""
        log_know, log_spam, log_xi, log_prior = tables
        k = ctx.k
        if ctx.kern is not None and ctx.gold is None:  # the same sums in two compiled passes
            post, know_wl = np.empty((ctx.n, k)), np.empty(ctx.m * k)
            ll = ctx.kern.mace_estep(ctx.task, ctx.wl, ctx.label, ctx.n, log_know, log_spam,
                                     np.ascontiguousarray(log_xi), log_prior, post, know_wl)
            return post, ll, (know_wl, post.sum(axis=0))
        log_u = (log_spam[:, None] + log_xi).ravel()  # log P(answer l, spamming)
        log_v = np.logaddexp(log_u, np.repeat(log_know, k))  # log P(answer l | truth l)
        base = log_u[ctx.wl]
        post, ll = coin_estep(
            ctx.task, ctx.task_label, ctx.n, k, base, log_v[ctx.wl] - base, log_prior, ctx.gold,
        )
        # P(knows | answer l, truth l) depends on (worker, label) only
        q_wl = np.bincount(ctx.wl, weights=post.ravel()[ctx.task_label], minlength=ctx.m * k)
        know_wl = q_wl * np.exp(np.repeat(log_know, k) - log_v)
        return post, ll, (know_wl, post.sum(axis=0))

    def _counts(self, ctx: "AnswerKeys", stats):
        know_wl = np.minimum(stats[0], ctx.n_wl)
        know = know_wl.reshape(ctx.m, ctx.k).sum(axis=1)
        spam = np.maximum(ctx.n_w - know, 0.0)
        strat = (ctx.n_wl - know_wl).reshape(ctx.m, ctx.k)
        return know, spam, strat, stats[1]

    def _m_step(self, ctx: "AnswerKeys", stats):
        """New ``tables`` and the prior term of the objective."""
        k = ctx.k
        classes = stats[1]
        if self.method == "vb":
            a, b, g = float(self.alpha), float(self.beta), float(self.strategy_prior)
            if ctx.kern is not None:  # the same per-worker terms in one compiled pass
                log_know, log_spam, log_xi = np.empty(ctx.m), np.empty(ctx.m), np.empty((ctx.m, k))
                penalty = ctx.kern.mace_vb_mstep(stats[0], ctx.n_wl, a, b, g, *ctx.totals,
                                                 log_know, log_spam, log_xi)
            else:
                know, spam, strat, _ = self._counts(ctx, stats)
                a1, b1, c1 = know + a, spam + b, strat + g
                log_know, log_spam = beta_expected_logs(a1, b1)
                log_xi = dirichlet_expected_log(c1)
                penalty = -float(beta_kl(a1, b1, a, b, (log_know, log_spam)).sum() + dirichlet_kl(c1, g, log_xi).sum())
            if self.fit_priors:
                pa = float(self.prior_alpha)
                d1 = classes + pa
                log_prior = dirichlet_expected_log(d1)
                penalty -= float(dirichlet_kl(d1, pa, log_prior))
            else:
                log_prior = ctx.log_prior
        else:
            know, _, strat, _ = self._counts(ctx, stats)
            s = self._smoothing
            theta = np.clip((know + s) / (ctx.n_w + 2 * s), _EPS, 1 - _EPS)
            num = strat + s
            den = num.sum(axis=1, keepdims=True)
            xi = np.where(den > 0, num / np.where(den > 0, den, 1.0), 1.0 / k)
            log_know, log_spam = np.log(theta), np.log1p(-theta)
            log_xi = np.log(np.maximum(xi, _TINY))
            penalty = s * float(log_know.sum() + log_spam.sum() + log_xi.sum()) if s > 0 else 0.0
            if self.fit_priors:
                pa = float(self.prior_alpha)
                counts = classes + pa
                log_prior = np.log(np.maximum(counts / counts.sum(), _TINY))
                penalty += pa * float(log_prior.sum())
            else:
                log_prior = ctx.log_prior
        return (log_know, log_spam, log_xi, log_prior), penalty

    def _point_estimates(self, ctx, stats, tables):
        """theta, xi and the class prior to report: posterior means under VB, else the EM values."""
        if self.method == "vb" and stats is not None:
            know, spam, strat, classes = self._counts(ctx, stats)
            theta = (know + self.alpha) / (know + spam + self.alpha + self.beta)
            c1 = strat + self.strategy_prior
            xi = c1 / c1.sum(axis=1, keepdims=True)
            if self.fit_priors:
                d1 = classes + self.prior_alpha
                return theta, xi, d1 / d1.sum()
            return theta, xi, np.exp(ctx.log_prior)
        log_know, _, log_xi, log_prior = tables
        xi = np.exp(log_xi)
        prior = np.exp(log_prior)
        return np.exp(log_know), xi / xi.sum(axis=1, keepdims=True), prior / prior.sum()

    # ------------------------------------------------------------- predict
    def _predict_proba_codes(self, data: CrowdLabels) -> np.ndarray:
        post, _, _ = self._e_step(AnswerKeys(data, None), self._tables)
        return post


class AnswerKeys:
    """Integer keys and counts shared by every iteration of one fit (``task``, ``label``,
    ``task_label``, ``wl`` = worker * K + label, per (worker, label) and per worker answer
    counts ``n_wl``, ``n_w``, the uniform ``log_prior``); also the E-step's view of one
    partition in :mod:`crowdlearn.scale`."""

    def __init__(self, data: CrowdLabels, gold: np.ndarray | None) -> None:
        self.n, self.m, self.k = data.n_tasks, data.n_workers, data.n_classes
        self.task = data.task.astype(np.intp)
        self.task_label = self.task * self.k + data.label
        self.label = data.label.astype(np.intp)
        self.wl = data.worker.astype(np.intp) * self.k + data.label
        self.n_wl = np.bincount(self.wl, minlength=self.m * self.k).astype(np.float64)
        self.n_w = self.n_wl.reshape(self.m, self.k).sum(axis=1)
        self.log_prior = np.full(self.k, -np.log(self.k))
        self.gold = gold
        #: the compiled loops (:mod:`crowdlearn.core.compiled`) when the fit runs on numba, and
        #: the per-worker constants of its variational M-step (both set by :meth:`MACE._fit`)
        self.kern = None
        self.totals = None
