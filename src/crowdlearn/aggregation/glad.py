"""GLAD: Generative model of Labels, Abilities and Difficulties, fitted by vectorised EM.

Model (Whitehill, Ruvolo, Wu, Bergsma & Movellan, 2009, "Whose vote should count more:
optimal integration of labels from labelers of unknown expertise", NIPS 22)::

    y_n ~ Cat(pi)
    P(answer_{n,w} = y_n)      = sigmoid(alpha_w * beta_n)
    P(answer_{n,w} = l != y_n) = (1 - sigmoid(alpha_w * beta_n)) / (K - 1)

``alpha_w`` in R is the worker's ability: ``sigmoid(alpha_w)`` is its accuracy on a task
with ``beta = 1``, so chance level is ``alpha = logit(1/K)`` (0 for two classes, about -1.1
for four) and lower values mean systematic errors.  ``beta_n = exp(log_beta_n) > 0`` is the
task's *inverse* difficulty (large = easy; as ``beta -> 0`` every answer is right with
probability 1/2 whoever gives it).  Gaussian priors
``alpha_w ~ N(alpha_prior_mean, alpha_prior_var)`` and
``log_beta_n ~ N(log_beta_prior_mean, log_beta_prior_var)`` make the fit a MAP estimate.

EM (a generalised EM: the M-step improves, not necessarily maximises, its objective)
---------------------------------------------------------------------------------------
With ``p_i = q_{task_i}(label_i)`` the posterior probability that answer ``i`` is right and
``x_i = alpha_{w_i} beta_{n_i}``, the expected complete log-likelihood is, up to constants,
``sum_i [p_i x_i - softplus(x_i)]``: a logistic regression with soft targets.  For fixed
``beta`` it separates into one concave 1-D problem per worker, for fixed ``alpha`` into one
1-D problem per task, so the M-step alternates a safeguarded Newton step on all abilities
with a safeguarded Fisher-scoring step on all ``log beta`` (``m_step_max_iter`` rounds,
warm-started).  Both steps only raise the objective, so ``history_`` never decreases.
(Whitehill et al. and crowd-kit run a generic gradient optimiser on the joint vector; the
separable steps reach the same stationary point, each costing two passes over the answers.)

Every pass over the L answers is a gather plus ``np.bincount``: no Python loop over answers,
tasks or workers, no pandas.  The E-step: with ``c = log(K - 1)``, answer ``i`` adds
``-softplus(x_i) - c`` to every class of its task and ``x_i + c`` more to the class it
names, so the logits are two bincounts.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ..core.base import Tags
from ..core.data import CrowdLabels
from ..core.ids import positions_by_value
from ..core.stats import clamp_to_gold, vote_fractions
from .base import BaseAggregator
from .online import TASK_RESULTS, OnlineState, row_softmax

__all__ = ["GLAD", "coin_estep", "newton_block", "softplus", "LOG_BETA_BOUND"]

_TINY = 1e-300
#: log beta is kept in [-LOG_BETA_BOUND, LOG_BETA_BOUND] (beta in [2e-9, 5e8])
LOG_BETA_BOUND = 20.0


def softplus(x: np.ndarray) -> np.ndarray:
    """``log(1 + exp(x))`` without overflow."""
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0.0)


def newton_block(theta, group, size, p_right, x, sp, dx, x_at, mu, var, lo, hi, max_halvings=30):
    """One safeguarded second-order ascent step on many separable 1-D problems.

    Maximises, for every group ``g`` (a worker or a task) independently,
    ``f_g(theta_g) = sum_{i in g} [p_i x_i - softplus(x_i)] - (theta_g - mu)^2 / (2 var)``.
    ``x``, ``sp = softplus(x)`` and ``dx = dx/dtheta`` are the per-answer values at ``theta``;
    ``x_at(new)`` recomputes ``x``.  The curvature is the Gauss-Newton one,
    ``sum sigma (1 - sigma) dx^2 + 1/var > 0`` (exact for ``alpha``), so the step ascends;
    it is halved, per group, until ``f_g`` does not decrease (groups that never succeed keep
    their value).  Returns ``(new theta, largest move, x, softplus(x))`` at the new values.
    """
    s = np.exp(x - sp)  # sigmoid(x)
    dev = theta - mu
    f_old = np.bincount(group, weights=p_right * x - sp, minlength=size) - 0.5 * dev * dev / var
    grad = np.bincount(group, weights=(p_right - s) * dx, minlength=size) - dev / var
    s *= 1.0 - s
    s *= dx
    s *= dx
    curv = np.bincount(group, weights=s, minlength=size) + 1.0 / var
    new = np.clip(theta + grad / curv, lo, hi)
    step = new - theta
    for _ in range(max_halvings):
        x = x_at(new)
        sp = softplus(x)
        dev = new - mu
        f_new = np.bincount(group, weights=p_right * x - sp, minlength=size) - 0.5 * dev * dev / var
        bad = ~(f_new >= f_old - 1e-12 * (1.0 + np.abs(f_old)))
        if not bad.any():
            break
        step = np.where(bad, 0.5 * step, step)
        new = theta + step
    else:
        new = np.where(bad, theta, new)
        x = x_at(new)
        sp = softplus(x)
    return new, float(np.max(np.abs(new - theta), initial=0.0)), x, sp


def coin_estep(
    task: np.ndarray,
    task_label: np.ndarray,
    n_tasks: int,
    n_classes: int,
    base: np.ndarray,
    delta: np.ndarray,
    log_prior: np.ndarray,
    gold: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """Posteriors of models where answer ``i`` has log-likelihood ``base_i + delta_i [l_i = j]``.

    ``logits[n, j] = log_prior[j] + sum_{i in n} base_i + sum_{i in n, l_i = j} delta_i``;
    returns the row-normalised posteriors and the marginal log-likelihood (for gold tasks the
    joint log-likelihood with the gold class, their posterior being one-hot).
    ``task_label`` is ``task * K + label`` (int64).
    """
    k = n_classes
    # float even without answers (new tasks all answered by unseen workers): np.bincount of
    # an empty array is int64 whatever its weights, and the log prior could not be added
    logits = np.bincount(task_label, weights=delta, minlength=n_tasks * k).reshape(n_tasks, k).astype(float)
    logits += np.bincount(task, weights=base, minlength=n_tasks)[:, None]
    logits += log_prior
    top = logits.max(axis=1)
    post = np.exp(logits - top[:, None])
    total = post.sum(axis=1)
    post /= total[:, None]
    lse = top + np.log(total)
    if gold is not None:
        known = gold >= 0
        lse[known] = logits[known, gold[known]]
        clamp_to_gold(post, gold)
    return post, float(lse.sum())


class GLAD(OnlineState, BaseAggregator):
    """GLAD: worker ability times task easiness decides the chance of a right answer.

    Parameters
    ----------
    max_iter : int, default 100
        Maximum number of EM iterations.
    tol : float, default 1e-6
        Stop when the objective (``history_``) changes by less than ``tol`` per answer.
        ``tol=0`` runs exactly ``max_iter`` iterations.
    alpha_prior_mean, alpha_prior_var : float, default 1.0, 1.0
        Gaussian prior on every worker ability ``alpha_w``.
    log_beta_prior_mean, log_beta_prior_var : float, default 0.0, 1.0
        Gaussian prior on every ``log beta_n`` (beta = 1 is an "average" task).
    fit_priors : bool, default True
        Learn the class prior ``pi`` (MAP with ``prior_alpha``); False keeps it uniform, as
        in the paper.  With imbalanced classes the uniform prior pushes ambiguous tasks
        towards the rare classes; a learned prior can instead let the symmetric error model
        drift toward the majority class when workers are biased towards it.  The default
        was chosen on simulated crowds (``benchmarks/tune_defaults.py``), where the learned
        prior wins clearly on imbalanced crowds and costs under one point elsewhere.
    prior_alpha : float, default 1.0
        Dirichlet pseudo-count added to each class when learning ``pi`` (as in
        :class:`~crowdlearn.aggregation.dawid_skene.DawidSkene`).
    m_step_max_iter : int, default 2
        Rounds of (Newton step on every ``alpha``, Fisher-scoring step on every
        ``log beta``) per M-step.  Each round increases the EM objective, so few rounds
        suffice: EM repeats them, and more rounds per M-step mostly cost time.
    random_state : int, default 0
        Seed of the tie-breaking rule (the fit itself is deterministic).

    Attributes
    ----------
    skills_ : Series, worker -> alpha (ability; chance level is ``logit(1/K)``).
    difficulties_ : Series, task -> beta (the *inverse* difficulty; larger = easier).
    priors_ : Series, class -> prior probability.
    history_ : list of float
        The MAP objective after each E-step: marginal log-likelihood of the answers plus the
        log prior densities of ``alpha``, ``log beta`` and ``pi`` (up to constants).  It never
        decreases.
    n_iter_, converged_ : as in :class:`~crowdlearn.aggregation.base.BaseAggregator`.

    Notes
    -----
    ``fit(labels, gold=...)`` clamps the posterior of gold tasks to their class during EM,
    so they calibrate the abilities.  ``init`` gives the starting posteriors (default: the
    majority-vote shares); the first M-step starts from ``alpha = alpha_prior_mean`` and
    ``log beta = log_beta_prior_mean``.  ``predict_proba`` scores tasks with the fitted
    abilities; a task the fit never saw gets ``beta = exp(log_beta_prior_mean)`` (1 by
    default) and answers by unknown workers are ignored.
    """

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), accepts_init=True, has_worker_model=True)

    def __init__(
        self,
        max_iter: int = 100,
        tol: float = 1e-6,
        alpha_prior_mean: float = 1.0,
        alpha_prior_var: float = 1.0,
        log_beta_prior_mean: float = 0.0,
        log_beta_prior_var: float = 1.0,
        fit_priors: bool = True,
        prior_alpha: float = 1.0,
        m_step_max_iter: int = 2,
        random_state: int | None = 0,
    ) -> None:
        self.max_iter = max_iter
        self.tol = tol
        self.alpha_prior_mean = alpha_prior_mean
        self.alpha_prior_var = alpha_prior_var
        self.log_beta_prior_mean = log_beta_prior_mean
        self.log_beta_prior_var = log_beta_prior_var
        self.fit_priors = fit_priors
        self.prior_alpha = prior_alpha
        self.m_step_max_iter = m_step_max_iter
        self.random_state = random_state

    # ------------------------------------------------------------------ fit
    def _check_params(self) -> None:
        if self.max_iter < 0:
            raise ValueError(f"max_iter must be >= 0, got {self.max_iter}")
        if self.m_step_max_iter < 1:
            raise ValueError(f"m_step_max_iter must be >= 1, got {self.m_step_max_iter}")
        for name in ("alpha_prior_var", "log_beta_prior_var"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive finite number, got {v}")
        if not self.prior_alpha >= 0:
            raise ValueError(f"prior_alpha must be >= 0, got {self.prior_alpha}")

    def _fit(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None) -> np.ndarray:
        self._check_params()
        n, m, k = data.n_tasks, data.n_workers, data.n_classes
        task = data.task.astype(np.intp)
        worker = data.worker.astype(np.intp)
        task_label = task * k + data.label
        n_answers = max(data.n_labels, 1)

        alpha = np.full(m, float(self.alpha_prior_mean))
        log_beta = np.clip(np.full(n, float(self.log_beta_prior_mean)), -LOG_BETA_BOUND, LOG_BETA_BOUND)
        log_prior = np.full(k, -np.log(k))
        post = init if init is not None else vote_fractions(data)
        post = clamp_to_gold(post, gold)

        if k > 1:
            x = alpha[worker] * np.exp(log_beta)[task]
            sp = softplus(x)
            self.converged_ = False
            obj_prev = -np.inf
            for it in range(self.max_iter):
                # M-step: class prior in closed form, (alpha, log beta) by separable Newton steps
                log_prior = self._prior_step(post)
                p_right = post.ravel()[task_label]
                alpha, log_beta, x, sp = self._ability_step(alpha, log_beta, p_right, task, worker, x, sp)
                # E-step
                post, ll = self._estep(task, task_label, n, k, x, sp, log_prior, gold)
                obj = ll + self._log_prior_density(alpha, log_beta, log_prior)
                if self._record_iteration(obj, obj_prev, n_answers):
                    break
                obj_prev = obj
        else:  # one class: every answer is right, nothing to learn
            post = np.ones((n, 1))

        self._alpha = alpha
        self._log_beta = log_beta
        self._log_prior = log_prior
        self.skills_ = pd.Series(alpha, index=data.workers, name="skill")
        self.difficulties_ = pd.Series(np.exp(log_beta), index=data.tasks, name="beta")
        self.priors_ = pd.Series(np.exp(log_prior), index=data.classes, name="prior")
        return post

    def _prior_step(self, post: np.ndarray) -> np.ndarray:
        k = post.shape[1]
        if not self.fit_priors:
            return np.full(k, -np.log(k))
        counts = post.sum(axis=0) + self.prior_alpha
        return np.log(np.maximum(counts / counts.sum(), _TINY))

    def _log_prior_density(self, alpha: np.ndarray, log_beta: np.ndarray, log_prior: np.ndarray) -> float:
        out = -0.5 * float(np.sum((alpha - self.alpha_prior_mean) ** 2)) / self.alpha_prior_var
        out -= 0.5 * float(np.sum((log_beta - self.log_beta_prior_mean) ** 2)) / self.log_beta_prior_var
        if self.fit_priors:
            out += self.prior_alpha * float(log_prior.sum())
        return out

    @staticmethod
    def _estep(task, task_label, n, k, x, sp, log_prior, gold):
        c = np.log(k - 1)
        return coin_estep(task, task_label, n, k, -sp - c, x + c, log_prior, gold)

    def _ability_step(self, alpha, log_beta, p_right, task, worker, x, sp):
        """Improve ``sum_i [p_i x_i - softplus(x_i)]`` + the Gaussian log priors.

        Alternates one safeguarded Newton step on every ``alpha_w`` (``log beta`` fixed: the
        problem is separable and concave per worker) with one safeguarded Fisher-scoring step
        on every ``log beta_n`` (``alpha`` fixed: separable per task), ``m_step_max_iter``
        times.  Steps are halved for exactly the workers/tasks whose own objective term would
        decrease, so every round increases the M-step objective (a generalised EM).
        ``x = alpha[worker] * beta[task]`` and ``sp = softplus(x)`` come in and go out.
        """
        m, n = len(alpha), len(log_beta)
        mu_a, var_a = float(self.alpha_prior_mean), float(self.alpha_prior_var)
        mu_b, var_b = float(self.log_beta_prior_mean), float(self.log_beta_prior_var)
        beta_t = np.exp(log_beta)[task]
        for _ in range(int(self.m_step_max_iter)):
            alpha, moved_a, x, sp = newton_block(
                alpha, worker, m, p_right, x, sp, beta_t,
                lambda a: a[worker] * beta_t, mu_a, var_a, -np.inf, np.inf,
            )
            a_t = alpha[worker]
            log_beta, moved_b, x, sp = newton_block(
                log_beta, task, n, p_right, x, sp, x,
                lambda u: a_t * np.exp(u)[task], mu_b, var_b, -LOG_BETA_BOUND, LOG_BETA_BOUND,
            )
            beta_t = np.exp(log_beta)[task]
            if max(moved_a, moved_b) < 1e-6:
                break
        return alpha, log_beta, x, sp

    # -------------------------------------------------------------- online
    _online_lazy = {**TASK_RESULTS, **{name: "_online_worker_model" for name in ("skills_", "workers_", "_alpha")},
                    **{name: "_online_difficulties" for name in ("difficulties_", "_log_beta")}}

    def partial_fit(self, labels, *, classes=None, step_power: float = 1.0, step_offset: float = 4.0,
                    inner_iter: int = 5) -> "GLAD":
        """Update the model with one batch of answers: stepwise EM (new tasks and workers allowed).

        GLAD's M-step has no closed form, so the statistics kept are those of its
        Gauss-Newton (IRLS) surrogate, which are sums over answers: per worker
        ``H_w = sum_i h_i`` and ``Z_w = sum_i (h_i alpha_w + g_i)`` with ``g_i``, ``h_i`` the
        gradient and curvature of answer ``i``'s expected log-likelihood in ``alpha_w``
        (``g_i = (p_i - s_i) beta``, ``h_i = s_i (1 - s_i) beta^2``, ``s_i = sigmoid(x_i)``).
        They are averaged per answer by stepwise EM exactly as Dawid-Skene's counts are
        (:mod:`crowdlearn.aggregation.online`: ``s_t = (1 - eta_t) s_{t-1} + eta_t s_hat``), and
        the abilities are the surrogate's maximiser with the Gaussian prior,
        ``alpha_w = (N Z_w + mu / var) / (N H_w + 1 / var)`` (``N`` answers seen).  A task's
        ``log beta`` is fitted the same way from its own answers, whose surrogate sums are
        kept per task (a task is not averaged over the stream: its sums are exact).  State:
        two numbers per worker, two plus K per task; never the answers.

        Parameters are those of :meth:`DawidSkene.partial_fit
        <crowdlearn.aggregation.online.StepwiseEM.partial_fit>`, with its defaults: they
        were tuned for Dawid-Skene on simulated crowds and not re-tuned for GLAD.  After each
        call ``probas_``/``labels_`` cover every task seen; a batch with no answer changes
        nothing.
        """
        self._check_params()
        if self._online_empty(labels):
            return self
        st = self._online_start(labels, classes, step_power, step_offset)
        k = len(st["classes"])
        batch = self._online_batch(labels, st["classes"])
        rows, t_global, eta = self._online_codes(st, batch, width=1, columns=2)
        if "task_stat" not in st:
            st["task_stat"] = np.zeros((0, 2))
        n_tasks = len(st["task_ids"])
        if len(st["task_stat"]) < n_tasks:  # same capacity as the evidence
            grown = np.zeros((len(st["evidence"]), 2))
            grown[:len(st["task_stat"])] = st["task_stat"]
            st["task_stat"] = grown
        mu_a, var_a = float(self.alpha_prior_mean), float(self.alpha_prior_var)
        mu_b, var_b = float(self.log_beta_prior_mean), float(self.log_beta_prior_var)
        old = st["scale"] * st["raw"][rows]  # (batch workers, 2): per-answer H, Z
        past_task = st["task_stat"][t_global]
        n_now = st["n_seen"] + batch.n_labels
        alpha = self._online_alpha(old, st["n_seen"], mu_a, var_a)
        log_beta = self._online_log_beta(past_task, mu_b, var_b)
        log_prior = self._online_log_prior(st["prior_stat"], st["n_seen"], k)
        task = batch.task.astype(np.intp)
        worker = batch.worker.astype(np.intp)
        cell = task * k + batch.label
        past = st["evidence"][t_global]
        c = np.log(k - 1) if k > 1 else 0.0
        stat, prior_stat, task_new = old, st["prior_stat"], past_task
        for _ in range(max(1, int(inner_iter))):
            beta_t = np.exp(log_beta)[task]
            x = alpha[worker] * beta_t
            sp = softplus(x)
            logit = np.bincount(cell, weights=x + c, minlength=batch.n_tasks * k).reshape(batch.n_tasks, k)
            logit += np.bincount(task, weights=-sp - c, minlength=batch.n_tasks)[:, None]
            post = row_softmax(logit + log_prior + past)
            # the surrogate's sums for the abilities at the current point
            p = post.ravel()[cell]
            sig = np.exp(x - sp)
            h = sig * (1.0 - sig) * beta_t * beta_t
            z = h * alpha[worker] + (p - sig) * beta_t
            s_hat = np.column_stack([np.bincount(worker, weights=h, minlength=batch.n_workers),
                                     np.bincount(worker, weights=z, minlength=batch.n_workers)]) / batch.n_labels
            stat = (1.0 - eta) * old + eta * s_hat
            prior_stat = (1.0 - eta) * st["prior_stat"] + eta * post.mean(axis=0)
            alpha = self._online_alpha(stat, n_now, mu_a, var_a)
            log_prior = self._online_log_prior(prior_stat, n_now, k)
            # and for each task's log beta, at the new abilities: its past sums plus this batch's
            x = alpha[worker] * beta_t
            sig = np.exp(x - softplus(x))
            h_u = sig * (1.0 - sig) * x * x
            z_u = h_u * log_beta[task] + (p - sig) * x
            task_new = past_task + np.column_stack([np.bincount(task, weights=h_u, minlength=batch.n_tasks),
                                                    np.bincount(task, weights=z_u, minlength=batch.n_tasks)])
            log_beta = self._online_log_beta(task_new, mu_b, var_b)
        # each task's evidence is frozen with the parameters the batch ended with
        x = alpha[worker] * np.exp(log_beta)[task]
        sp = softplus(x)
        ev = np.bincount(cell, weights=x + c, minlength=batch.n_tasks * k).reshape(batch.n_tasks, k)
        ev += np.bincount(task, weights=-sp - c, minlength=batch.n_tasks)[:, None]
        self._online_commit(st, rows, stat, eta)
        st["prior_stat"] = prior_stat
        st["task_stat"][t_global] = task_new
        st["evidence"][t_global] += ev
        st["t"] += 1
        st["n_seen"] = n_now
        self._log_prior = self._online_log_prior(prior_stat, n_now, k)
        self.priors_ = pd.Series(np.exp(self._log_prior), index=st["classes"], name="prior")
        self.classes_ = st["classes"]
        self.history_, self.n_iter_, self.converged_ = [], st["t"], False
        self._online_forget()
        return self

    @staticmethod
    def _online_alpha(stat: np.ndarray, n_seen: int, mu: float, var: float) -> np.ndarray:
        """Abilities maximising the stepwise surrogate plus the Gaussian prior."""
        return (n_seen * stat[:, 1] + mu / var) / (n_seen * stat[:, 0] + 1.0 / var)

    @staticmethod
    def _online_log_beta(task_stat: np.ndarray, mu: float, var: float) -> np.ndarray:
        return np.clip((task_stat[:, 1] + mu / var) / (task_stat[:, 0] + 1.0 / var), -LOG_BETA_BOUND, LOG_BETA_BOUND)

    def _online_log_prior(self, prior_stat: np.ndarray, n_seen: int, k: int) -> np.ndarray:
        if not self.fit_priors:
            return np.full(k, -np.log(k))
        prior = prior_stat * max(n_seen, 1) + self.prior_alpha
        return np.log(prior / prior.sum())

    def _online_worker_model(self, st: dict) -> None:
        m = len(st["worker_ids"])
        self._alpha = self._online_alpha(st["scale"] * st["raw"][:m], st["n_seen"],
                                         float(self.alpha_prior_mean), float(self.alpha_prior_var))
        self.workers_ = st["worker_ids"].index().rename("worker")
        self.skills_ = pd.Series(self._alpha, index=self.workers_, name="skill")

    def _online_difficulties(self, st: dict) -> None:
        n = len(st["task_ids"])
        self._log_beta = self._online_log_beta(st["task_stat"][:n], float(self.log_beta_prior_mean),
                                               float(self.log_beta_prior_var))
        self.difficulties_ = pd.Series(np.exp(self._log_beta), index=st["task_ids"].index().rename("task"),
                                       name="beta")

    # ------------------------------------------------------------- predict
    def _predict_proba_codes(self, data: CrowdLabels) -> np.ndarray:
        k = data.n_classes
        if k == 1:
            return np.ones((data.n_tasks, 1))
        # a task of the fit keeps its difficulty when named by value (task "3" of a CSV is the
        # fit's task 3), as workers and classes are matched (align_to_fit)
        pos = positions_by_value(self.tasks_, data.tasks, "the fitted tasks")
        default = np.clip(float(self.log_beta_prior_mean), -LOG_BETA_BOUND, LOG_BETA_BOUND)
        log_beta = np.where(pos >= 0, self._log_beta[np.maximum(pos, 0)], default)
        task = data.task.astype(np.intp)
        x = self._alpha[data.worker] * np.exp(log_beta)[task]
        post, _ = self._estep(task, task * k + data.label, data.n_tasks, k, x, softplus(x), self._log_prior, None)
        return post
