"""CoupledNMF: co-occurrence imputation and symmetric NMF of the stacked pair moments.

Ibrahim & Fu, "Crowdsourcing via annotator co-occurrence imputation and provable symmetric
nonnegative matrix factorization", ICML 2021.

Under the Dawid-Skene model (papers' orientation ``A_m[answer, true]``, columns sum to 1,
``D = diag(d)`` the class prior) the pairwise co-occurrence of two different workers is
``R_{m,n} = E[e_{answer m} e_{answer n}^T] = A_m D A_n^T``.  Stacking all of them::

    X = [R_{m,n}]_{m,n} = H H^T,      H = [A_1; ...; A_M] D^{1/2}  ((M K) x K, H >= 0)

so ``X`` is a rank-K, symmetric, nonnegative-factorisable matrix.  The algorithm:

1. **Pair moments.**  ``R_{m,n}`` is the K x K co-occurrence count of workers ``m`` and
   ``n`` over their shared tasks divided by that number, kept when they share at least
   ``min_shared`` tasks (at most ``max_partners`` partners per worker) -- the same sparse
   ``incidence^T @ incidence`` product as :class:`~crowdlearn.aggregation.multispa.MultiSPA`.
2. **Imputation.**  The other blocks (and the diagonal blocks, which the data do not give:
   a worker's answer co-occurs only with itself) are unknown.  The paper fills them through
   well-observed pivots (``R_{m,n} = R_{m,l} R_{j,l}^{-1} R_{j,n}``) or a least-squares
   completion; here the completion is the least-squares one, solved by *hard impute*
   (Mazumder, Hastie & Tibshirani 2010): start the unknown blocks at ``p_m p_n^T``
   (product of the answer marginals, the rank-one part of ``X``), then repeat
   "rank-K PSD approximation of ``X``; copy it into the unknown blocks only".  The top-K
   eigenpairs come from warm-started subspace iteration, never a full eigendecomposition.
3. **Symmetric NMF.**  With ``X ≈ F F^T`` (``F = U_K S_K^{1/2}``) every symmetric
   factor is ``H = F Q`` with ``Q`` orthogonal; the paper's provable SymNMF (after Huang,
   Sidiropoulos & Swami, "Non-negative matrix factorization revisited: uniqueness and
   algorithm for symmetric decomposition", IEEE TSP 2014) looks for the ``Q`` making
   ``F Q`` nonnegative by alternating ``H = max(F Q, 0)`` and the orthogonal Procrustes
   step ``Q = polar(F^T H)``.  ``Q`` is initialised by SPA on the rows of ``F`` scaled onto
   the hyperplane of the leading eigenvector (rows of ``H`` are conic combinations of
   anchor rows ``c_j e_j``, so SPA's picks give the columns of ``Q`` directly).
4. **Read-off.**  Worker ``m``'s block ``H_m`` has column sums ``sqrt(d_j)``; its
   columns normalised to 1 are ``A_m``; ``d`` is the squared mean column sum.  ``H`` is one
   matrix, so the classes are consistent across workers by construction (no per-worker
   permutation alignment, unlike MultiSPA); the one global class order maximises the
   answer-weighted diagonal mass (as in :mod:`~crowdlearn.aggregation.moments`).
5. Labels by the MAP rule, then optional ``n_em_iter`` Dawid-Skene EM rounds (the
   ``MomentThenEM`` machinery of :mod:`~crowdlearn.aggregation.moments`, with its
   fallback, ``compare_with_mv`` safeguard and confusion conversion).

Scale: the factorised matrix is dense ``(S K) x (S K)``; ``S`` is capped at ``max_workers``
and at ``max_dim // K`` (the most active workers; ties by code).  Workers left out, and
workers outside the ``min_partners``-core of the observed-pair graph or outside the largest
connected component of that core (two crowds sharing no worker), are completed from the
MAP posterior of the factorised workers as MultiSPA completes its unidentified workers, plus
one refinement round against the posterior of all workers (:func:`~crowdlearn.aggregation.moments.complete_unidentified`;
``identified_`` says which were factorised).

Confusions are exposed in the library orientation ``confusions_[w, true, answered]`` (rows
sum to 1); internally the code works with columns = true class and converts once.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ..core.stats import TINY
from .moments import (
    Degenerate,
    MomentThenEM,
    active_workers,
    complete_unidentified,
    diagonal_order,
    floored_columns,
    normalise_columns,
    pair_moments,
    prior_or_uniform,
    successive_projection,
    worker_rank,
)

__all__ = ["CoupledNMF"]


def _core(s: int, pi: np.ndarray, pl: np.ndarray, min_deg: int) -> np.ndarray:
    """Mask of the ``min_deg``-core of the graph on ``s`` nodes with edges ``(pi, pl)``."""
    alive = np.ones(s, dtype=bool)
    while True:
        e = alive[pi] & alive[pl]
        deg = np.bincount(pi[e], minlength=s) + np.bincount(pl[e], minlength=s)
        drop = alive & (deg < min_deg)
        if not drop.any():
            return alive
        alive &= ~drop


def _largest_component(alive: np.ndarray, pi: np.ndarray, pl: np.ndarray, n_answers: np.ndarray,
                       rank: np.ndarray) -> np.ndarray:
    """Mask of the largest connected component of the ``alive`` nodes of the graph ``(pi, pl)``.

    Two crowds that share no observed pair (no worker and no task in common) leave every
    block between them unknown, and the rank-K completion then couples their classes in an
    arbitrary order: one global class order cannot fit both, so one crowd came out with its
    classes mixed (0.57 accuracy where it alone gave 0.83).  Only the largest component is
    factorised; the others are completed from the posterior like any unfactorised worker.
    Ties: the component with more answers, then the one holding the worker first in ``rank``
    (never the sort order of the ids).
    """
    s = len(alive)
    e = alive[pi] & alive[pl]
    graph = sp.coo_matrix((np.ones(int(e.sum())), (pi[e], pl[e])), shape=(s, s))
    _, comp = connected_components(graph, directed=False)
    nodes = np.flatnonzero(alive)
    if len(np.unique(comp[nodes])) <= 1:
        return alive
    size = np.bincount(comp[nodes], minlength=s)
    answers = np.bincount(comp[nodes], weights=n_answers[nodes], minlength=s)
    first = np.full(s, np.iinfo(np.int64).max)
    np.minimum.at(first, comp[nodes], rank[nodes])
    best = int(np.lexsort((first, -answers, -size))[0])
    return alive & (comp == best)


# ===================================================================== linear algebra
def _top_psd(x: np.ndarray, q: np.ndarray, k: int, n_steps: int):
    """Top-``k`` eigenpairs of symmetric ``x`` by ``n_steps`` of subspace iteration from ``q``.

    Returns ``(vals, vecs, q)``: the ``k`` largest Ritz values clipped at 0 (a PSD
    approximation), their vectors, and the updated (oversampled) basis for a warm restart.
    """
    for _ in range(n_steps):
        q, _ = np.linalg.qr(x @ q)
    small = q.T @ x @ q
    vals, vecs = np.linalg.eigh((small + small.T) / 2)
    idx = np.argsort(vals)[::-1][:k]
    return np.maximum(vals[idx], 0.0), q @ vecs[:, idx], q


def _polar(m: np.ndarray) -> np.ndarray:
    """The orthogonal factor of ``m`` (solution of the orthogonal Procrustes problem)."""
    u, _, vt = np.linalg.svd(m)
    return u @ vt


def _symnmf_rotation(f: np.ndarray, n_iter: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Orthogonal ``Q`` making ``f Q`` nonnegative (Huang, Sidiropoulos & Swami 2014).

    SPA initialisation on the rows of ``f`` divided by their leading coordinate, then
    alternating ``H = max(f Q, 0)`` / ``Q = polar(f^T H)``.  Returns ``(g, Q, residual)``:
    ``g`` is ``f`` with its leading column made nonnegative on the whole (eigenvector signs
    are arbitrary), ``H = max(g Q, 0)`` the factor, ``residual`` the relative negative mass
    of ``g Q`` (0 when ``X`` is exactly SymNMF-factorisable).
    """
    k = f.shape[1]
    lead = f[:, 0] if f[:, 0].sum() >= 0 else -f[:, 0]
    sgn = 1.0 if f[:, 0].sum() >= 0 else -1.0
    g = f * np.array([sgn] + [1.0] * (k - 1))
    ok = lead > 1e-3 * max(lead.max(initial=0.0), TINY)
    if ok.sum() < k:
        raise Degenerate("the imputed co-occurrence matrix has fewer than K usable rows")
    scaled = g[ok] / lead[ok, None]
    picked = np.flatnonzero(ok)[successive_projection(scaled.T, k)]
    if len(picked) < k:
        raise Degenerate("SPA found fewer than K anchor rows in the imputed matrix")
    q = g[picked].T / np.linalg.norm(g[picked], axis=1)
    q = _polar(q)
    for _ in range(n_iter):
        h = np.maximum(g @ q, 0.0)
        q_new = _polar(g.T @ h)
        if np.max(np.abs(q_new - q)) < 1e-10:
            q = q_new
            break
        q = q_new
    fq = g @ q
    neg = float(np.abs(np.minimum(fq, 0)).sum() / max(np.abs(fq).sum(), TINY))
    return g, q, neg


# ========================================================================= estimator
class CoupledNMF(MomentThenEM):
    """CNMF: imputed pairwise co-occurrences, symmetric NMF, MAP labels (+ optional EM).

    Ibrahim & Fu (ICML 2021); see the module docstring for the model
    ``X = [A_m D A_n^T]_{m,n} = H H^T`` and the algorithm.

    Parameters
    ----------
    min_shared : int, default 10
        A worker pair's co-occurrence block is observed only if the two share at least this
        many tasks (blocks from a handful of tasks are mostly noise); others are imputed.
    max_partners : int, default 100
        At most this many observed partners (the most co-labelling) per worker.
    min_partners : int, default 5
        Only the ``min_partners``-core of the observed-pair graph is factorised (workers
        with fewer observed partners are dropped repeatedly and completed from the
        posterior): a worker whose rows of ``H`` rest on one or two noisy blocks is
        mostly invented by the completion.
    max_workers : int, default 500
        At most this many (most active) workers enter the factorisation ...
    max_dim : int, default 2000
        ... and at most ``max_dim // K`` of them, so the dense stacked matrix stays
        ``<= max_dim x max_dim``.  The others are completed from the posterior.
    n_impute_iter : int, default 100
        Hard-impute rounds (each: 2 subspace-iteration steps + rank-K projection); stops
        earlier when the imputed blocks change by less than 1e-6 (relative).
    n_nmf_iter : int, default 300
        Alternating ``H = max(FQ, 0)`` / Procrustes rounds of the symmetric NMF.
    floor : float, default 0.01
        The least-squares / NMF estimates put exact zeros on small confusion entries, which
        the MAP rule punishes with ``log(1e-6)``; every column is floored at
        ``min(floor, 0.1 / K)`` and renormalised before the MAP step (0 disables), so
        that one unseen (true, answered) pair cannot veto a class.
    n_em_iter : int, default 0
        Dawid-Skene EM rounds after the moment estimate (the paper's "-EM" variant: 10).
    tol, alpha, diag_alpha, prior_alpha
        EM settings of :class:`~crowdlearn.aggregation.dawid_skene.DawidSkene`;
        ``alpha``/``diag_alpha`` also smooth the completion of non-factorised workers.
    compare_with_mv : bool, default True
        Also run EM from majority vote and keep the higher likelihood; with
        ``n_em_iter=0``, one round from each judges the moment estimate (see
        :mod:`~crowdlearn.aggregation.moments`).
    random_state : int, default 0
        Seed of tie-breaking (the method itself is deterministic: the subspace iteration
        starts from the co-occurrence columns of the two workers first in
        :func:`~crowdlearn.aggregation.moments.worker_rank`).

    Attributes
    ----------
    confusions_ : ndarray (n_workers, n_classes, n_classes)
        ``[w, true, answered]``, rows sum to 1.
    moment_confusions_ : same orientation, the CNMF estimate before EM (None on fallback).
    identified_ : ndarray of bool (n_workers,), workers whose confusion came from ``H``.
    observed_fraction_ : float, share of off-diagonal worker pairs whose block was observed.
    nmf_residual_ : float, relative negative mass of ``F Q`` left by the SymNMF.
    priors_, skills_, init_, fallback_, labels_, probas_, history_, n_iter_, converged_
        As for every :class:`~crowdlearn.aggregation.base.ConfusionAggregator`.
    """

    _max_classes = 50

    def __init__(
        self,
        min_shared: int = 10,
        max_partners: int = 100,
        min_partners: int = 5,
        max_workers: int = 500,
        max_dim: int = 2000,
        n_impute_iter: int = 100,
        n_nmf_iter: int = 300,
        floor: float = 0.01,
        n_em_iter: int = 0,
        tol: float = 0.0,
        alpha: float = 0.0,
        diag_alpha: float = 1.0,
        prior_alpha: float = 1.0,
        compare_with_mv: bool = True,
        random_state: int | None = 0,
    ) -> None:
        self.min_shared = min_shared
        self.max_partners = max_partners
        self.min_partners = min_partners
        self.max_workers = max_workers
        self.max_dim = max_dim
        self.n_impute_iter = n_impute_iter
        self.n_nmf_iter = n_nmf_iter
        self.floor = floor
        self.n_em_iter = n_em_iter
        self.tol = tol
        self.alpha = alpha
        self.diag_alpha = diag_alpha
        self.prior_alpha = prior_alpha
        self.compare_with_mv = compare_with_mv
        self.random_state = random_state

    # ------------------------------------------------------------------ moments
    def _moment_step(self, data):
        m, k = data.n_workers, data.n_classes
        self.identified_ = np.zeros(m, dtype=bool)
        self.observed_fraction_ = 0.0
        self.nmf_residual_ = np.nan
        if m < 2:
            raise Degenerate("fewer than two workers (no co-occurrences)")
        cap = max(2, min(int(self.max_workers), int(self.max_dim) // k))
        active = active_workers(data, cap)
        pi, pl, cnt, blocks = pair_moments(data, active, self.min_shared, self.max_partners)
        # a worker's rows of H are pinned down only by its observed blocks: keep the
        # min_partners-core of the observed-pair graph (repeatedly drop workers with fewer
        # observed partners), so that the completion is not asked to invent whole workers
        has = _core(len(active), pi, pl, int(self.min_partners))
        has &= _largest_component(has, pi, pl, data.labels_per_worker()[active],
                                  worker_rank(data)[active])
        if has.sum() < 3:
            raise Degenerate(
                f"fewer than three workers have min_partners={self.min_partners} partners "
                f"sharing at least min_shared={self.min_shared} tasks"
            )
        both = has[pi] & has[pl]
        pi, pl, cnt, blocks = pi[both], pl[both], cnt[both], blocks[both]
        remap = np.full(len(active), -1, dtype=np.int64)
        remap[has] = np.arange(int(has.sum()))
        active = active[has]
        pi, pl = remap[pi], remap[pl]
        s = len(active)
        self.observed_fraction_ = len(pi) / (s * (s - 1) / 2)

        x4, h4 = self._factorise(data, active, pi, pl, blocks, s, k)
        colsum = h4.sum(axis=1)  # (S, K): sqrt(d_j) for every worker
        sqrt_d = colsum.mean(axis=0)
        if not np.all(sqrt_d > 0):
            raise Degenerate("the symmetric NMF left a class with no mass")
        est = normalise_columns(h4)  # (S, K answer, K class), column-stochastic
        n_answers = data.labels_per_worker()[active]
        perm = diagonal_order(est, n_answers)
        est = est[:, :, perm]
        prior = prior_or_uniform((sqrt_d**2)[perm])
        ident = np.zeros(m, dtype=bool)
        ident[active] = True
        self.identified_ = ident
        conf_cols = np.full((m, k, k), 1.0 / k)
        conf_cols[active] = floored_columns(est, self.floor)
        # workers outside the factorisation: soft counts against the factorised posterior
        conf_cols = complete_unidentified(
            data, conf_cols, ident, prior, self.alpha, self.diag_alpha, n_rounds=2
        )
        return conf_cols, prior

    def _factorise(self, data, active, pi, pl, blocks, s, k):
        """Impute the stacked matrix and factor it; returns (X as (S,K,S,K), H as (S,K,K))."""
        n = s * k
        # answer marginals p_m (smoothed) seed the unknown blocks with p_m p_n^T
        marg = np.zeros((data.n_workers, k))
        np.add.at(marg, (data.worker, data.label), 1.0)
        p = (marg[active] + 0.5) / (marg[active].sum(axis=1, keepdims=True) + 0.5 * k)
        x4 = np.einsum("ia,lb->ialb", p, p)
        known = np.zeros((s, s), dtype=bool)
        known[pi, pl] = known[pl, pi] = True
        x4[pi, :, pl, :] = blocks
        x4[pl, :, pi, :] = blocks.transpose(0, 2, 1)
        x = x4.reshape(n, n)
        unknown = ~np.repeat(np.repeat(known, k, axis=0), k, axis=1)
        # start the subspace iteration from the columns of the workers first in worker_rank
        # (2K columns: the oversampled basis), not from a random draw: a draw is made in the
        # order of the codes, so new worker ids would start it elsewhere and, the iteration
        # being stopped early, move the result
        lead = np.argsort(worker_rank(data)[active])[: max(1, min(s, 2))]
        q = x[:, (lead[:, None] * k + np.arange(k)).ravel()]
        vals, vecs, q = _top_psd(x, q, k, 30)
        for it in range(int(self.n_impute_iter)):
            low = (vecs * vals) @ vecs.T
            # convergence is checked every 5th round only: the check costs two more passes
            # over the dense matrix
            if it % 5 == 4:
                change = np.abs(low[unknown] - x[unknown]).sum() / max(np.abs(x).sum(), TINY)
                np.copyto(x, low, where=unknown)
                if change < 1e-6:
                    break
            else:
                np.copyto(x, low, where=unknown)
            vals, vecs, q = _top_psd(x, q, k, 2)
        if not np.all(vals > 0):
            raise Degenerate("the imputed co-occurrence matrix has rank below K")
        f = vecs * np.sqrt(vals)
        g, rot, neg = _symnmf_rotation(f, int(self.n_nmf_iter))
        self.nmf_residual_ = neg
        h = np.maximum(g @ rot, 0.0)
        return x.reshape(s, k, s, k), h.reshape(s, k, k)
