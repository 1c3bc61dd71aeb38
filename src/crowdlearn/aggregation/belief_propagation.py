"""Belief propagation and mean field for the one-coin model with a Beta reliability prior.

Liu, Peng & Ihler (2012), "Variational inference for crowdsourcing", NIPS 25.  Model::

    y_n ~ Uniform(K),   q_w ~ Beta(alpha, beta),
    answer_{n,w} = y_n with probability q_w, otherwise one of the other K - 1 classes
    uniformly.

For K = 2 this is the binary one-coin model of the paper (their demo uses Beta(2, 1)); for
K > 2 it is its one-coin K-ary extension, and everything below reduces to the paper's
formulas when K = 2.

Belief propagation (:class:`BeliefPropagation`, ``"bp"``)
---------------------------------------------------------
``q_w`` is integrated out exactly: worker ``w`` becomes one factor over its tasks' labels,
``g_w(y) = E_{q ~ Beta}[q^c (1 - q)^(d - c)] (K - 1)^-(d - c) ∝ B(c + alpha, d - c + beta)
(K - 1)^c`` with ``c`` = number of its ``d`` answers that are right.  Messages are kept in
log-ratio form, one float per answer (edge ``e`` = task ``n``, worker ``w``, answer ``l``):

* worker -> task ``y_e``: log of "task n is l" over "task n is one given other class";
* task -> worker ``x_e = log P(y_n = l) / P(y_n != l) + log(K - 1)`` from the other
  workers' messages, ``P(y_n = j) ∝ exp(sum_{e' in n, e' != e} y_{e'} 1[l_{e'} = j])``;
* ``y_e = log I1_e - log I0_e + log(K - 1)`` with ``I1_e = sum_c B(c + 1 + alpha,
  d - 1 - c + beta) E_c`` and ``I0_e = sum_c B(c + alpha, d - c + beta) E_c`` where ``E_c``
  is the leave-one-out elementary symmetric polynomial of the other edges' weights.

The worker factor is computed through the Beta integral it comes from,
``sum_c B(c + a, d' - c + b) E_c(v) = int_0^1 q^(a-1) (1-q)^(b-1) prod_i ((1-q) + q v_i) dq``:
with normalised weights ``w1 = sigmoid(x)``, ``w0 = 1 - w1``,

    I1_e = int q^(alpha-1) (1-q)^(beta-1) * q * prod_{e' != e} (w0_e' (1-q) + w1_e' q) dq

(``I0_e`` with ``1 - q`` instead of ``q``).  The integrand is a polynomial of degree ``d``
times the Beta weight, so Gauss-Jacobi quadrature with ``ceil((d + 1) / 2)`` nodes is *exact*
(the same numbers as the elementary-symmetric-polynomial recursion in log space; tested
against it).  The leave-one-out product is ``exp(S(q_s) - log L_e(q_s))`` with
``S(q) = sum_e log L_e(q)``: one shared log-sum per node and a division per edge, every term
positive, so there is no cancellation and no over/underflow at any degree.  Nodes whose
weighted product is below ``exp(-140)`` of the largest are skipped (a negligible, bounded
truncation), found by a 64-node coarse scan (the weighted product is unimodal in ``q``);
when a worker's answers are informative its mass spans ``O(sqrt(d))`` nodes, so it costs
about ``O(d^1.5)`` instead of the ``O(d^2)`` of the recursion.  ``backend="numba"`` runs
the same arithmetic in one compiled loop.  Above 2047 answers the rule is
capped at 1024 nodes: no longer exact in exact arithmetic, but the integrand is then a
peak of width ``~ sqrt(q (1 - q) / d)`` that such a rule integrates to rounding error
(checked against the recursion for a worker with 5000 answers).

Decision ``argmax_j sum_{e in n} y_e 1[l_e = j]`` (``probas_`` = its softmax).  Messages start
at ``y = 1``; iteration stops when ``max |tanh(y_new / 2) - tanh(y / 2)| <= tol``.

Mean field (:class:`MeanField`, ``"mf"``)
-----------------------------------------
Variational EM with ``q(y_n) q(q_w)``, ``q(q_w) = Beta(alpha + sum_e P(y_n = l_e),
beta + sum_e (1 - P(y_n = l_e)))`` and ``log q(y_n = j) = sum_e (1[l_e = j] E[log q_w] +
1[l_e != j] (E[log(1 - q_w)] - log(K - 1))) + const``, ``E[log q] = digamma(a) -
digamma(a + b)``.  ``history_`` is the ELBO (non-decreasing).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
from scipy.special import expit

from ..core import kernels
from ..core.base import Tags
from ..core.data import CrowdLabels
from ..core.stats import (
    beta_expected_logs,
    beta_kl,
    clamp_to_gold,
    class_sums,
    gauss_jacobi,
    logsumexp,
    vote_fractions,
)
from .base import BaseAggregator

__all__ = ["BeliefPropagation", "MeanField"]

#: task -> worker log-ratios are clipped here (a probability of 1 - 2e-22): keeps every
#: edge weight >= exp(-50) so the per-edge division by the weight can never overflow
_X_MAX = 50.0
#: Gauss-Jacobi rules grow in powers of two up to this many nodes
_MAX_NODES = 1024
#: workers whose rule has at most this many nodes are evaluated on every node, in batches
_SMALL_NODES = 64
#: nodes whose weighted product is below exp(-_TRUNC) of the largest are skipped
_TRUNC = 140.0
#: coarse grid size of the large-worker node search
_COARSE = 64
#: cells per (edges x nodes) block
_BLOCK = 1 << 20
#: ``backend="auto"`` compiles the worker loop from this many answers on
_NUMBA_MIN_LABELS = 5_000


def _n_nodes(degree: np.ndarray) -> np.ndarray:
    """Rule size per worker: the smallest power of two >= ceil((d + 1) / 2), capped."""
    need = np.maximum((degree + 2) // 2, 1)
    n = 1 << np.ceil(np.log2(need)).astype(np.int64)
    return np.minimum(n, _MAX_NODES)


def _edge_weights(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(w0, w1) = (sigmoid(-x), sigmoid(x))``: P(answer wrong), P(answer right)."""
    return expit(-x), expit(x)


def _integrals_block(w0, w1, starts, q, omq, logw):
    """Leave-one-out integrals for a block of whole workers on one node set.

    ``w0, w1``: edge weights of the block, grouped by worker (contiguous); ``starts``: the
    first edge of each worker inside the block.  Returns per edge ``log I1, log I0`` and per
    worker ``E[q]`` under the worker's full belief.
    """
    lik = w0[:, None] * omq[None, :] + w1[:, None] * q[None, :]  # (E, S), all > 0
    logsum = np.add.reduceat(np.log(lik), starts, axis=0)  # (W, S): S(q_s) per worker
    logsum += logw
    top = logsum.max(axis=1, keepdims=True)
    amp = np.exp(logsum - top)  # (W, S) in [0, 1]
    sizes = np.diff(np.append(starts, len(w0)))
    owner = np.repeat(np.arange(len(starts)), sizes)
    inv = np.reciprocal(lik, out=lik)
    i1 = np.einsum("es,es->e", inv, (amp * q)[owner])
    i0 = np.einsum("es,es->e", inv, (amp * omq)[owner])
    mean_q = (amp * q).sum(axis=1) / amp.sum(axis=1)
    return np.log(i1), np.log(i0), mean_q


def _log_products(w0, w1, q, omq) -> np.ndarray:
    """``S(q_s) = sum_e log(w0_e (1 - q_s) + w1_e q_s)`` per node, for one worker.

    Products of up to 12 factors (each >= exp(-50)) are formed before taking the log, which
    stays far above the underflow threshold and costs one log per 12 cells.
    """
    lik = np.multiply.outer(w0, omq)
    lik += np.multiply.outer(w1, q)
    e = len(w0)
    full = e - e % 12
    out = np.log(lik[:full].reshape(-1, 12, len(q)).prod(axis=1)).sum(axis=0)
    if full < e:
        out += np.log(lik[full:]).sum(axis=0)
    return out, lik


def _large_worker(w0, w1, q, omq, logw):
    """One worker with a large rule: coarse search for the mass, then the nodes around it.

    Returns ``log I1, log I0`` per edge and ``E[q]`` (a 1-element array).
    """
    n = len(q)
    stride = max(n // _COARSE, 1)
    coarse = np.unique(np.append(np.arange(0, n, stride), n - 1))
    vals = _log_products(w0, w1, q[coarse], omq[coarse])[0] + logw[coarse]
    peak = int(np.argmax(vals))
    low = vals < vals[peak] - _TRUNC
    # the weighted product is unimodal in q: everything beyond a coarse node that is already
    # below the threshold is below it too (the threshold is relative to a value <= the max)
    left = np.flatnonzero(low[:peak])
    right = np.flatnonzero(low[peak + 1:])
    lo = coarse[left[-1]] + 1 if len(left) else 0
    hi = coarse[peak + 1 + right[0]] if len(right) else n
    q, omq, logw = q[lo:hi], omq[lo:hi], logw[lo:hi]
    logsum, lik = _log_products(w0, w1, q, omq)
    logsum += logw
    amp = np.exp(logsum - logsum.max())
    vec = np.column_stack([amp * q, amp * omq])
    integrals = np.reciprocal(lik, out=lik) @ vec  # (E, 2)
    logs = np.log(integrals)
    return logs[:, 0], logs[:, 1], np.array([vec[:, 0].sum() / amp.sum()])


class _WorkerFactors:
    """Exact one-coin worker factors of a fixed answer graph, evaluated on edge messages."""

    def __init__(
        self, worker: np.ndarray, n_workers: int, a: float, b: float, use_numba: bool
    ) -> None:
        self.order = np.argsort(worker, kind="stable")  # edges grouped by worker
        degree = np.bincount(worker, minlength=n_workers)
        self.degree = degree
        self.a, self.b = float(a), float(b)
        ptr = np.zeros(n_workers + 1, dtype=np.int64)
        np.cumsum(degree, out=ptr[1:])
        self.ptr = ptr
        nodes = _n_nodes(degree)
        active = degree > 0
        sizes = np.unique(nodes[active])
        kern = kernels.compiled_kernels() if use_numba else None
        self.loop = None if kern is None else kern.bp_worker_messages
        if self.loop is not None:
            rules = [gauss_jacobi(int(n), self.a, self.b) for n in sizes]
            self.rule_of = np.searchsorted(sizes, nodes).clip(0, max(len(sizes) - 1, 0))
            self.rule_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
            self.rules = tuple(
                np.concatenate([r[i] for r in rules]) if rules else np.zeros(0) for i in range(3)
            )
            return
        self.small: list[tuple[int, np.ndarray]] = []  # (n_nodes, workers)
        self.large: list[tuple[int, np.ndarray]] = []
        for n in sizes:
            members = np.flatnonzero(active & (nodes == n))
            (self.small if n <= _SMALL_NODES else self.large).append((int(n), members))

    def messages(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Worker -> task log-ratios ``log I1 - log I0`` per edge, and ``E[q_w]`` per worker."""
        xs = np.clip(x[self.order], -_X_MAX, _X_MAX)
        w0, w1 = _edge_weights(xs)
        out = np.empty_like(xs)
        mean_q = np.full(len(self.degree), self.a / (self.a + self.b))
        if self.loop is not None:
            q, omq, logw = self.rules
            self.loop(w0, w1, self.ptr, self.rule_of, self.rule_ptr, q, omq, logw,
                      _SMALL_NODES, _COARSE, _TRUNC, out, mean_q)
        else:
            self._numpy_messages(w0, w1, out, mean_q)
        y = np.empty_like(out)
        y[self.order] = out
        return y, mean_q

    def _numpy_messages(self, w0, w1, out, mean_q) -> None:
        for n, members in self.small:
            q, omq, logw = gauss_jacobi(n, self.a, self.b)
            for block in _blocks(members, self.degree, n):
                starts = self.ptr[block]
                ends = self.ptr[block + 1]
                idx = _ranges(starts, ends)
                local = np.concatenate([[0], np.cumsum(ends - starts)[:-1]])
                l1, l0, mq = _integrals_block(w0[idx], w1[idx], local, q, omq, logw)
                out[idx] = l1 - l0
                mean_q[block] = mq
        for n, members in self.large:
            q, omq, logw = gauss_jacobi(n, self.a, self.b)
            for w in members:
                sl = slice(self.ptr[w], self.ptr[w + 1])
                l1, l0, mq = _large_worker(w0[sl], w1[sl], q, omq, logw)
                out[sl] = l1 - l0
                mean_q[w] = mq[0]


def _blocks(members: np.ndarray, degree: np.ndarray, n: int):
    """Split workers into runs of about ``_BLOCK`` (edges x nodes) cells each."""
    cells = degree[members].astype(np.int64) * n
    group = (np.cumsum(cells) - cells) // _BLOCK
    bounds = np.flatnonzero(np.diff(group)) + 1
    yield from np.split(members, bounds)


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(s, e)`` for every pair."""
    lengths = ends - starts
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return np.arange(lengths.sum()) + offsets


# ============================================================================ task side
def _lse_excluding(t: np.ndarray) -> np.ndarray:
    """``log sum_{j' != j} exp(t[n, j'])`` for every (n, j), stably (no subtraction)."""
    k = t.shape[1]
    if k == 2:
        return t[:, ::-1].copy()
    out = np.full_like(t, -np.inf)
    prefix = np.logaddexp.accumulate(t, axis=1)  # lse of t[:, :j+1]
    suffix = np.logaddexp.accumulate(t[:, ::-1], axis=1)[:, ::-1]  # lse of t[:, j:]
    out[:, 1:] = prefix[:, :-1]
    out[:, :-1] = np.logaddexp(out[:, :-1], suffix[:, 1:])
    return out


def _softmax(logits: np.ndarray) -> np.ndarray:
    return np.exp(logits - logsumexp(logits, axis=1, keepdims=True))


class _OneCoinBase(BaseAggregator):
    """Shared checks and prediction of the one-coin Beta-prior methods."""

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), has_worker_model=True)

    def _check_prior(self) -> tuple[float, float]:
        a, b = float(self.alpha), float(self.beta)
        if not (np.isfinite(a) and np.isfinite(b) and a > 0 and b > 0):
            raise ValueError(f"alpha and beta must be positive Beta parameters, got ({a}, {b})")
        if self.max_iter < 0:
            raise ValueError(f"max_iter must be >= 0, got {self.max_iter}")
        return a, b

    def _set_worker_outputs(
        self, data: CrowdLabels, mean_q: np.ndarray, answer_weight: np.ndarray
    ) -> None:
        self.skills_ = pd.Series(mean_q, index=data.workers, name="skill")
        self._answer_weight = answer_weight

    def _predict_proba_codes(self, data: CrowdLabels) -> np.ndarray:
        if len(self.classes_) == 1:
            return np.ones((data.n_tasks, 1))
        return _softmax(class_sums(data, self._answer_weight[data.worker]))


# ============================================================================ BP
class BeliefPropagation(_OneCoinBase):
    """Sum-product belief propagation for the one-coin model (Liu, Peng & Ihler, 2012).

    Worker reliabilities ``q_w ~ Beta(alpha, beta)`` are integrated out exactly (see the
    module docstring); binary data is the paper's algorithm, K > 2 its one-coin extension
    (wrong answers uniform over the other K - 1 classes).  Registry name ``bp``.

    Parameters
    ----------
    alpha, beta : float, default 2.0, 1.0
        Beta prior of a worker's probability of answering correctly (Beta(2, 1) as in the
        paper's demo: mean 2/3, density rising towards 1).
    max_iter : int, default 100
        Maximum number of message-passing rounds.
    tol : float, default 1e-3
        Stop when every worker -> task message moves by at most ``tol`` on the
        ``tanh(y / 2)`` scale.
    backend : {"auto", "numpy", "numba"}
        ``"numba"`` runs the worker factors in one compiled loop (same numbers to rounding);
        ``"auto"`` uses it from 5,000 answers on when numba is installed.
    random_state : int, default 0
        Seed of the tie-breaking rule.

    Attributes
    ----------
    skills_ : Series, worker -> posterior mean of ``q_w`` under BP's belief of the worker.
    messages_ : ndarray (n_labels,)
        Final worker -> task log-ratios, one per answer in task order.
    history_ : list of float
        Largest ``|tanh(y_new / 2) - tanh(y / 2)|`` per round.

    Notes
    -----
    Gold labels fix their tasks' outgoing messages (the worker is judged on them as on a
    certain task) and clamp the output.  ``predict_proba`` on new tasks weighs each answer
    by ``log(E[q_w] / (1 - E[q_w])) + log(K - 1)``.  Class prior: uniform, as in the paper.
    """

    def __crowd_tags__(self) -> Tags:
        # probas_ are the beliefs of leave-one-out messages; predict_proba weighs each answer
        # with its worker's full message
        return dataclasses.replace(super().__crowd_tags__(), predict_matches_fit=False)

    def __init__(
        self,
        alpha: float = 2.0,
        beta: float = 1.0,
        max_iter: int = 100,
        tol: float = 1e-3,
        backend: str = "auto",
        random_state: int | None = 0,
    ) -> None:
        self.alpha = alpha
        self.beta = beta
        self.max_iter = max_iter
        self.tol = tol
        self.backend = backend
        self.random_state = random_state

    def _use_numba(self, n_labels: int) -> bool:
        if self.backend not in ("auto", "numba", "numpy"):
            raise ValueError(f"backend must be 'auto', 'numba' or 'numpy', got {self.backend!r}")
        if self.backend == "numpy":
            return False
        have = kernels.compiled_kernels() is not None
        if self.backend == "numba" and not have:
            raise ImportError("backend='numba' needs numba: pip install 'crowdlearn[fast]'")
        return have and (self.backend == "numba" or n_labels >= _NUMBA_MIN_LABELS)

    def _fit(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None) -> np.ndarray:
        a, b = self._check_prior()
        use_numba = self._use_numba(data.n_labels)
        k, n = data.n_classes, data.n_tasks
        if k == 1:
            self._set_worker_outputs(data, np.ones(data.n_workers), np.zeros(data.n_workers))
            self.messages_ = np.zeros(data.n_labels)
            return np.ones((n, 1))
        log_k1 = np.log(k - 1.0)
        factors = _WorkerFactors(data.worker, data.n_workers, a, b, use_numba)
        edge_task = data.task
        edge_label = data.label
        gold_x = None
        if gold is not None:
            on_gold = gold[edge_task] >= 0
            gold_x = np.where(edge_label[on_gold] == gold[edge_task[on_gold]], _X_MAX, -_X_MAX)

        y = np.ones(data.n_labels)
        mean_q = np.full(data.n_workers, a / (a + b))
        self.converged_ = False
        for it in range(self.max_iter):
            x = self._task_messages(data, y, log_k1)
            if gold_x is not None:
                x[on_gold] = gold_x
            y_new, mean_q = factors.messages(x)
            y_new += log_k1
            delta = float(np.max(np.abs(np.tanh(y_new / 2) - np.tanh(y / 2)), initial=0.0))
            y = y_new
            self.history_.append(delta)
            self._progress_step(delta)
            self.n_iter_ = it + 1
            if delta <= self.tol:
                self.converged_ = True
                break
        self.messages_ = y
        mq = np.clip(mean_q, 1e-300, 1 - 1e-16)
        self._set_worker_outputs(data, mean_q, np.log(mq) - np.log1p(-mq) + log_k1)
        return _softmax(class_sums(data, y))

    @staticmethod
    def _task_messages(data: CrowdLabels, y: np.ndarray, log_k1: float) -> np.ndarray:
        """``x_e``: log-odds that answer e is right given the task's other answers."""
        scores = class_sums(data, y)  # (N, K)
        others = _lse_excluding(scores)
        t, l = data.task, data.label
        return scores[t, l] - y - others[t, l] + log_k1


# ============================================================================ MF
class MeanField(_OneCoinBase):
    """Mean-field variational EM for the one-coin Beta-prior model (Liu et al., 2012).

    Registry name ``mf``.  Same model and parameters as :class:`BeliefPropagation`; the
    posterior is approximated by ``q(y) prod_w Beta(q_w; a_w, b_w)``.

    Parameters
    ----------
    alpha, beta : float, default 2.0, 1.0
        Beta prior of a worker's probability of answering correctly.
    max_iter : int, default 100
    tol : float, default 1e-7
        Stop when the ELBO per answer improves by less than ``tol``.
    random_state : int, default 0

    Attributes
    ----------
    reliability_params_ : ndarray (n_workers, 2)
        Posterior Beta parameters ``(a_w, b_w)`` of each worker's reliability.
    skills_ : Series, worker -> posterior mean ``a_w / (a_w + b_w)``.
    history_ : list of float
        ELBO after every E-step (non-decreasing).

    Notes
    -----
    Initialised from the soft majority vote (or ``init``).  Gold tasks are clamped during
    the fit.  ``predict_proba`` weighs an answer by ``E[log q_w] - E[log(1 - q_w)] +
    log(K - 1)``.
    """

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), accepts_init=True)

    def __init__(
        self,
        alpha: float = 2.0,
        beta: float = 1.0,
        max_iter: int = 100,
        tol: float = 1e-7,
        random_state: int | None = 0,
    ) -> None:
        self.alpha = alpha
        self.beta = beta
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _fit(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None) -> np.ndarray:
        a, b = self._check_prior()
        k, n, m = data.n_classes, data.n_tasks, data.n_workers
        if k == 1:
            self.reliability_params_ = np.column_stack(
                [a + data.labels_per_worker(), np.full(m, b)]
            ).astype(float)
            self._set_worker_outputs(data, np.ones(m), np.zeros(m))
            return np.ones((n, 1))
        log_k1 = np.log(k - 1.0)
        degree = data.labels_per_worker().astype(np.float64)
        post = init if init is not None else vote_fractions(data)
        post = clamp_to_gold(post, gold)
        known = None if gold is None else np.flatnonzero(gold >= 0)
        n_answers = max(data.n_labels, 1)
        prev = -np.inf
        self.converged_ = False
        ab = self._m_step(data, post, degree, a, b)
        for it in range(self.max_iter):
            if it:
                ab = self._m_step(data, post, degree, a, b)
            right, wrong = beta_expected_logs(ab[:, 0], ab[:, 1])
            logits = self._logits(data, right, wrong, log_k1)
            lse = logsumexp(logits, axis=1)
            post = np.exp(logits - lse[:, None])
            elbo = float(lse.sum())
            if known is not None:
                g = gold[known]
                elbo += float(np.sum(logits[known, g] - lse[known]))
                post = clamp_to_gold(post, gold)
            elbo -= float(beta_kl(ab[:, 0], ab[:, 1], a, b, (right, wrong)).sum())
            if self._record_iteration(elbo, prev, n_answers):
                break
            prev = elbo
        self.reliability_params_ = ab
        right, wrong = beta_expected_logs(ab[:, 0], ab[:, 1])
        self._set_worker_outputs(data, ab[:, 0] / ab.sum(axis=1), right - wrong + log_k1)
        return post

    @staticmethod
    def _m_step(data, post, degree, a, b) -> np.ndarray:
        right = np.bincount(
            data.worker, weights=post[data.task, data.label], minlength=data.n_workers
        )
        return np.column_stack([a + right, b + degree - right])

    @staticmethod
    def _logits(data, right, wrong, log_k1) -> np.ndarray:
        """``log p(y_n = j)`` up to the E-step normaliser, uniform class prior included."""
        k = data.n_classes
        base = np.bincount(data.task, weights=(wrong - log_k1)[data.worker], minlength=data.n_tasks)
        logits = class_sums(data, (right - wrong + log_k1)[data.worker])
        logits += base[:, None] - np.log(k)
        return logits
