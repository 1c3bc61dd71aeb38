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
The numpy fallback builds three arrays of shape (answers, K, K) per gradient evaluation,
e.g. 1e6 answers with K = 5 is 200 MB each; above ``max_cells`` answer-class cells it raises
a clear error instead of swapping.

Orientation: ``confusions_[w, true, answered]`` is the worker's confusion at the *average*
task (``tau = 0``): ``softmax_k(sigma_w[c, :])``; ``task_params_`` holds ``tau``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.special import log_softmax, logsumexp

from ..core import kernels
from ..core.data import CrowdLabels
from .base import BaseAggregator

__all__ = ["MinimaxEntropy"]


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
        give the same result with or without numba.
    random_state : int
        Tie-breaking seed.

    Attributes
    ----------
    worker_params_ : ndarray (W, K, K) ``sigma``; task_params_ : ndarray (N, K, K) ``tau``
    confusions_ : ndarray (W, K, K) ``[worker, true, answered]`` at ``tau = 0``
    priors_ : Series; skills_ : Series
    solver_ : str, the optimiser used ("block" or "lbfgs")
    """

    _uses_init = True

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
        if self.solver not in ("auto", "lbfgs", "block"):
            raise ValueError(f"solver must be 'auto', 'lbfgs' or 'block', got {self.solver!r}")
        solver = self.solver
        kern = kernels.compiled_kernels() if kernels.resolve_backend(self.backend, n) == "numba" else None
        if solver == "auto":
            solver = "block" if kern is not None else "lbfgs"
        self.solver_ = solver
        if solver == "block" and kern is None:
            kern = kernels.compiled_kernels()
            if kern is None:
                raise ImportError("solver='block' needs numba: pip install 'crowdlearn[fast]'")
        if kern is None and n * k * k > self.max_cells:
            raise ValueError(
                f"MinimaxEntropy needs {n} answers x {k}^2 classes = {n * k * k:,} cells per "
                f"gradient without numba (max_cells={self.max_cells:,}); install numba "
                f"('crowdlearn[fast]'), use 'ds' or raise max_cells"
            )
        if self.max_iter < 1:
            raise ValueError(f"max_iter must be >= 1, got {self.max_iter}")
        lw, lt = self._lambdas(data)
        if not np.isfinite(self.diag_prior) or self.diag_prior < 0:
            raise ValueError(f"diag_prior must be finite and >= 0, got {self.diag_prior!r}")
        centre = np.tile((self.diag_prior * np.log(k) * np.eye(k)).ravel(), n_w)
        w_of, t_of, a_of = data.worker, data.task, data.label
        if kern is None:  # the numpy path's answer -> worker / task sums and one-hot answers
            by_worker = sp.csr_matrix((np.ones(n), (w_of, np.arange(n))), shape=(n_w, n))
            by_task = sp.csr_matrix((np.ones(n), (t_of, np.arange(n))), shape=(n_t, n))
            onehot = np.eye(k)[a_of]

        if init is not None:
            q = init.copy()
        else:
            q = data.vote_counts().astype(np.float64) + 1e-3
            q /= q.sum(axis=1, keepdims=True)
        known = None
        if gold is not None:
            known = gold >= 0
            q[known] = 0.0
            q[known, gold[known]] = 1.0
        n_sig = n_w * k * k
        theta = np.zeros(n_sig + n_t * k * k)
        # start from the worker confusions of the initial posteriors (DS M-step, log scale)
        counts = np.zeros((n_w, k, k))
        for c in range(k):  # counts[w, c, x] = sum of q_t(c) over w's answers x; O(answers) memory
            counts[:, c, :] = np.bincount(w_of * k + a_of, weights=q[t_of, c], minlength=n_w * k).reshape(n_w, k)
        theta[:n_sig] = np.log((counts + 1.0) / (counts + 1.0).sum(axis=2, keepdims=True)).ravel()

        w_i, t_i, a_i = (np.ascontiguousarray(v, dtype=np.int64) for v in (w_of, t_of, a_of))

        def log_p(th):
            sig = th[:n_sig].reshape(n_w, k, k)
            tau = th[n_sig:].reshape(n_t, k, k)
            return log_softmax(sig[w_of] + tau[t_of], axis=2)  # (n, c, k)

        def task_loglik(th):
            """(n_t, c): sum over each task's answers of log p(x_ij | y_j = c)."""
            if kern is not None:
                out = np.zeros((n_t, k))
                kern.minimax_task_loglik(w_i, t_i, a_i, th[:n_sig].reshape(n_w, k, k),
                                         th[n_sig:].reshape(n_t, k, k), out)
                return out
            return by_task @ log_p(th)[np.arange(n), :, a_of]

        def data_term(th, q):
            """-E_q[log-likelihood] and its gradient (worker block, then task block)."""
            if kern is not None:
                g = np.empty_like(th)
                val = kern.minimax_value_grad(w_i, t_i, a_i, q, th[:n_sig].reshape(n_w, k, k),
                                              th[n_sig:].reshape(n_t, k, k),
                                              g[:n_sig].reshape(n_w, k, k), g[n_sig:].reshape(n_t, k, k))
                return float(val), g
            qa = q[t_of]
            lp = log_p(th)
            val = -(qa[:, :, None] * onehot[:, None, :] * lp).sum()
            ga = (-qa[:, :, None] * (onehot[:, None, :] - np.exp(lp))).reshape(n, k * k)  # (n, c*k)
            return float(val), np.concatenate([(by_worker @ ga).ravel(), (by_task @ ga).ravel()])

        def neg_expected(th, q):
            val, grad = data_term(th, q)
            sig, tau = th[:n_sig] - centre, th[n_sig:]
            val += 0.5 * lw * sig @ sig + 0.5 * lt * tau @ tau
            grad[:n_sig] += lw * sig
            grad[n_sig:] += lt * tau
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
        self.skills_ = pd.Series(np.einsum("wkk->wk", conf) @ prior, index=data.workers, name="skill")
        return q
