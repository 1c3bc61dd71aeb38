"""Ordinal Dawid-Skene: confusion rows of a discretised latent grade with worker bias and spread.

Model.  Classes are ranks ``j = 0..K-1`` (:func:`crowdlearn.ordinal.base.ordinal_order`).
Worker ``w`` perceives the true grade with a bias ``b_w`` and a spread ``s_w > 0``,
``z = j + b_w + s_w * eps`` with ``eps`` standard logistic (or normal), and answers the class
whose interval of thresholds ``c_{-1} = -inf < c_0 < ... < c_{K-2} < c_{K-1} = +inf`` holds
``z``::

    P(answer = l | true j, w) = F((c_l - j - b_w) / s_w) - F((c_{l-1} - j - b_w) / s_w)

with ``F`` the logistic (``link="logit"``) or normal (``link="probit"``) distribution
function.  The thresholds are the midpoints ``c_l = l + 1/2`` (a worker without bias rounds
its perception to the nearest grade), or, with ``fit_thresholds=True``, shared thresholds
fitted with the workers (ordered by construction: ``c_l = c_{l-1} + exp(d_l)``).  Each
confusion row is thus a discretised logistic/normal around ``j + b_w``: 2 parameters per
worker instead of Dawid-Skene's K(K-1), and errors concentrate on neighbouring grades.

A worker may also answer without looking (``spam_prior``, on by default): with probability
``e_w`` it draws its answer from its own distribution ``r_w`` whatever the task, so that the
confusion row is ``(1 - e_w) P_ord(l | j, w) + e_w r_w(l)`` (the spamming component of MACE,
Hovy et al., 2013, NAACL).  Without it a worker who always gives the same grade is a
perfect worker of a crowd whose every task has that grade, and on real relevance crowds
(several such workers with thousands of answers) EM collapses onto one class.

This is the cumulative-link ("ordered probit/logit") observation model of McCullagh (1980,
"Regression models for ordinal data", JRSS B 42(2)) used as the worker model of Dawid and
Skene (1979); the latent-grade-with-bias-and-noise view of raters follows Raykar et al.
(2010, "Learning from crowds", JMLR 11, section 4) and the ordinal annotator models of
Lakshminarayanan and Teh (2013, "Inferring ground truth from multi-annotator ordinal
data: a probabilistic approach", arXiv:1305.0015).

Fitting.  MAP-EM.  The E-step is Dawid-Skene's (``q_n(j) ∝ pi_j prod P(answer | j, w)``,
:func:`crowdlearn.core.kernels.estep`); the M-step maximises, over ``(b_w, log s_w)`` of all
workers at once (and the thresholds), the expected log-likelihood
``sum_{w,j,l} C[w, j, l] log P(l | j, w)`` of the soft counts ``C`` (one pass over the
answers, :func:`crowdlearn.core.kernels.mstep`) plus the log-priors
``b_w ~ N(0, bias_sd^2)``, ``log s_w ~ N(log spread, log_spread_sd^2)``, by damped Newton steps
per worker (the objective is a sum over workers; all workers step at once, analytic
gradient, Hessian from its central differences); shared thresholds, when fitted, by L-BFGS-B
given the workers.  The M-step's cost is O(W K^2) per evaluation, independent of the number
of answers.  The class prior ``pi`` has a Dirichlet(``1 + prior_alpha``) prior.  With the spam component
each M-step is one generalised-EM step of the mixture: the share of each soft count due to
spam under the current parameters, ``e_w = (spam counts + a) / (counts + a + b)``,
``r_w ∝ spam counts + 1/2``, and the ordinal parameters fitted to the remaining counts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize, special

from ..aggregation.base import ConfusionAggregator
from ..core import kernels
from ..core.base import Tags
from ..core.data import CrowdLabels
from ..core.stats import clamp_to_gold, expected_skills, vote_fractions
from .base import OrdinalAggregator

__all__ = ["OrdinalDawidSkene", "ordinal_confusions"]

_TINY = 1e-300
#: prior standard deviation of a worker's log gaps between thresholds (worker_thresholds)
_GAP_SD = 0.5
_LINKS = ("logit", "probit")


def _cdf_pdf(u: np.ndarray, link: str) -> tuple[np.ndarray, np.ndarray]:
    if link == "logit":
        cdf = special.expit(u)
        return cdf, cdf * (1.0 - cdf)
    return special.ndtr(u), np.exp(-0.5 * u * u) / np.sqrt(2 * np.pi)


def _cells(bias: np.ndarray, spread: np.ndarray, thresholds: np.ndarray, link: str):
    """Per worker, true class and answered class: P, and the pieces of its gradient.

    Returns ``(p, fd, fud, fpad)``: ``p[w, j, l]``; ``fd = f(u_l) - f(u_{l-1})``;
    ``fud = f(u_l) u_l - f(u_{l-1}) u_{l-1}``; ``fpad[w, j, m]`` = f at threshold m (padded).
    """
    k = thresholds.shape[-1] + 1
    j = np.arange(k, dtype=np.float64)
    cuts = thresholds[None, None, :] if thresholds.ndim == 1 else thresholds[:, None, :]
    u = (cuts - j[None, :, None] - bias[:, None, None]) / spread[:, None, None]
    cdf, pdf = _cdf_pdf(u, link)
    w = len(bias)
    zeros = np.zeros((w, k, 1))
    cpad = np.concatenate([zeros, cdf, zeros + 1.0], axis=2)
    fpad = np.concatenate([zeros, pdf, zeros], axis=2)
    fupad = np.concatenate([zeros, pdf * u, zeros], axis=2)
    # a cell is F(upper) - F(lower); where F(lower) > 1/2 both are near 1 and the difference
    # loses its digits, so it is taken from the upper tails instead: S(lower) - S(upper),
    # S(u) = F(-u) (both links are symmetric)
    spad = np.concatenate([zeros + 1.0, _cdf_pdf(-u, link)[0], zeros], axis=2)
    p = np.where(cpad[:, :, :-1] > 0.5, spad[:, :, :-1] - spad[:, :, 1:], cpad[:, :, 1:] - cpad[:, :, :-1])
    p = np.maximum(p, 0.0)
    fd = fpad[:, :, 1:] - fpad[:, :, :-1]
    fud = fupad[:, :, 1:] - fupad[:, :, :-1]
    return p, fd, fud, fpad


def ordinal_confusions(bias: Any, spread: Any, thresholds: Any = None, n_classes: int | None = None,
                       link: str = "logit") -> np.ndarray:
    """The confusion matrices ``[w, true, answered]`` of the ordinal worker model.

    ``thresholds`` (K-1,) shared, or (W, K-1) per worker, default to the midpoints ``l + 1/2``
    of ``n_classes`` classes.  Used by the
    fit and by :mod:`crowdlearn.simulate.ordinal`, so that the planted and the fitted model
    are the same function.
    """
    bias = np.atleast_1d(np.asarray(bias, dtype=np.float64))
    spread = np.atleast_1d(np.asarray(spread, dtype=np.float64))
    if thresholds is None:
        if n_classes is None:
            raise ValueError("give thresholds or n_classes")
        thresholds = np.arange(n_classes - 1) + 0.5
    thresholds = np.asarray(thresholds, dtype=np.float64)
    if link not in _LINKS:
        raise ValueError(f"link must be one of {_LINKS}, got {link!r}")
    p = _cells(bias, spread, thresholds, link)[0]
    return p / p.sum(axis=2, keepdims=True)


class OrdinalDawidSkene(OrdinalAggregator, ConfusionAggregator):
    """Dawid-Skene with ordered-threshold confusions: a bias and a spread per worker.

    See the module docstring for the model and the fit.

    Parameters
    ----------
    link : {"logit", "probit"}, default "logit"
        Distribution of a worker's perception noise.
    fit_thresholds : bool, default False
        Fit thresholds shared by all workers instead of the midpoints ``l + 1/2``.
    worker_thresholds : bool, default False
        Give every worker its own thresholds: ``c_{w,0} = 1/2`` and gaps
        ``exp(g_{w,l})``, ``g_{w,l} ~ N(0, 0.5^2)`` (a worker may be strict about one grade
        and lenient about another; K - 2 more parameters per worker).
    bias_sd : float, default 1.0
        Prior standard deviation of a worker's bias, in classes.
    center_bias : bool or "auto", default "auto"
        After every M-step, subtract the median worker's bias from every bias, so that the
        median worker is unbiased.  The answers hold the latent scale's origin only up to a
        shift of every bias and every true grade, and the bias prior alone holds it weakly:
        with a declared grade that nobody answers (a Likert extreme) the whole crowd can
        drift by about half a grade, moving many labels by one.  The median, not the mean, so that
        workers who always give one grade do not pull it.  ``"auto"``: on with shared
        thresholds, off with ``worker_thresholds`` (whose first threshold per worker already
        anchors each worker, and where centring lost on every simulated scenario).
    spread : float, default 0.5
        Prior median of a worker's spread ``s_w``.
    log_spread_sd : float, default 1.0
        Prior standard deviation of ``log s_w``.
    min_spread : float, default 0.05
        Lower bound of ``s_w`` (a worker who never errs would otherwise drive it to 0).
    prior_alpha : float, default 1.0
        Dirichlet pseudo-count of the class prior.
    max_iter : int, default 100
        EM iterations at most.
    tol : float, default 1e-7
        Stop when the log-likelihood per answer improves by less than ``tol``.
    m_step_max_iter : int, default 50
        Newton iterations per M-step (warm-started from the previous M-step); also the
        L-BFGS-B iterations of the thresholds with ``fit_thresholds``.
    spam_prior : (a, b) or None, default (1.0, 9.0)
        Beta pseudo-counts of a worker's spam probability ``e_w`` (prior mean a / (a + b));
        None: no spam component.
    backend : {"auto", "numpy", "numba"}
        Back end of the E- and M-step passes over the answers (:mod:`crowdlearn.core.kernels`).
    classes : list, optional
        The classes from the lowest to the highest (default: :func:`ordinal_order`'s rule).
    random_state : int, default 0
        Seed of the tie-breaking rule.

    Attributes
    ----------
    bias_ : Series, worker -> b_w (classes; positive = answers too high)
    spread_ : Series, worker -> s_w
    spam_ : Series, worker -> e_w (0 without the spam component)
    thresholds_ : ndarray (K-1,)
    confusions_ : ndarray (n_workers, n_classes, n_classes)
        ``[w, true, answered]`` in the table's class order (``classes_``), rows sum to 1.
    priors_ : Series, class -> prior probability.
    skills_ : Series, worker -> expected accuracy.
    history_ : list of float
        Marginal log-likelihood after each E-step.

    The defaults (priors, bounds) were set on simulated crowds
    (:func:`crowdlearn.simulate.ordinal.ordinal_crowd`), not on the real sets.
    """

    def __init__(self, link: str = "logit", fit_thresholds: bool = False,
                 worker_thresholds: bool = False, bias_sd: float = 1.0, center_bias: Any = "auto",
                 spread: float = 0.5, log_spread_sd: float = 1.0, min_spread: float = 0.05,
                 prior_alpha: float = 1.0, max_iter: int = 100, tol: float = 1e-7,
                 m_step_max_iter: int = 50, spam_prior: tuple[float, float] | None = (1.0, 9.0),
                 backend: str = "auto", classes: Any = None, random_state: int | None = 0) -> None:
        self.link = link
        self.fit_thresholds = fit_thresholds
        self.worker_thresholds = worker_thresholds
        self.bias_sd = bias_sd
        self.center_bias = center_bias
        self.spread = spread
        self.log_spread_sd = log_spread_sd
        self.min_spread = min_spread
        self.prior_alpha = prior_alpha
        self.max_iter = max_iter
        self.tol = tol
        self.m_step_max_iter = m_step_max_iter
        self.spam_prior = spam_prior
        self.backend = backend
        self.classes = classes
        self.random_state = random_state

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), accepts_init=True, invariance_atol=1e-5)

    def _check_params_ordinal(self) -> None:
        if self.link not in _LINKS:
            raise ValueError(f"link must be one of {_LINKS}, got {self.link!r}")
        for name in ("bias_sd", "spread", "log_spread_sd", "min_spread"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float, np.number)) and np.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        if not (isinstance(self.center_bias, (bool, np.bool_)) or self.center_bias == "auto"):
            raise ValueError(f"center_bias must be True, False or 'auto', got {self.center_bias!r}")
        if self.fit_thresholds and self.worker_thresholds:
            raise ValueError("fit_thresholds and worker_thresholds exclude each other: "
                             "per-worker thresholds already move freely")
        if self.spam_prior is not None:
            prior = self.spam_prior
            ok = (isinstance(prior, (tuple, list)) and len(prior) == 2
                  and all(isinstance(v, (int, float, np.number)) and np.isfinite(v) and v > 0 for v in prior))
            if not ok:
                raise ValueError(f"spam_prior must be None or two pseudo-counts (a, b) > 0, got {prior!r}")
        if self.min_spread >= 10 * max(self.spread, 1e-12):
            raise ValueError(f"min_spread ({self.min_spread}) must be below 10 x spread ({self.spread})")

    # ------------------------------------------------------------------ fit
    def _fit_ordinal(self, data: CrowdLabels, gold: np.ndarray | None,
                     init: np.ndarray | None) -> np.ndarray:
        self._check_params_ordinal()
        k, m = data.n_classes, data.n_workers
        post = init if init is not None else vote_fractions(data)
        post = clamp_to_gold(post, gold)
        state = {
            # per worker (bias, log spread[, log gaps between its thresholds])
            "theta": np.column_stack([np.zeros(m), np.full(m, np.log(max(self.spread, self.min_spread)))]
                                     + [np.zeros(m)] * (max(k - 2, 0) if self.worker_thresholds else 0)),
            "thresholds": np.arange(k - 1) + 0.5,
            "deltas": np.zeros(max(k - 2, 0)),  # log gaps between thresholds (fit_thresholds)
            "eps": None,  # spam probability per worker (spam_prior)
            "spam": None,  # spam answer distribution per worker, (W, K)
        }
        ll_prev = -np.inf
        n_answers = max(data.n_labels, 1)
        backend = kernels.resolve_backend(self.backend, data.n_labels)
        self.converged_ = False
        log_table = log_prior = None
        for _ in range(self.max_iter):
            log_table, log_prior = self._m_step(data, post, state, backend)
            post, ll = kernels.estep(data, log_table, log_prior, backend)
            post = clamp_to_gold(post, gold)
            if self._record_iteration(ll, ll_prev, n_answers):
                break
            ll_prev = ll
        if log_table is None:  # max_iter = 0: the parameters of the initial posteriors
            log_table, log_prior = self._m_step(data, post, state, backend)
            post = clamp_to_gold(kernels.estep(data, log_table, log_prior, backend)[0], gold)
        theta = state["theta"]
        bias, spread = theta[:, 0], np.exp(theta[:, 1])
        conf_o = self._confusions(state, k)
        rank = self._rank  # table class code -> ordinal code
        # the worker model in the table's class order, for predict_proba and confusion()
        self.confusions_ = conf_o[:, rank][:, :, rank]
        lt = log_table.reshape(m, k, k)  # [w, answered, true], ordinal codes
        self._log_table = np.ascontiguousarray(lt[:, rank][:, :, rank].reshape(m * k, k))
        self._log_prior = log_prior[rank]
        prior = np.exp(self._log_prior)
        self.bias_ = pd.Series(bias, index=data.workers, name="bias")
        self.spread_ = pd.Series(spread, index=data.workers, name="spread")
        eps = np.zeros(m) if state["eps"] is None else state["eps"]
        self.spam_ = pd.Series(eps, index=data.workers, name="spam")
        self.thresholds_ = state["thresholds"]
        if self.worker_thresholds:
            self.worker_thresholds_ = pd.DataFrame(self._cuts(theta, state["thresholds"]), index=data.workers)
        self.priors_ = pd.Series(prior, index=self.order_.take(rank), name="prior")
        self.skills_ = pd.Series(expected_skills(self.confusions_, prior), index=data.workers,
                                 name="skill")
        return post

    def _ordinal_rows(self, state):
        theta = state["theta"]
        return ordinal_confusions(theta[:, 0], np.exp(theta[:, 1]), self._cuts(theta, state["thresholds"]),
                                  link=self.link)

    def _confusions(self, state, k):
        """``[w, true, answered]`` in ordinal codes: the ordinal rows, mixed with the spam
        distribution when ``spam_prior`` is set."""
        conf = self._ordinal_rows(state)
        if state["eps"] is not None:
            eps = state["eps"][:, None, None]
            conf = (1.0 - eps) * conf + eps * state["spam"][:, None, :]
        return conf

    def _m_step(self, data, post, state, backend="numpy"):
        k, m = data.n_classes, data.n_workers
        counts, class_counts = kernels.mstep(data, post, backend)  # (W*K answered, K true)
        counts = np.ascontiguousarray(counts.reshape(m, k, k).transpose(0, 2, 1))  # [w, true, ans]
        class_counts = class_counts + self.prior_alpha
        log_prior = np.log(np.maximum(class_counts / class_counts.sum(), _TINY))
        if k <= 1:
            return np.zeros((m * k, k)), log_prior
        if self.spam_prior is not None:
            # generalised EM step of the two-component mixture: share of each soft count due to
            # the spam component under the current parameters, then its closed-form update
            a, b = self.spam_prior
            if state["eps"] is None:
                state["eps"] = np.full(m, a / (a + b))
                marginal = counts.sum(axis=1) + 0.5
                state["spam"] = marginal / marginal.sum(axis=1, keepdims=True)
            ordinal = self._ordinal_rows(state)
            eps = state["eps"][:, None, None]
            spam_part = eps * state["spam"][:, None, :]
            share = spam_part / np.maximum((1.0 - eps) * ordinal + spam_part, _TINY)
            spam_counts = counts * share
            state["eps"] = (spam_counts.sum(axis=(1, 2)) + a) / (counts.sum(axis=(1, 2)) + a + b)
            r = spam_counts.sum(axis=1) + 0.5
            state["spam"] = r / r.sum(axis=1, keepdims=True)
            counts = counts - spam_counts
        theta, thresholds, deltas = state["theta"], state["thresholds"], state["deltas"]
        theta = self._newton_workers(theta, thresholds, counts)
        theta = self._centred(theta, counts)
        if self.fit_thresholds and k > 2:
            # shared thresholds given the workers (K-1 numbers), then the workers again
            x0 = np.concatenate([[thresholds[0]], deltas])
            bounds = [(-float(k), float(k))] + [(-5.0, 3.0)] * (k - 2)
            res = optimize.minimize(self._threshold_objective, x0, args=(theta, counts), jac=True,
                                    method="L-BFGS-B", bounds=bounds,
                                    options={"maxiter": int(self.m_step_max_iter), "gtol": 1e-10})
            deltas = res.x[1:]
            thresholds = _thresholds(res.x[0], deltas)
            theta = self._centred(self._newton_workers(theta, thresholds, counts), counts)
        state.update(theta=theta, thresholds=thresholds, deltas=deltas)
        log_conf = np.log(np.maximum(self._confusions(state, k), _TINY))  # [w, true, answered]
        log_table = np.ascontiguousarray(log_conf.transpose(0, 2, 1).reshape(m * k, k))
        return log_table, log_prior

    def _centred(self, theta, counts):
        """``theta`` with the median bias of the workers with answers moved to 0 (see
        ``center_bias``), within the biases' bounds."""
        has = counts.sum(axis=(1, 2)) > 0
        on = (not self.worker_thresholds) if self.center_bias == "auto" else bool(self.center_bias)
        if not on or not has.any():
            return theta
        k = counts.shape[1]
        theta = theta.copy()
        theta[:, 0] = np.clip(theta[:, 0] - np.median(theta[has, 0]), -float(k), float(k))
        return theta

    def _cuts(self, x, thresholds):
        """The thresholds of every worker: shared, or with ``worker_thresholds`` per worker
        ``c_{w,0} = c_0``, ``c_{w,l} = c_{w,l-1} + exp(x[w, l + 1])``."""
        if x.shape[1] == 2:
            return thresholds
        gaps = np.exp(x[:, 2:])
        return thresholds[0] + np.concatenate([np.zeros((len(x), 1)), np.cumsum(gaps, axis=1)], axis=1)

    def _worker_objective(self, x, thresholds, counts, need_grad=True):
        """Per worker: minus (expected log-likelihood + log-prior) of its parameters
        ``x[w] = (b_w, log s_w[, log gaps])``, the gradient (W x P) and the model's cells (for
        the gradient of shared thresholds)."""
        bias, rho = x[:, 0], x[:, 1]
        s = np.exp(rho)
        cuts = self._cuts(x, thresholds)
        p, fd, fud, fpad = _cells(bias, s, cuts, self.link)
        p_safe = np.maximum(p, _TINY)
        mu = np.log(max(self.spread, self.min_spread))
        obj = -np.sum(counts * np.log(p_safe), axis=(1, 2)) \
            + 0.5 * bias ** 2 / self.bias_sd ** 2 + 0.5 * (rho - mu) ** 2 / self.log_spread_sd ** 2
        if x.shape[1] > 2:
            obj = obj + 0.5 * np.sum(x[:, 2:] ** 2, axis=1) / _GAP_SD ** 2
        if not need_grad:
            return obj, None, None
        ratio = counts / p_safe
        g_b = np.sum(ratio * fd, axis=(1, 2)) / s + bias / self.bias_sd ** 2
        g_rho = np.sum(ratio * fud, axis=(1, 2)) + (rho - mu) / self.log_spread_sd ** 2
        grads = [g_b[:, None], g_rho[:, None]]
        if x.shape[1] > 2:
            # d(-log P_{jl}) / d c_{w,t} = -(f(u_t)[t == l] - f(u_t)[t == l-1]) / (s P)
            f = fpad[:, :, 1:-1]
            g_c = -np.einsum("wjt,wjt->wt", ratio[:, :, :-1] - ratio[:, :, 1:], f) / s[:, None]
            tail = np.cumsum(g_c[:, ::-1], axis=1)[:, ::-1][:, 1:]  # sum over t >= i
            grads.append(np.exp(x[:, 2:]) * tail + x[:, 2:] / _GAP_SD ** 2)
        return obj, np.concatenate(grads, axis=1), (ratio, fpad, s)

    def _newton_workers(self, x, thresholds, counts):
        """Minimise every worker's objective at once: damped Newton steps (P x P Hessians from
        central differences of the analytic gradient, Levenberg damping where not positive
        definite) with a per-worker backtracking line search, within the bounds; stops when
        no step moves a worker by more than 1e-10."""
        m, k = counts.shape[0], counts.shape[1]
        n_par = x.shape[1]
        lo = np.array([-float(k), np.log(self.min_spread)] + [-3.0] * (n_par - 2))
        hi = np.array([float(k), np.log(max(10.0 * k, 10.0 * self.spread))] + [2.0] * (n_par - 2))
        x = np.clip(x, lo, hi)
        h = 1e-5
        eye = np.eye(n_par)
        active = np.arange(m)  # workers still moving (the objective is separable)
        for _ in range(int(self.m_step_max_iter)):
            if not len(active):
                break
            xa, ca = x[active], counts[active]
            f0, g, _ = self._worker_objective(xa, thresholds, ca)
            hess = np.empty((len(active), n_par, n_par))
            for d in range(n_par):
                gp = self._worker_objective(xa + h * eye[d], thresholds, ca)[1]
                gm = self._worker_objective(xa - h * eye[d], thresholds, ca)[1]
                hess[:, :, d] = (gp - gm) / (2 * h)
            hess = 0.5 * (hess + hess.transpose(0, 2, 1))
            low = np.linalg.eigvalsh(hess)[:, 0]
            lam = np.where(low > 1e-8, 0.0, 1e-3 + np.abs(low) + 1e-3 * np.abs(hess).max(axis=(1, 2)))
            step = -np.linalg.solve(hess + lam[:, None, None] * eye, g[:, :, None])[:, :, 0]
            t = np.ones(len(active))
            todo = np.ones(len(active), dtype=bool)
            new = xa.copy()
            for _ in range(30):
                cand = np.clip(xa[todo] + t[todo, None] * step[todo], lo, hi)
                f1 = self._worker_objective(cand, thresholds, ca[todo], need_grad=False)[0]
                ok = f1 <= f0[todo] + 1e-12 * np.abs(f0[todo])
                idx = np.flatnonzero(todo)
                new[idx[ok]] = cand[ok]
                todo[idx[ok]] = False
                t[todo] *= 0.5
                if not todo.any():
                    break
            moved = np.abs(new - xa).max(axis=1)
            x[active] = new
            active = active[moved >= 1e-10]
        return x

    def _threshold_objective(self, z, theta, counts):
        """Minus the expected log-likelihood of all workers + the thresholds' log-prior, as a
        function of the thresholds' parameters ``(c_0, log gaps)``, and its gradient."""
        deltas = z[1:]
        thresholds = _thresholds(z[0], deltas)
        k = len(thresholds) + 1
        obj, _, (ratio, fpad, s) = self._worker_objective(theta, thresholds, counts)
        # d log P_{jl} / d c_t = (f(u_t)[t == l] - f(u_t)[t == l-1]) / (s P)
        f = fpad[:, :, 1:-1]  # f at the K-1 finite thresholds: [w, j, t]
        g_c = -np.einsum("wjt,wjt,w->t", ratio[:, :, :-1] - ratio[:, :, 1:], f, 1.0 / s)
        mid = np.arange(k - 1) + 0.5
        g_c = g_c + (thresholds - mid)
        total = float(obj.sum()) + 0.5 * float(np.sum((thresholds - mid) ** 2))
        g_d = np.exp(deltas) * np.cumsum(g_c[::-1])[::-1][1:]
        return total, np.concatenate([[g_c.sum()], g_d])


def _thresholds(first: float, log_gaps: np.ndarray) -> np.ndarray:
    """Increasing thresholds ``c_0 = first``, ``c_l = c_{l-1} + exp(log_gaps[l-1])``."""
    return first + np.concatenate([[0.0], np.cumsum(np.exp(log_gaps))])
