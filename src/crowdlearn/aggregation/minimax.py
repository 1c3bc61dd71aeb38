"""Minimax entropy truth inference (categorical): :class:`MinimaxEntropy`.

Zhou, Basu, Mao & Platt, "Learning from the wisdom of crowds by minimax entropy", NIPS 2012
(categorical model; the ordinal variant of Zhou, Liu, Platt & Meek, ICML 2014, is not
implemented).  The maximum-entropy distribution of worker ``i``'s answer on task ``j``
subject to matching, per worker and per task, the expected confusion counts is::

    p(x_ij = k | y_j = c) = exp(sigma_i[c, k] + tau_j[c, k]) / Z_ij(c)

with a worker confusion-like parameter ``sigma_i`` and a *task* parameter ``tau_j`` (each
K x K) — each item has its own difficulty and its own confusable classes, something Dawid-
Skene cannot express.  Minimising the entropy over the true labels while maximising it over
the answer distributions is, by duality, the (regularised) likelihood problem::

    max  sum_j log sum_c pi_c prod_{i in j} p(x_ij | y_j = c)
         - lambda_w / 2 sum_i ||sigma_i - m||^2 - lambda_t / 2 sum_j ||tau_j||^2

solved here by EM-style block coordinate ascent: posteriors ``q_j`` given the parameters,
then the expected complete log-likelihood with ``q`` fixed (a convex, multinomial-logistic
problem) is improved, warm-started from the previous block: either a few L-BFGS steps on
(sigma, tau) jointly, or (``solver="block"``, the default with the numba back end) each
task's ``tau_j`` by damped Newton, then L-BFGS on sigma alone.  The
regularisers are the L2 slack penalties of the paper's relaxed moment constraints; the
defaults scale with the data: ``lambda_t`` is per task, so it is set relative to the number
of answers per task (a task parameter must not explain its few answers away).

Memory and speed: with numba (the ``fast`` extra) the objective, its gradient and the
posteriors are one compiled pass over the answers each, in O(answers + (W + N) K^2) memory.
The numpy fallback works in two arrays of shape (answers, K, K) kept across gradient
evaluations, e.g. 1e6 answers with K = 5 is 200 MB each; above ``max_cells`` answer-class
cells it raises a clear error instead of swapping.  Its L-BFGS-B still carries the
(W + N) K^2 parameters: on crowds with many classes and few answers per task (imagenet15n:
590k parameters for 3k answers) scipy's ``setulb`` is about half of the fit.

Orientation: ``confusions_[w, true, answered]`` is the worker's confusion at the *average*
task (``tau = 0``): ``softmax_k(sigma_w[c, :])``; ``task_params_`` holds ``tau``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.special import log_softmax

from ..core import kernels
from ..core.base import Tags
from ..core.data import CrowdLabels
from ..core.ids import positions_by_value
from ..core.stats import clamp_to_gold, expected_skills, logsumexp, soft_confusion_counts
from .base import BaseAggregator

__all__ = ["MinimaxEntropy", "SPARSE_MIN_CLASSES", "SPARSE_Q_FLOOR"]

#: from this many classes on, ``solver="auto"`` is the sparse solver (no real benchmark set
#: has more than 15 classes, so their fits are unchanged)
SPARSE_MIN_CLASSES = 32
#: posteriors below this count as zero in the sparse solver's M-step
SPARSE_Q_FLOOR = 1e-3


class MinimaxEntropy(BaseAggregator):
    """Minimax entropy crowd model with worker and task parameters (Zhou et al. 2012).

    Parameters
    ----------
    lambda_worker : float
        L2 penalty on each worker's ``sigma_i`` (K x K).
    lambda_task : float or "auto"
        L2 penalty on each task's ``tau_j``; "auto" = ``lambda_worker * r`` with ``r`` the
        mean number of answers per worker divided by the mean per task (a task parameter
        is estimated from ``r`` times fewer answers than a worker parameter).
    diag_prior : float
        Centre of the worker penalty: ``sigma_i`` is shrunk towards ``diag_prior * log(K) * I``
        rather than 0: a worker with no answers is right with probability
        ``K^d / (K^d + K - 1)`` for ``d = diag_prior`` (0.8 for two classes at the default 2).
        The analogue of Dawid-Skene's diagonal pseudo-count: with a zero centre, many classes
        and few answers per worker the ascent explains every answer by "all tasks are one
        class".  The default 2 was compared with 0, 1 and 3 on simulated crowds (sparse
        workers, many classes, spammers, asymmetric confusions, class imbalance;
        ``benchmarks/tune_defaults.py``), not on the real benchmark sets.
    max_iter : int
        Outer (posterior / parameter) rounds.
    inner_iter : int
        L-BFGS iterations per parameter block update.
    tol : float
        Stop when the objective changes by less than ``tol`` per answer.
    prior_alpha : float
        Dirichlet pseudo-count of the learned class prior ``pi``.
    max_cells : int
        Largest ``answers * K * K`` accepted by the numpy back end (memory guard; the compiled
        passes need no (answers, K, K) arrays).
    backend : {"auto", "numpy", "numba"}
        ``"numba"`` evaluates the M-step objective and gradient in one compiled pass over the
        answers (the numpy version builds (answers, K, K) temporaries); ``"auto"`` uses it from 50k answers when numba is installed.  An
        explicit ``solver="block"`` always uses the compiled passes.
    solver : {"auto", "block", "lbfgs"}
        M-step optimiser.  ``"lbfgs"``: L-BFGS-B over all worker and task parameters jointly
        (``inner_iter`` iterations).  ``"block"`` (needs numba): first every task's ``tau_j``
        exactly, row by row (independent K-dim strictly convex problems, damped Newton), then
        L-BFGS-B over the workers' ``sigma`` only; both blocks lower the same objective, so
        the ascent stays monotone, and the optimiser no longer carries (tasks x K^2) vectors.
        It reaches the joint solver's objective up to small differences either way, faster
        (benchmarks/RESULTS.md, section 6).  ``"auto"``: ``"block"`` when the resolved ``backend`` is numba (by
        default from 50k answers with numba installed), else ``"lbfgs"``; so small inputs
        give the same result with or without numba.  From ``SPARSE_MIN_CLASSES`` (32)
        classes on, ``"auto"`` is ``"sparse"``: posteriors below ``SPARSE_Q_FLOOR`` (1e-3)
        count as zero in the M-step, so only the worker and task rows they reach are
        optimised (every other row sits at its exact optimum, the penalty's centre); see
        :meth:`_fit_sparse`.  The dense solvers carry (W + N) K^2 numbers, which makes them
        slow at many classes; on 3 classes the sparse one reaches the joint solver's labels
        and objective to 0.1% (tests/test_minimax.py).
    random_state : int
        Tie-breaking seed.

    Attributes
    ----------
    worker_params_ : ndarray (W, K, K) ``sigma``; task_params_ : ndarray (N, K, K) ``tau``
    confusions_ : ndarray (W, K, K) ``[worker, true, answered]`` at ``tau = 0``
    priors_ : Series; skills_ : Series
    solver_ : str, the optimiser used ("block" or "lbfgs")
    """

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), accepts_init=True, has_worker_model=True)

    def __init__(
        self,
        lambda_worker: float = 1.0,
        lambda_task: float | str = "auto",
        diag_prior: float = 2.0,
        max_iter: int = 30,
        inner_iter: int = 15,
        tol: float = 1e-6,
        prior_alpha: float = 1.0,
        max_cells: int = 100_000_000,
        backend: str = "auto",
        solver: str = "auto",
        random_state: int | None = 0,
    ) -> None:
        self.lambda_worker = lambda_worker
        self.lambda_task = lambda_task
        self.diag_prior = diag_prior
        self.max_iter = max_iter
        self.inner_iter = inner_iter
        self.tol = tol
        self.prior_alpha = prior_alpha
        self.max_cells = max_cells
        self.backend = backend
        self.solver = solver
        self.random_state = random_state

    def _lambdas(self, data: CrowdLabels) -> tuple[float, float]:
        lw = float(self.lambda_worker)
        if lw <= 0:
            raise ValueError(f"lambda_worker must be positive, got {self.lambda_worker!r}")
        if isinstance(self.lambda_task, str):
            if self.lambda_task != "auto":
                raise ValueError(f"lambda_task must be a positive number or 'auto', got {self.lambda_task!r}")
            per_worker = data.n_labels / max(data.n_workers, 1)
            per_task = data.n_labels / max(data.n_tasks, 1)
            lt = lw * max(per_worker / per_task, 1.0)
        else:
            lt = float(self.lambda_task)
            if lt <= 0:
                raise ValueError(f"lambda_task must be positive, got {self.lambda_task!r}")
        return lw, lt

    def _fit(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None):
        k, n_w, n_t, n = data.n_classes, data.n_workers, data.n_tasks, data.n_labels
        if self.solver not in ("auto", "lbfgs", "block", "sparse"):
            raise ValueError(f"solver must be 'auto', 'lbfgs', 'block' or 'sparse', got {self.solver!r}")
        solver = self.solver
        if solver == "auto" and k >= SPARSE_MIN_CLASSES:
            solver = "sparse"
        if self.max_iter < 1:
            raise ValueError(f"max_iter must be >= 1, got {self.max_iter}")
        if solver == "sparse":
            self.solver_ = solver
            return self._fit_sparse(data, gold, init)
        kern = kernels.compiled_kernels() if kernels.resolve_backend(self.backend, n) == "numba" else None
        if solver == "auto":
            solver = "block" if kern is not None else "lbfgs"
        self.solver_ = solver
        if solver == "block" and kern is None:
            kern = kernels.compiled_kernels()
            if kern is None:
                raise ImportError("solver='block' needs numba: pip install 'crowdlearn[fast]'")
        if kern is None and n * k * k > self.max_cells:
            if kernels.compiled_kernels() is None:
                advice = "install numba ('crowdlearn[fast]') for the compiled passes"
            else:
                advice = "use backend='numba' (numba is installed)"
            raise ValueError(
                f"MinimaxEntropy needs {n} answers x {k}^2 classes = {n * k * k:,} cells per "
                f"gradient on the numpy back end (max_cells={self.max_cells:,}); {advice}, "
                f"solver='sparse', 'ds', or raise max_cells"
            )
        if self.max_iter < 1:
            raise ValueError(f"max_iter must be >= 1, got {self.max_iter}")
        lw, lt = self._lambdas(data)
        if not np.isfinite(self.diag_prior) or self.diag_prior < 0:
            raise ValueError(f"diag_prior must be finite and >= 0, got {self.diag_prior!r}")
        centre = np.tile((self.diag_prior * np.log(k) * np.eye(k)).ravel(), n_w)
        w_of, t_of, a_of = data.worker, data.task, data.label
        answers = _AnswerTerm(data) if kern is None else None

        if init is not None:
            q = init.copy()
        else:
            q = data.vote_counts().astype(np.float64) + 1e-3
            q /= q.sum(axis=1, keepdims=True)
        clamp_to_gold(q, gold)
        known = None if gold is None else gold >= 0
        n_sig = n_w * k * k
        theta = np.zeros(n_sig + n_t * k * k)
        # start from the worker confusions of the initial posteriors (DS M-step, log scale)
        counts = soft_confusion_counts(data, q)  # [w, true, answered]
        theta[:n_sig] = np.log((counts + 1.0) / (counts + 1.0).sum(axis=2, keepdims=True)).ravel()

        w_i, t_i, a_i = (np.ascontiguousarray(v, dtype=np.int64) for v in (w_of, t_of, a_of))

        def task_loglik(th):
            """(n_t, c): sum over each task's answers of log p(x_ij | y_j = c)."""
            sig, tau = th[:n_sig].reshape(n_w, k, k), th[n_sig:].reshape(n_t, k, k)
            if kern is None:
                return answers.task_loglik(sig, tau)
            return _task_loglik(data, sig, tau, kern, codes=(w_i, t_i, a_i))

        tau_penalty = np.empty(n_t * k * k)

        def neg_expected(th, q):
            """-E_q[log-likelihood] + the penalties, and the gradient (worker block, then task block)."""
            sig, tau = th[:n_sig].reshape(n_w, k, k), th[n_sig:].reshape(n_t, k, k)
            grad = np.empty_like(th)  # fresh each call: scipy keeps the returned gradient
            g_sig, g_tau = grad[:n_sig].reshape(n_w, k, k), grad[n_sig:].reshape(n_t, k, k)
            if kern is not None:
                val = float(kern.minimax_value_grad(w_i, t_i, a_i, q, sig, tau, g_sig, g_tau))
            else:
                val = answers.value_grad(sig, tau, q, g_sig, g_tau)
            sig_c, tau_flat = th[:n_sig] - centre, th[n_sig:]
            val += 0.5 * lw * sig_c @ sig_c + 0.5 * lt * tau_flat @ tau_flat
            grad[:n_sig] += lw * sig_c
            grad[n_sig:] += np.multiply(tau_flat, lt, out=tau_penalty)  # no fresh (tasks x K^2) array
            return val, grad

        prior = np.full(k, 1.0 / k)
        previous = -np.inf
        self.converged_ = False
        for _ in range(self.max_iter):
            prior = q.sum(axis=0) + self.prior_alpha
            prior /= prior.sum()
            qc = np.ascontiguousarray(q)
            if solver == "block":
                tau_view = theta[n_sig:].reshape(n_t, k, k)  # updated in place
                kern.minimax_tau_newton(data.task_ptr, w_i, a_i, qc, theta[:n_sig].reshape(n_w, k, k),
                                        tau_view, lt, 5)

                def sigma_only(sig_flat):
                    th = np.concatenate([sig_flat, theta[n_sig:]])
                    val, grad = neg_expected(th, qc)
                    return val, grad[:n_sig]

                res = minimize(sigma_only, theta[:n_sig], jac=True, method="L-BFGS-B",
                               options={"maxiter": self.inner_iter})
                theta[:n_sig] = res.x
            else:
                res = minimize(neg_expected, theta, args=(qc,), jac=True, method="L-BFGS-B",
                               options={"maxiter": self.inner_iter})
                theta = res.x
            logq = np.log(prior)[None, :] + task_loglik(theta)
            if known is not None:
                logq[known] = np.where(np.eye(k)[gold[known]] > 0, 0.0, -np.inf)
            norm = logsumexp(logq, axis=1, keepdims=True)
            q = np.exp(logq - norm)
            sig, tau = theta[:n_sig] - centre, theta[n_sig:]
            objective = float(norm.sum()) - 0.5 * lw * sig @ sig - 0.5 * lt * tau @ tau
            if self._record_iteration(objective, previous, n):
                break
            previous = objective

        sig = theta[:n_sig].reshape(n_w, k, k)
        self.worker_params_ = sig
        self.task_params_ = theta[n_sig:].reshape(n_t, k, k)
        conf = np.exp(log_softmax(sig, axis=2))
        self.confusions_ = conf
        self.priors_ = pd.Series(prior, index=data.classes, name="prior")
        self.skills_ = pd.Series(expected_skills(conf, prior), index=data.workers, name="skill")
        return q

    def _predict_proba_codes(self, data: CrowdLabels) -> np.ndarray:
        """Posteriors under the fitted worker parameters, prior and task parameters.

        A task seen in the fit keeps its fitted ``tau_j``; a new task is an average task
        (``tau = 0``, the mean of the task prior).  The likelihood is computed as in the fit's
        last E-step, so on the training answers this returns ``probas_`` of a fit without gold.
        """
        k, n_t, n = data.n_classes, data.n_tasks, data.n_labels
        sig = self.worker_params_
        tau = np.zeros((n_t, k, k))
        # by value, as workers and classes are matched (align_to_fit): task "3" of a CSV is
        # the fit's task 3 and keeps its tau
        seen = positions_by_value(self.tasks_, data.tasks, "the fitted tasks")
        tau[seen >= 0] = self.task_params_[seen[seen >= 0]]
        kern = kernels.compiled_kernels() if kernels.resolve_backend(self.backend, n) == "numba" else None
        if self.solver_ == "block" and kern is None:
            kern = kernels.compiled_kernels()
        loglik = _task_loglik(data, np.ascontiguousarray(sig), tau, kern)
        logq = np.log(self.priors_.to_numpy())[None, :] + loglik
        return np.exp(logq - logsumexp(logq, axis=1, keepdims=True))

    # --------------------------------------------------------------- many classes
    def _fit_sparse(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None):
        """The same objective with posteriors below ``SPARSE_Q_FLOOR`` treated as zero.

        Row ``c`` of ``sigma_i`` (of ``tau_j``) enters the M-step's data term only through
        the answers of worker ``i`` (on task ``j``) weighted by ``q_j(c)``.  With those weights
        set to zero below the floor, a row that no weight reaches has the regulariser alone
        as its objective, whose minimum is exact: the centre ``diag_prior log(K) e_c`` for
        ``sigma``, 0 for ``tau``.  Only the rows reached ("active", a few per answer) are
        optimised, by L-BFGS over the (answer, candidate class) pairs, and an answer's
        likelihood under a class with both rows inactive is the closed form
        ``centre[c, a] - log(K - 1 + K^d)``.  One round costs O(pairs x K) instead of
        O(answers x K^2) and the optimiser carries (active rows x K) numbers instead of
        (W + N) K^2.
        The start is the unsmoothed vote fractions, so the first M-step is sparse too.
        """
        k, n_w, n_t, n = data.n_classes, data.n_workers, data.n_tasks, data.n_labels
        lw, lt = self._lambdas(data)
        if not np.isfinite(self.diag_prior) or self.diag_prior < 0:
            raise ValueError(f"diag_prior must be finite and >= 0, got {self.diag_prior!r}")
        if (n_w + n_t) * k * k > self.max_cells:
            raise ValueError(
                f"MinimaxEntropy keeps a {k} x {k} parameter per worker and per task: "
                f"({n_w} + {n_t}) x {k}^2 = {(n_w + n_t) * k * k:,} cells "
                f"(max_cells={self.max_cells:,}); use 'mv', 'wawa' or 'ds', or raise max_cells"
            )
        w_of, t_of, a_of = data.worker, data.task, data.label
        d_log_k = self.diag_prior * np.log(k)
        base_lse = np.log(k - 1 + np.exp(d_log_k))  # log-normaliser of a centre row
        sig = np.zeros((n_w * k, k))
        sig[np.arange(n_w * k), np.tile(np.arange(k), n_w)] = d_log_k  # every row at its centre
        tau = np.zeros((n_t * k, k))
        if init is not None:
            q = init.copy()
        else:
            q = data.vote_counts().astype(np.float64)
            q /= np.maximum(q.sum(axis=1, keepdims=True), 1e-300)
        known = None
        if gold is not None:
            known = gold >= 0
            q[known] = 0.0
            q[known, gold[known]] = 1.0
        answers_per_task = np.bincount(t_of, minlength=n_t)
        votes = data.vote_counts().astype(np.float64)
        prior = np.full(k, 1.0 / k)
        previous = -np.inf
        self.converged_ = False
        was_s = np.zeros(n_w * k, bool)  # rows away from their optimum of the last round
        was_t = np.zeros(n_t * k, bool)
        for _ in range(self.max_iter):
            prior = q.sum(axis=0) + self.prior_alpha
            prior /= prior.sum()
            # (answer, class) pairs with weight q_j(c) above the floor
            cand_t, cand_c = np.nonzero(q >= SPARSE_Q_FLOOR)
            per_task = np.bincount(cand_t, minlength=n_t)
            rep = per_task[t_of]  # candidate classes of each answer's task
            ep = np.repeat(np.arange(n), rep)
            start = np.concatenate([[0], np.cumsum(per_task)])[t_of]
            offset = np.arange(ep.size) - np.repeat(np.cumsum(rep) - rep, rep)
            cp = cand_c[np.repeat(start, rep) + offset]
            wp = q[t_of[ep], cp]
            ap = a_of[ep]
            rows_s, sidx = np.unique(w_of[ep] * k + cp, return_inverse=True)
            rows_t, tidx = np.unique(t_of[ep] * k + cp, return_inverse=True)
            # inactive rows at their exact optimum; active rows start where they were
            active_s = np.zeros(n_w * k, bool)
            active_s[rows_s] = True
            active_t = np.zeros(n_t * k, bool)
            active_t[rows_t] = True
            gone = np.flatnonzero(was_s & ~active_s)
            sig[gone] = 0.0
            sig[gone, gone % k] = d_log_k
            tau[was_t & ~active_t] = 0.0
            was_s, was_t = active_s, active_t
            centre = np.zeros((rows_s.size, k))
            centre[np.arange(rows_s.size), rows_s % k] = d_log_k
            n_s = rows_s.size * k
            to_s = sp.csr_matrix((np.ones(ep.size), (sidx, np.arange(ep.size))), shape=(rows_s.size, ep.size))
            to_t = sp.csr_matrix((np.ones(ep.size), (tidx, np.arange(ep.size))), shape=(rows_t.size, ep.size))
            pair = np.arange(ep.size)

            def objective(x):
                s_rows = x[:n_s].reshape(-1, k)
                t_rows = x[n_s:].reshape(-1, k)
                logits = s_rows[sidx] + t_rows[tidx]
                lse = logsumexp(logits, axis=1)
                val = -float(wp @ (logits[pair, ap] - lse))
                g = np.exp(logits - lse[:, None]) * wp[:, None]
                g[pair, ap] -= wp
                diff = s_rows - centre
                val += 0.5 * lw * float(np.sum(diff * diff)) + 0.5 * lt * float(np.sum(t_rows * t_rows))
                grad = np.concatenate([(to_s @ g + lw * diff).ravel(), (to_t @ g + lt * t_rows).ravel()])
                return val, grad

            x0 = np.concatenate([sig[rows_s].ravel(), tau[rows_t].ravel()])
            res = minimize(objective, x0, jac=True, method="L-BFGS-B", options={"maxiter": self.inner_iter})
            sig[rows_s] = res.x[:n_s].reshape(-1, k)
            tau[rows_t] = res.x[n_s:].reshape(-1, k)

            # E-step: closed form for (answer, class) pairs whose two rows are both inactive
            loglik = votes * d_log_k - answers_per_task[:, None] * base_lse
            hit_t = active_t.reshape(n_t, k)[t_of]  # (n, K)
            hit = active_s.reshape(n_w, k)[w_of] | hit_t
            # a pair whose task row is inactive has tau = 0 there: its logits are the worker
            # row, whose log-normaliser is taken once per row instead of once per answer
            s_rows = np.flatnonzero(active_s)
            lse_s = np.zeros(n_w * k)
            lse_s[s_rows] = logsumexp(sig[s_rows], axis=1)
            row_of = w_of[:, None] * k + np.arange(k)  # (n, K): sigma row of each pair
            exact = sig[row_of, a_of[:, None]] - lse_s[row_of]
            e2, c2 = np.nonzero(hit_t)
            logits = sig[w_of[e2] * k + c2] + tau[t_of[e2] * k + c2]
            exact[e2, c2] = logits[np.arange(e2.size), a_of[e2]] - logsumexp(logits, axis=1)
            closed = np.where(np.arange(k) == a_of[:, None], d_log_k, 0.0) - base_lse
            # every (answer, class) cell in answer order, 0 off the hit pairs: the same sums
            diff = np.where(hit, exact - closed, 0.0)
            loglik += np.bincount((t_of[:, None] * k + np.arange(k)).ravel(), weights=diff.ravel(),
                                  minlength=n_t * k).reshape(n_t, k)
            logq = np.log(prior)[None, :] + loglik
            if known is not None:
                logq[known] = np.where(np.eye(k)[gold[known]] > 0, 0.0, -np.inf)
            norm = logsumexp(logq, axis=1, keepdims=True)
            q = np.exp(logq - norm)
            diff = sig[active_s] - np.eye(k)[np.flatnonzero(active_s) % k] * d_log_k
            objective_value = (float(norm.sum()) - 0.5 * lw * float(np.sum(diff * diff))
                               - 0.5 * lt * float(np.sum(tau[active_t] ** 2)))
            if self._record_iteration(objective_value, previous, n):
                break
            previous = objective_value

        sig3 = sig.reshape(n_w, k, k)
        self.worker_params_ = sig3
        self.task_params_ = tau.reshape(n_t, k, k)
        conf = np.exp(log_softmax(sig3, axis=2))
        self.confusions_ = conf
        self.priors_ = pd.Series(prior, index=data.classes, name="prior")
        self.skills_ = pd.Series(np.einsum("wkk->wk", conf) @ prior, index=data.workers, name="skill")
        return q


class _AnswerTerm:
    """The numpy back end's per-answer passes of the dense solvers' M-step and E-step.

    Every answer ``e`` (worker ``i``, task ``j``, label ``a``) has one K x K block of logits
    ``z_e[c, :] = sigma_i[c, :] + tau_j[c, :]`` whose rows are log-softmax-normalised into
    ``lp_e``.  The data term is ``-sum_e sum_c q_j(c) lp_e[c, a]`` and its gradient with
    respect to ``z_e[c, k]`` is ``q_j(c) (exp(lp_e[c, k]) - [k == a])``; the gradient of
    ``sigma_i`` (``tau_j``) sums the blocks of worker ``i``'s (task ``j``'s) answers.

    The arithmetic is that of the former formulation, ``lp = scipy.special.log_softmax(z)``,
    ``value = -(q one-hot lp).sum()`` and ``grad = -q (one-hot - exp(lp))``, operation for
    operation, so the results are the same to the bit: L-BFGS-B's path is sensitive enough
    that rounding-level changes of the gradient moved posteriors by up to 5e-4 on a real
    set (product).  What changed is the cost: two (answers, K, K) buffers are reused
    across calls instead of a dozen fresh arrays per call; the one-hot products, which are
    zero but for one column, are formed only on that column; and log-softmax's row maximum
    is taken by K elementwise maxima instead of numpy's slow reduction along a short axis.

    Parameters
    ----------
    data : CrowdLabels
        The answers; ``sigma`` and ``tau`` passed to the methods are indexed by its worker
        and task codes.
    """

    def __init__(self, data: CrowdLabels) -> None:
        n, k = data.n_labels, data.n_classes
        self.worker = np.asarray(data.worker, dtype=np.intp)
        self.task = np.asarray(data.task, dtype=np.intp)
        self.label = np.asarray(data.label, dtype=np.intp)
        self.rows = np.arange(n)
        self.by_worker = sp.csr_matrix((np.ones(n), (self.worker, self.rows)), shape=(data.n_workers, n))
        self.by_task = sp.csr_matrix((np.ones(n), (self.task, self.rows)), shape=(data.n_tasks, n))
        self.z = np.empty((n, k, k))  # logits, then log-softmax, then the gradient
        self.scratch = np.empty((n, k, k))

    def _log_softmax(self, sig: np.ndarray, tau: np.ndarray) -> np.ndarray:
        """``log_softmax(sigma[worker] + tau[task], axis=2)`` in the buffer (answers, c, k),
        with scipy's operations (row maximum, non-finite maxima set to 0, ``exp``, ``sum``
        along the row, ``log``), hence scipy's bits."""
        z, scratch, k = self.z, self.scratch, self.z.shape[2]
        # mode="clip" (the codes are in range): with the default "raise", ``out`` is buffered
        np.take(sig, self.worker, axis=0, out=z, mode="clip")
        z += np.take(tau, self.task, axis=0, out=scratch, mode="clip")
        top = z[:, :, 0].copy()  # the row maximum: exact whichever way it is taken
        for col in range(1, k):
            np.maximum(top, z[:, :, col], out=top)
        top[~np.isfinite(top)] = 0.0
        z -= top[:, :, None]
        np.exp(z, out=scratch)
        log_sums = np.log(np.sum(scratch, axis=2, keepdims=True))
        z -= log_sums
        return z

    def value_grad(self, sig: np.ndarray, tau: np.ndarray, q: np.ndarray, g_sig: np.ndarray,
                   g_tau: np.ndarray) -> float:
        """``-E_q[log-likelihood]`` of the answers; its gradient is written to ``g_sig``
        (workers, K, K) and ``g_tau`` (tasks, K, K)."""
        lp = self._log_softmax(sig, tau)
        qa = q[self.task]
        # the value: q one-hot lp, zero off the answered column (its -0.0s add nothing),
        # summed over the whole block so that numpy's pairwise order is unchanged
        terms = self.scratch
        terms.fill(0.0)
        terms[self.rows, :, self.label] = qa * lp[self.rows, :, self.label]
        value = -float(terms.sum())
        # the gradient -q (one-hot - exp(lp)): q exp(lp) off the answered column (the two
        # signs cancel exactly) and q (exp(lp) - 1) on it
        grad = np.exp(lp, out=lp)
        answered = grad[self.rows, :, self.label]
        grad *= qa[:, :, None]
        grad[self.rows, :, self.label] = qa * (answered - 1.0)
        grad = grad.reshape(grad.shape[0], -1)
        g_sig[...] = (self.by_worker @ grad).reshape(g_sig.shape)
        g_tau[...] = (self.by_task @ grad).reshape(g_tau.shape)
        return value

    def task_loglik(self, sig: np.ndarray, tau: np.ndarray) -> np.ndarray:
        """(tasks, K): ``sum over task j's answers of log p(x_ij | y_j = c)``."""
        lp = self._log_softmax(sig, tau)
        return self.by_task @ lp[self.rows, :, self.label]


def _task_loglik(data: CrowdLabels, sig: np.ndarray, tau: np.ndarray, kern, codes=None) -> np.ndarray:
    """(n_tasks, K): ``sum over task j's answers of log p(x_ij | y_j = c)`` under the model
    ``p(x_ij = a | y_j = c) = softmax_a(sigma_i[c] + tau_j[c])``.

    With the compiled kernels ``kern`` one fused pass (``codes``: the int64 worker, task,
    label arrays, if the caller has them); otherwise :class:`_AnswerTerm`'s, the same
    arithmetic as the fit's E-step on the numpy back end.
    """
    if kern is not None:
        if codes is None:
            codes = tuple(np.ascontiguousarray(v, dtype=np.int64) for v in (data.worker, data.task, data.label))
        out = np.zeros((data.n_tasks, data.n_classes))
        kern.minimax_task_loglik(*codes, sig, tau, out)
        return out
    return _AnswerTerm(data).task_loglik(sig, tau)
