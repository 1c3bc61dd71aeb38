"""Torch-free E-steps of the EM-type learners: deepBP, deepMF and BayesDGC local updates.

All functions take the network's class probabilities ``prior`` (N, K) as a unary factor on
each task and return task posteriors (N, K); everything is computed in log space.

* :func:`bp_one_coin` — sum-product BP of deepBP (Kim, Cho, Kim & Ok, AISTATS 2022) for the
  one-coin worker model ``P(answer l | true j) = q_w if l = j else (1 - q_w)/(K - 1)``,
  ``q_w ~ Beta(alpha, beta)`` (the paper's symmetric prior, its Eq. 3; K = 2 is the paper's
  setting and K > 2 the one-coin extension).  The worker factor integral is done on a fixed
  set of S reliability values shared by all workers: Gauss-Jacobi nodes for the Beta weight
  (``factor="quadrature"``, deterministic) or S Beta draws (``factor="mc"``, the paper's
  Monte-Carlo messages).
* :func:`mean_field_dirichlet` — deepMF's mean-field step with Dirichlet rows
  ``theta_w[j, :] ~ Dir(prior[j, :])``.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from ..core.data import CrowdLabels
from ..core.stats import answer_log_sum, dirichlet_expected_log, gauss_jacobi, logsumexp, soft_confusion_counts

__all__ = ["reliability_nodes", "bp_one_coin", "mean_field_dirichlet"]


def reliability_nodes(alpha: float, beta: float, n: int, factor: str, rng=None):
    """Nodes ``q_s`` in (0, 1) and log-weights so that ``sum_s w_s g(q_s) ≈ E_{Beta}[g(q)]``."""
    if alpha <= 0 or beta <= 0:
        raise ValueError(f"Beta prior parameters must be > 0, got alpha={alpha}, beta={beta}")
    if factor == "quadrature":
        q, _, logw = gauss_jacobi(n, alpha, beta)  # nodes for the weight q^(a-1) (1 - q)^(b-1)
        logw = logw - logsumexp(logw)
    elif factor == "mc":
        rng = np.random.default_rng(0) if rng is None else rng
        q = rng.beta(alpha, beta, size=n)
        logw = np.full(n, -np.log(n))
    else:
        raise ValueError(f"factor must be 'quadrature' or 'mc', got {factor!r}")
    q = np.clip(q, 1e-12, 1 - 1e-12)
    return q, logw


def _class_scores(data: CrowdLabels, y: np.ndarray, log_prior: np.ndarray) -> np.ndarray:
    s = log_prior.copy()
    np.add.at(s, (data.task, data.label), y)
    return s


def bp_one_coin(
    data: CrowdLabels,
    prior: np.ndarray,
    q: np.ndarray,
    logw: np.ndarray,
    y0: np.ndarray | None = None,
    max_iter: int = 100,
    tol: float = 0.03,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Loopy BP on the task-worker graph with the network as a unary factor on each task.

    Messages: one log-ratio per answer ``e = (n, w, l)``, ``y_e = log m_{w->n}(l) -
    log m_{w->n}(j != l)`` (a one-coin worker's message only says "l" vs "not l").

    * task -> worker: ``m_{n->w}(j) ∝ prior_n(j) prod_{e' in n, e' != e} m_{e'}(j)``; only
      ``p_e = m_{n->w}(l_e)`` enters the worker factor.
    * worker -> task: ``m_{w->n}(j) ∝ sum_s w_s P(l_e | j, q_s) prod_{e' in w, e' != e}
      [p_e' q_s + (1 - p_e') (1 - q_s)/(K - 1)]``, evaluated as ``exp(S_w(s) - log L_e(s))``
      with ``S_w = sum_e log L_e`` (leave-one-out by subtraction, no cancellation since every
      term is positive) and log-sum-exp over nodes.

    Returns (beliefs (N, K), messages y (L,), iterations).  Stops when the normalised
    messages move by less than ``tol`` (the paper's 0.03).
    """
    k = data.n_classes
    log_prior = np.log(np.clip(prior, 1e-300, None))
    t, w, l = data.task.astype(np.int64), data.worker.astype(np.int64), data.label.astype(np.int64)
    n_edges = len(t)
    log_k1 = np.log(k - 1.0)
    logq, log1q = np.log(q), np.log1p(-q) - log_k1
    inc = sparse.csr_matrix((np.ones(n_edges), (w, np.arange(n_edges))), shape=(data.n_workers, n_edges))
    y = np.zeros(n_edges) if y0 is None else y0.copy()
    it = 0
    for it in range(1, max_iter + 1):
        s = _class_scores(data, y, log_prior)
        excl = s[t]
        excl[np.arange(n_edges), l] -= y
        p = np.exp(excl[np.arange(n_edges), l] - logsumexp(excl, axis=1))
        p = np.clip(p, 1e-12, 1 - 1e-12)
        # log L_e(s) = log(p q_s + (1 - p)(1 - q_s)/(K - 1)), shape (L, S)
        log_l = np.logaddexp(np.log(p)[:, None] + logq[None], np.log1p(-p)[:, None] + log1q[None])
        loo = np.asarray(inc @ log_l)[w] - log_l + logw[None]
        y_new = logsumexp(loo + logq[None], axis=1) - logsumexp(loo + log1q[None], axis=1)
        # convergence on the normalised message value m(l) = e^y / (e^y + K - 1)
        delta = np.max(np.abs(_msg(y_new, log_k1) - _msg(y, log_k1)), initial=0.0)
        y = y_new
        if delta < tol:
            break
    s = _class_scores(data, y, log_prior)
    s -= logsumexp(s, axis=1, keepdims=True)
    return np.exp(s), y, it


def _msg(y, log_k1):
    return 1.0 / (1.0 + np.exp(np.clip(log_k1 - y, -700, 700)))


def mean_field_dirichlet(
    data: CrowdLabels,
    prior: np.ndarray,
    dir_prior: np.ndarray,
    post: np.ndarray,
    n_iter: int = 10,
) -> tuple[np.ndarray, np.ndarray]:
    """deepMF E-step: alternate ``q(theta_w)`` and ``q(y_n)`` (coordinate ascent).

    ``beta_w[j, l] = dir_prior[j, l] + sum_{(n, w, l)} q_n(j)``;
    ``log q_n(j) = log prior_n(j) + sum_{(n, w, l)} (psi(beta_w[j, l]) - psi(sum_l' beta_w[j, l']))``.

    Returns (posteriors (N, K), Dirichlet concentrations (W, K, K) [worker, true, answered]).
    """
    log_prior = np.log(np.clip(prior, 1e-300, None))
    conc = None
    for _ in range(max(n_iter, 1)):
        conc = soft_confusion_counts(data, post) + dir_prior[None]
        s = answer_log_sum(data, dirichlet_expected_log(conc), start=log_prior)
        s -= logsumexp(s, axis=1, keepdims=True)
        post = np.exp(s)
    return post, conc
