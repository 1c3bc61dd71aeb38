"""TensorADMM: coupled factorisation of second- and third-order co-occurrences by AO-ADMM.

Traganitis, Pagès-Zamora & Giannakis, "Blind multiclass ensemble classification", IEEE Trans.
Signal Processing 66(18), 2018 (the "TensorADMM" baseline of Ibrahim, Fu et al., NeurIPS 2019 /
ICML 2021; reference code ``EstConfMat_AO_ADMM``).  Under the Dawid-Skene model (papers'
orientation: ``A_m[answer, true]``, columns on the probability simplex, prior ``d`` on the
simplex)::

    R_{m,l}   = E[e_m e_l^T]       = A_m D A_l^T                          (m != l)
    T_{m,l,r} = E[e_m o e_l o e_r] = sum_j d_j A_m[:, j] o A_l[:, j] o A_r[:, j]

and the estimator minimises the coupled least-squares fit::

    sum_{(m,l)} w_{ml} ||R^_{m,l} - A_m D A_l^T||_F^2
        + triple_weight * sum_{(m,l,r)} w_{mlr} ||T^_{m,l,r} - [[d; A_m, A_l, A_r]]||_F^2

subject to every column of every ``A_m`` and ``d`` lying on the simplex, by alternating
optimisation: each ``A_m`` (all workers at once: a proximal Jacobi sweep, each block a
small constrained least-squares problem plus ``(mu/2)||A_m - A_m^prev||^2``, see ``prox``) and then ``d`` are updated by ``n_inner`` ADMM iterations
(AO-ADMM, Huang, Sidiropoulos & Liavas, IEEE TSP 2016: ``X = (Y G^T + rho (Z - U))
(G G^T + rho I)^{-1}``, ``Z = proj_simplex(X + U)``, ``U += X - Z``, ``rho = tr(G G^T)/K``,
duals warm-started across outer rounds), for at most ``n_outer`` rounds or until the
objective changes by less than ``outer_tol`` (relative) -- the reference code's 10 inner /
500 outer / 1e-6 settings, with 100 outer by default.

Statistics (departures from the reference, which uses every worker pair and triple of a
dense crowd):

* pairs as :class:`~crowdlearn.aggregation.multispa.MultiSPA`: shared by at least
  ``min_shared`` tasks, at most ``max_partners`` per worker; ``w_{ml}`` = number of shared
  tasks / mean (inverse-variance weighting of the empirical moments);
* triples ``(m, l, r)`` that share at least ``min_shared_triple`` tasks, at most
  ``max_triples_per_worker`` per worker (the most co-labelling ones, chosen with worker
  ``m`` as anchor) and ``max_triples`` overall.  On sparse crowds few triples qualify and
  the fit is mostly second-order; on dense ones (every worker labels most tasks) the
  third-order terms make the factorisation unique without relying on the initialisation.

Initialisation: the MultiSPA estimate (its confusions already share one class order, which
the alternating updates keep).  Only the ``max_workers`` most active workers with at least
one kept pair are fitted (``identified_``); the others are completed from the fitted
workers' MAP posterior as in :class:`~crowdlearn.aggregation.cnmf.CoupledNMF`.  Labels by the MAP
rule, then optional ``n_em_iter`` Dawid-Skene EM rounds (``MomentThenEM``).

Confusions are exposed as ``confusions_[w, true, answered]`` (rows sum to 1).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..core.data import CrowdLabels
from .moments import (
    Degenerate,
    MomentThenEM,
    active_workers,
    complete_unidentified,
    floored_columns,
    normalise_columns,
    pair_moments,
    prior_or_uniform,
    worker_rank,
)
from .multispa import MultiSPA

__all__ = ["TensorADMM", "project_simplex"]


def project_simplex(v: np.ndarray, axis: int = -1) -> np.ndarray:
    """Euclidean projection of ``v`` onto the probability simplex along ``axis``.

    Sort-based algorithm (Duchi, Shalev-Shwartz, Singer & Chandra, ICML 2008), vectorised.
    """
    x = np.moveaxis(np.asarray(v, dtype=np.float64), axis, -1)
    k = x.shape[-1]
    u = -np.sort(-x, axis=-1)
    css = np.cumsum(u, axis=-1) - 1.0
    idx = np.arange(1, k + 1)
    cond = u - css / idx > 0
    rho = k - 1 - np.argmax(cond[..., ::-1], axis=-1)  # last index where cond holds
    theta = np.take_along_axis(css, rho[..., None], axis=-1) / (rho[..., None] + 1.0)
    return np.moveaxis(np.maximum(x - theta, 0.0), -1, axis)


def _admm(p, q, x, z, u, axis, n_inner):
    """``n_inner`` ADMM steps of ``min 0.5 tr(X P X^T) - tr(X Q^T)``, simplex along ``axis``.

    Batched over the leading dimension: ``p`` (B, K, K) symmetric PSD, ``q``/``x``/``z``/
    ``u`` (B, R, K).  Returns the updated ``(z, u)``; ``z`` is the feasible iterate.
    """
    k = p.shape[-1]
    rho = np.maximum(np.trace(p, axis1=1, axis2=2) / k, 1e-12)[:, None, None]
    chol = np.linalg.inv(p + rho * np.eye(k))
    for _ in range(n_inner):
        x = (q + rho * (z - u)) @ chol
        z = project_simplex(x + u, axis=axis)
        u = u + x - z
    return z, u


def _scatter(index: np.ndarray, s: int) -> sp.csr_matrix:
    """(s x len(index)) 0/1 matrix summing rows of a stacked array into their workers."""
    return sp.csr_matrix(
        (np.ones(len(index)), (index, np.arange(len(index)))), shape=(s, len(index))
    )


def _add(mat: sp.csr_matrix, vals: np.ndarray) -> np.ndarray:
    """``mat @ vals`` over the leading axis of a (P, K, K) array (a fast ``np.add.at``)."""
    return (mat @ vals.reshape(len(vals), -1)).reshape((mat.shape[0],) + vals.shape[1:])


def _triples(data: CrowdLabels, active, pairs, min_count, per_worker, max_total):
    """Worker triples (positions in ``active``) with enough common tasks, and their moments.

    Candidates are triangles of the kept ``pairs`` (``(pi, pl, cnt)``) whose three pair
    counts reach ``min_count`` (a necessary condition), so sparse crowds cost little.  Among
    triples with as many common tasks, those of workers first in
    :func:`~crowdlearn.aggregation.moments.worker_rank` are kept, never the first by code: on
    a dense crowd (every triple shares every task) the codes alone would pick them.
    Returns ``(tri (T, 3), cnt (T,), moments (T, K, K, K))`` where ``moments[t, a, b, c]`` is
    the fraction of the common tasks on which the three answered ``a``, ``b``, ``c``.
    """
    n, k, s = data.n_tasks, data.n_classes, len(active)
    empty = (np.empty((0, 3), np.int64), np.empty(0), np.empty((0, k, k, k)))
    if s < 3 or per_worker < 1 or max_total < 1:
        return empty
    pos = np.full(data.n_workers, -1, dtype=np.int64)
    pos[active] = np.arange(s)
    rank = worker_rank(data)[active]
    keep = pos[data.worker] >= 0
    t_, w_, a_ = data.task[keep].astype(np.int64), pos[data.worker[keep]], data.label[keep]
    # one answer per (task, worker) cell: a repeated answer counts once, and a worker who
    # contradicts itself on a task gives no third-order evidence there (picking one of its
    # answers would make the moments depend on the order of the rows, or on the class names)
    cell = t_ * s + w_
    order = np.lexsort((a_, cell))
    cell, a_sorted = cell[order], a_[order]
    start = np.flatnonzero(np.r_[True, cell[1:] != cell[:-1]])[: len(cell)]
    agree = np.minimum.reduceat(a_sorted, start) == np.maximum.reduceat(a_sorted, start)
    first = order[start[agree]]
    t_, w_, a_ = t_[first], w_[first], a_[first]
    ans = sp.csr_matrix((a_ + 1.0, (t_, w_)), shape=(n, s))  # answer + 1, 0 = no answer
    bin_ = ans.copy()
    bin_.data[:] = 1.0
    by_worker = ans.tocsc()
    chosen: dict[tuple[int, int, int], int] = {}
    pi, pl, pc = pairs
    big = pc >= min_count
    pi, pl = pi[big], pl[big]
    nbrs = sp.csr_matrix((np.ones(2 * len(pi)), (np.r_[pi, pl], np.r_[pl, pi])), shape=(s, s))
    for i in range(s):
        cand = nbrs.indices[nbrs.indptr[i]:nbrs.indptr[i + 1]]
        if len(cand) < 2:
            continue
        cand = np.sort(cand)
        tasks = by_worker.indices[by_worker.indptr[i]:by_worker.indptr[i + 1]]
        sub = bin_[tasks][:, cand]
        co = (sub.T @ sub).tocoo()
        ok = (co.row < co.col) & (co.data >= min_count)
        r, c, v = cand[co.row[ok]], cand[co.col[ok]], co.data[ok]
        # ties: the pair with the best-ranked worker pair (distinct pairs differ in the sum of
        # their ranks or, failing that, in the better rank)
        top = np.lexsort((np.minimum(rank[r], rank[c]), rank[r] + rank[c], -v))[:per_worker]
        for rr, cc, vv in zip(r[top], c[top], v[top]):
            key = tuple(sorted((i, int(rr), int(cc))))
            chosen[key] = int(vv)
    if not chosen:
        return empty
    keys = sorted(chosen, key=lambda t: (-chosen[t], sorted(int(rank[w]) for w in t)))[:max_total]
    tri = np.array(sorted(keys), dtype=np.int64)
    cnt = np.array([chosen[tuple(t)] for t in tri.tolist()], dtype=np.float64)
    moments = np.zeros((len(tri), k, k, k))
    for anchor in np.unique(tri[:, 0]):
        sel = np.flatnonzero(tri[:, 0] == anchor)
        tasks = by_worker.indices[by_worker.indptr[anchor]:by_worker.indptr[anchor + 1]]
        block = ans[tasks].toarray().astype(np.int64) - 1  # (n_i, s): -1 = no answer
        for t in sel:
            _, b, c = tri[t]
            col_a, col_b, col_c = block[:, anchor], block[:, b], block[:, c]
            both = (col_b >= 0) & (col_c >= 0) & (col_a >= 0)
            flat = (col_a[both] * k + col_b[both]) * k + col_c[both]
            moments[t] = np.bincount(flat, minlength=k**3).reshape(k, k, k)
    moments /= np.maximum(moments.sum(axis=(1, 2, 3)), 1.0)[:, None, None, None]
    return tri, cnt, moments


class TensorADMM(MomentThenEM):
    """TensorADMM: coupled 2nd/3rd-order moment factorisation by AO-ADMM, MAP (+ EM).

    Traganitis, Pagès-Zamora & Giannakis (IEEE TSP 2018); see the module docstring for the
    objective, the statistics and the initialisation from MultiSPA.

    Parameters
    ----------
    min_shared : int, default 10
        Minimum shared tasks of a worker pair whose co-occurrence enters the fit.
    max_partners : int, default 100
        At most this many partners per worker.
    min_shared_triple : int, default 20
        Minimum common tasks of a worker triple whose third-order moment enters the fit.
    max_triples_per_worker : int, default 20
        Triples chosen per anchor worker (most co-labelling first).
    max_triples : int, default 5000
        Bound on the total number of triples (the moment computation is per triple).
    triple_weight : float, default 1.0
        Weight of the third-order terms relative to the pair terms.
    max_workers : int, default 1000
        The most active workers fitted; the others are completed from the posterior.
    n_outer : int, default 100
        Alternating-optimisation rounds (reference: up to 500).
    prox : float, default 0.5
        Proximal weight of the Jacobi sweep: each worker's block problem gets
        ``+ (mu/2) ||A_m - A_m^prev||^2`` with ``mu = prox * tr(G G^T) / K``.  Updating all
        workers at once from the previous iterate (needed for vectorisation) oscillates
        without it: on a dense crowd with third-order terms (10 workers x 400 tasks) the
        plain Jacobi objective rose in 49 of 100 rounds and ended above its start (error
        0.23); with ``prox=0.5`` it decreased monotonically in 53 rounds (error 0.10).
    n_inner : int, default 10
        ADMM iterations per block update (reference: 10).
    outer_tol : float, default 1e-6
        Stop when the relative objective change falls below this.
    floor : float, default 0.01
        The least-squares / NMF estimates put exact zeros on small confusion entries, which
        the MAP rule punishes with ``log(1e-6)``; every column is floored at
        ``min(floor, 0.1 / K)`` and renormalised before the MAP step (0 disables), so
        that one unseen (true, answered) pair cannot veto a class.
    n_em_iter : int, default 0
        Dawid-Skene EM rounds after the moment estimate.
    tol, alpha, diag_alpha, prior_alpha, compare_with_mv, random_state
        As for :class:`~crowdlearn.aggregation.multispa.MultiSPA`.

    Attributes
    ----------
    confusions_ : ndarray (n_workers, n_classes, n_classes), ``[w, true, answered]``.
    moment_confusions_ : the TensorADMM estimate before EM (None on fallback).
    identified_ : ndarray of bool (n_workers,), workers fitted by the factorisation.
    objective_ : list of float, the coupled least-squares objective per outer round.
    n_pairs_, n_triples_ : int, number of moment blocks in the fit.
    priors_, skills_, init_, fallback_ : as for MultiSPA.
    """

    _max_classes = 50

    def __init__(
        self,
        min_shared: int = 10,
        max_partners: int = 100,
        min_shared_triple: int = 20,
        max_triples_per_worker: int = 20,
        max_triples: int = 5000,
        triple_weight: float = 1.0,
        max_workers: int = 1000,
        n_outer: int = 100,
        prox: float = 0.5,
        n_inner: int = 10,
        outer_tol: float = 1e-6,
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
        self.min_shared_triple = min_shared_triple
        self.max_triples_per_worker = max_triples_per_worker
        self.max_triples = max_triples
        self.triple_weight = triple_weight
        self.max_workers = max_workers
        self.n_outer = n_outer
        self.prox = prox
        self.n_inner = n_inner
        self.outer_tol = outer_tol
        self.floor = floor
        self.n_em_iter = n_em_iter
        self.tol = tol
        self.alpha = alpha
        self.diag_alpha = diag_alpha
        self.prior_alpha = prior_alpha
        self.compare_with_mv = compare_with_mv
        self.random_state = random_state

    def _fit(self, data, gold, init):
        # sizes, round counts, outer_tol and floor are checked by name (core.params)
        for name in ("max_triples", "max_triples_per_worker"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not (np.isfinite(self.prox) and self.prox >= 0):
            raise ValueError(f"prox must be a finite number >= 0, got {self.prox}")
        if not (np.isfinite(self.triple_weight) and self.triple_weight >= 0):
            raise ValueError(
                f"triple_weight must be a finite number >= 0, got {self.triple_weight}"
            )
        return super()._fit(data, gold, init)

    def _moment_step(self, data):
        m, k = data.n_workers, data.n_classes
        self.identified_ = np.zeros(m, dtype=bool)
        self.objective_: list[float] = []
        self.n_pairs_ = self.n_triples_ = 0
        if m < 2:
            raise Degenerate("fewer than two workers (no co-occurrences)")
        init = MultiSPA(
            min_shared=self.min_shared,
            max_partners=self.max_partners,
            max_workers=self.max_workers,
            alpha=self.alpha,
            diag_alpha=self.diag_alpha,
        )
        conf_cols, prior = init._moment_step(data)  # raises Degenerate when undefined
        active = active_workers(data, int(self.max_workers))
        pi, pl, pcnt, blocks = pair_moments(data, active, self.min_shared, self.max_partners)
        if len(pi) == 0:
            raise Degenerate(f"no worker pair shares at least min_shared={self.min_shared} tasks")
        tri, tcnt, tmom = _triples(
            data, active, (pi, pl, pcnt), int(self.min_shared_triple),
            int(self.max_triples_per_worker),
            int(self.max_triples),
        )
        self.n_pairs_, self.n_triples_ = len(pi), len(tri)
        s = len(active)
        pw = pcnt / pcnt.mean()
        tw = self.triple_weight * tcnt / pcnt.mean() if len(tri) else tcnt
        a = normalise_columns(conf_cols[active].copy())
        d = np.asarray(prior, dtype=np.float64).copy()
        fitted = np.zeros(s, dtype=bool)
        fitted[pi] = fitted[pl] = True
        if len(tri):
            fitted[tri.ravel()] = True
        z_a, u_a = a.copy(), np.zeros_like(a)
        z_d, u_d = d[None, None, :].copy(), np.zeros((1, 1, k))
        s_pi, s_pl = _scatter(pi, s), _scatter(pl, s)
        blocks_t = np.ascontiguousarray(blocks.transpose(0, 2, 1))
        if len(tri):
            ta, tb, tc = tri[:, 0], tri[:, 1], tri[:, 2]
            s_ta, s_tb, s_tc = _scatter(ta, s), _scatter(tb, s), _scatter(tc, s)
        last = None
        for _ in range(int(self.n_outer)):
            # ---- A step: normal equations of every worker's block, then batched ADMM
            gram = a.transpose(0, 2, 1) @ a  # A^T A per worker
            dd = np.outer(d, d)
            # pair (i, l): R ~ A_i (D A_l^T)  and  R^T ~ A_l (D A_i^T)
            ggt = _add(s_pi, pw[:, None, None] * gram[pl] * dd)
            ggt += _add(s_pl, pw[:, None, None] * gram[pi] * dd)
            ygt = _add(s_pi, pw[:, None, None] * (blocks @ a[pl]) * d)
            ygt += _add(s_pl, pw[:, None, None] * (blocks_t @ a[pi]) * d)
            if len(tri):
                w3 = tw[:, None, None]
                ggt += _add(s_ta, w3 * gram[tb] * gram[tc] * dd)
                ggt += _add(s_tb, w3 * gram[ta] * gram[tc] * dd)
                ggt += _add(s_tc, w3 * gram[ta] * gram[tb] * dd)
                ygt += _add(s_ta, w3 * np.einsum("txyz,tyj,tzj->txj", tmom, a[tb], a[tc]) * d)
                ygt += _add(s_tb, w3 * np.einsum("txyz,txj,tzj->tyj", tmom, a[ta], a[tc]) * d)
                ygt += _add(s_tc, w3 * np.einsum("txyz,txj,tyj->tzj", tmom, a[ta], a[tb]) * d)
            # X (rows = answers) solves min 0.5 tr(X GG^T X^T) - tr(X (YG^T)^T), columns on
            # the simplex: batched over the fitted workers
            f = np.flatnonzero(fitted)
            if self.prox > 0:
                # proximal Jacobi: + (mu/2)||A - A_prev||^2 with mu = prox * tr(GG^T) / K
                mu = self.prox * np.trace(ggt, axis1=1, axis2=2)[:, None, None] / k
                ggt = ggt + mu * np.eye(k)
                ygt = ygt + mu * a
            z_a[f], u_a[f] = _admm(ggt[f], ygt[f], a[f], z_a[f], u_a[f], -2, int(self.n_inner))
            a[f] = z_a[f]
            # ---- d step: sum_j d_j (a_mj a_lj^T) is linear in d
            gram = a.transpose(0, 2, 1) @ a
            nmat = np.einsum("p,pji,pji->ji", pw, gram[pi], gram[pl])
            rhs = pw @ (a[pi] * (blocks @ a[pl])).sum(axis=1)
            if len(tri):
                nmat += np.einsum("t,tji,tji,tji->ji", tw, gram[ta], gram[tb], gram[tc])
                part = np.einsum("txyz,tyj,tzj->txj", tmom, a[tb], a[tc])
                rhs += tw @ (a[ta] * part).sum(axis=1)
            z_d, u_d = _admm(nmat[None], rhs[None, None, :], z_d, z_d, u_d, -1, int(self.n_inner))
            d = z_d[0, 0]
            obj = self._objective(a, d, pi, pl, pw, blocks, tri, tw, tmom)
            self.objective_.append(obj)
            if last is not None and abs(last - obj) <= self.outer_tol * max(abs(last), 1e-300):
                break
            last = obj
        prior = prior_or_uniform(np.maximum(d, 1e-6))
        ident = np.zeros(m, dtype=bool)
        ident[active[fitted]] = True
        self.identified_ = ident
        conf_cols = np.full((m, k, k), 1.0 / k)
        conf_cols[active[fitted]] = floored_columns(normalise_columns(a[fitted]), self.floor)
        conf_cols = complete_unidentified(
            data, conf_cols, ident, prior, self.alpha, self.diag_alpha, n_rounds=2
        )
        return conf_cols, prior

    @staticmethod
    def _objective(a, d, pi, pl, pw, blocks, tri, tw, tmom) -> float:
        fit2 = (a[pi] * d) @ a[pl].transpose(0, 2, 1)
        obj = float(np.sum(pw * ((blocks - fit2) ** 2).sum(axis=(1, 2))))
        if len(tri):
            fit3 = np.einsum("txj,tyj,tzj,j->txyz", a[tri[:, 0]], a[tri[:, 1]], a[tri[:, 2]], d)
            obj += float(np.sum(tw * ((tmom - fit3) ** 2).sum(axis=(1, 2, 3))))
        return obj
