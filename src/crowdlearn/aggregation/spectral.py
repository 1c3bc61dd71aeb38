"""Moment-based initialisations of Dawid-Skene: Spectral-DS (Opt-D&S) and MultiSPA.

Both estimate every worker's confusion matrix from low-order co-occurrence statistics of the
answers, with no iterative likelihood fitting, and then (optionally) refine them with a few
Dawid-Skene EM rounds.  Under the DS model (papers' orientation, ``A_m[answer, true]``)::

    R_{m,l} = E[e_{answer m} e_{answer l}^T] = A_m D A_l^T                (m != l)
    T_{a,b,c} = sum_j d_j C_a[:, j] o C_b[:, j] o C_c[:, j]     (three disjoint views)

with ``D = diag(d)`` the class prior.  The papers use *columns* = true class; this module
computes in that orientation internally and converts once, at the boundary, to the library's
``confusions_[w, true, answered]`` (rows sum to 1).

:class:`SpectralDawidSkene` -- Zhang, Chen, Zhou & Jordan, "Spectral methods meet EM: a
provably optimal algorithm for crowdsourcing", NIPS 2014 / JMLR 17(102), 2016 (reference
MATLAB code ``zhangyuc/SpectralMethodsMeetEM``):

1. split the workers into three groups; ``Z_g`` (N x K) sums the one-hot answers of group
   ``g`` per task (one sparse product ``incidence @ selector``);
2. for each ordering (a, b, c) of the groups, symmetrise views a and b towards c
   (``x~_a = M_cb M_ab^-1 x_a``, ``x~_b = M_ca M_ba^-1 x_b``), form ``M2 = E[x~_a x~_b^T]``
   and ``M3 = E[x~_a o x~_b o x_c]``, whiten with ``W = U S^{-1/2}`` (``M2 = U S U^T``) and
   decompose ``M3(W, W, W)`` by the robust tensor power method (``n_restarts`` seeded random
   starts x ``n_power_iter`` iterations per component, deflation).  Each eigenpair
   ``(lambda, v)`` gives a column ``lambda (W^T)^+ v`` of ``C_c = E[x_c | y]`` and the class
   weight ``1 / lambda^2``; the columns are then put in class order (the reference: class of
   the largest entry, first free class on a collision; here see "Class order" below);
3. worker ``i`` in group ``g``: ``A_i ∝ E[x_i x_alt^T] (D_alt C_alt^T)^{-1}`` where ``alt`` is
   the union of the two other groups (``E[x_i x_alt^T]`` for all workers is one sparse
   product ``incidence^T @ Z``); entries are floored at 1e-6 and columns normalised;
4. ``n_em_iter`` DS EM rounds from these confusions (the paper's Opt-D&S uses 10).

:class:`MultiSPA` -- Ibrahim, Fu, Kargas & Huang, "Crowdsourcing via pairwise co-occurrences:
identifiability and algorithms", NeurIPS 2019 (reference code
``shahanaibrahimosu/crowdsourcing``, ``EstConfMat_SPA.m``):

1. all pairwise K x K co-occurrence counts come from one sparse product ``A^T A`` of the
   N x (W*K) incidence ``A`` (never a dense N x W or W*K x W*K matrix: each worker's K rows
   are densified in turn);
2. for worker ``m``: ``H_m`` stacks the blocks ``R_{m,l}`` of its partners ``l`` that share at
   least ``min_shared`` tasks and whose block has full rank K (at most ``max_partners``
   partners, the most co-labelling first); its columns, normalised to sum 1, are convex
   combinations of the columns of ``A_m``;
3. the successive projection algorithm (SPA, Gillis & Vavasis 2014) picks K extreme columns
   = ``A_m`` up to a column permutation; workers with too few columns (``<= 7K`` as in the
   reference code) or a rank-deficient estimate are "unidentified";
4. the column permutations are aligned across workers by the Hungarian algorithm
   (``scipy.optimize.linear_sum_assignment``) on ``A_l^+ R_{l,m} A_m^{+T} ≈ Π_l^T D``,
   breadth-first from the best-connected worker; the one global permutation left (which
   estimated class is which true class) maximises the label-weighted diagonal mass of all
   identified workers (most answers come from better-than-permuted workers);
5. labels by the MAP rule ``argmax_j log d_j + sum_m log A_m[answer_m, j]``.

``MultiSPADawidSkene`` adds ``n_em_iter`` DS EM rounds (the paper's MultiSPA-D&S, 10 rounds).

Departures from the references (documented, all deliberate)
-----------------------------------------------------------
* Spectral-DS groups: workers sorted by agreement with majority vote (ties: more answers,
  then code) are dealt round-robin into the three groups, so the three views are about
  equally informative; the reference uses worker index mod 3 (arbitrary ids), which makes
  the result depend on how workers happen to be numbered.  (This rule was compared with four
  other deterministic rules on the real benchmark sets: a choice made with their gold, see
  benchmarks/RESULTS.md, section 0.)  Random restarts come from ``random_state``; on every set tried
  the power method found the same decomposition for all seeds.
* Class order: the reference gives each recovered column the class of its largest entry
  (first free class on collision), independently in each view, which can leave the views
  (and so the workers) in inconsistent orders; here view 0 is ordered by that rule as an
  assignment problem, views 1 and 2 are matched to it through ``E[x_0 x_g^T] = C_0 D C_g^T``,
  and the final class names maximise the answer-weighted diagonal of all confusions, so a
  view cannot come out with its classes permuted against the others.
* The class prior used by the spectral E-step is the average of the three groups' weights
  ``1/lambda^2`` (the reference's EM ignores the prior).  MultiSPA estimates ``d`` from
  ``diag(A_l^+ R_{l,m} A_m^{+T})`` over the aligned pairs (the reference uses uniform); both
  fall back to uniform when the estimate is not a positive vector.
* MultiSPA: unidentified workers get no vote in a first MAP pass; their confusions are then
  the (``diag_alpha``-smoothed) soft counts of their answers against that posterior on tasks
  that had an identified worker, and the final MAP pass uses every worker.  The reference
  drops them from the MAP rule.
* The reference's ``>7K columns`` rule is kept (``min_columns``); pairs are also required to
  share ``min_shared`` tasks, because a block estimated from one or two shared tasks has
  one-hot columns, which SPA takes for perfect anchors.
* MultiSPA-KL (:class:`MultiSPAKL`, ``n_kl_iter``): the coupled KL factorisation of all
  pair counts is minimised by EM on the pairwise composite likelihood (see
  :func:`_coupled_kl`) instead of the reference's alternating optimisation; same objective.
* EM safeguard (``compare_with_mv=True``, default): the EM rounds are also run from
  majority vote and the run with the higher final log-likelihood is kept (``init_`` says
  which), as with several EM starts.  The moment estimates are noisy on small sparse crowds
  (few thousand tasks, a few answers each, adversaries), and EM from a poor spectral start
  can end far below EM from majority vote; the comparison costs one more EM run and keeps the
  better of the two by likelihood, never by gold.  ``compare_with_mv=False`` gives the
  papers' algorithms.
* Scale: only the ``max_workers`` most active workers enter the MultiSPA co-occurrence step
  (default 2000, so the sparse W*K x W*K product stays small); the others are completed as
  unidentified workers.  Spectral-DS needs only N x 3K dense matrices at any size.

Degenerate inputs (one class, one worker, fewer than three non-empty groups, singular
moment matrices, no identified worker, more than 20 classes for Spectral-DS or 50 for
MultiSPA, ...) make the moment step undefined or too costly; the estimators
then fall back to Dawid-Skene EM from majority vote (with ``n_em_iter`` rounds; with
``n_em_iter=0``, majority vote itself with the DS worker model fitted to it) and record the
reason in ``fallback_`` (``None`` when the moment step ran).  No NaN ever leaves ``fit``.

Gold labels are not used by the (unsupervised) moment step; the EM rounds learn from them
and the output is clamped to them, as for every estimator.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment

from ..core import kernels
from ..core.data import CrowdLabels
from .base import ConfusionAggregator
from .dawid_skene import _MAX_TABLE_CELLS, DawidSkene

__all__ = [
    "SpectralDawidSkene",
    "MultiSPA",
    "MultiSPAKL",
    "MultiSPADawidSkene",
    "successive_projection",
]

_FLOOR = 1e-6  # confusion entries floor (both reference codes)
_TINY = 1e-300
_COND_MAX = 1e10  # moment matrices worse conditioned than this are treated as singular
_M3_CHUNK = 1 << 16


class _Degenerate(Exception):
    """The moment step is undefined on this input; the message says why."""


# ============================================================================ helpers
def successive_projection(x: np.ndarray, r: int) -> np.ndarray:
    """Indices of ``r`` columns of ``x`` picked by the successive projection algorithm.

    Gillis & Vavasis (2014), "Fast and robust recursive algorithms for separable nonnegative
    matrix factorization": repeatedly take the column of largest residual norm (ties within
    1e-6 relative go to the largest original norm) and project every column onto the
    orthogonal complement of it.
    """
    resid = np.array(x, dtype=np.float64, copy=True)
    norm0 = np.einsum("ij,ij->j", resid, resid)
    picked: list[int] = []
    for _ in range(r):
        norms = np.einsum("ij,ij->j", resid, resid)
        top = norms.max(initial=0.0)
        if top <= 0:
            break
        near = np.flatnonzero(norms >= top * (1 - 1e-6))
        j = int(near[np.argmax(norm0[near])])
        picked.append(j)
        u = resid[:, j] / np.sqrt(norms[j])
        resid -= np.outer(u, u @ resid)
    return np.asarray(picked, dtype=np.int64)


def _normalise_columns(a: np.ndarray) -> np.ndarray:
    """Floor at 1e-6 and make every column (axis -2) sum to 1."""
    a = np.maximum(a, _FLOOR)
    return a / a.sum(axis=-2, keepdims=True)


def _log_table_from(conf_cols: np.ndarray) -> np.ndarray:
    """(W, K answer, K true) column-stochastic confusions -> the kernels' (W*K, K) log table."""
    m, k, _ = conf_cols.shape
    return np.log(np.maximum(conf_cols, _TINY)).reshape(m * k, k)


def _prior_or_uniform(d: np.ndarray) -> np.ndarray:
    d = np.asarray(d, dtype=np.float64)
    if d.size == 0 or not np.all(np.isfinite(d)) or np.any(d <= 0):
        return np.full(d.size, 1.0 / max(d.size, 1))
    return d / d.sum()


def _cond(a: np.ndarray) -> float:
    s = np.linalg.svd(a, compute_uv=False)
    return float(s[0] / s[-1]) if s[-1] > 0 else np.inf


# ======================================================================= shared base
class _MomentThenEM(ConfusionAggregator):
    """Moment estimate of the confusions, MAP posteriors, then ``n_em_iter`` DS EM rounds."""

    _uses_init = False
    #: above this many classes the moment step is skipped (fallback); see the subclasses
    _max_classes = 20

    # ----- subclasses implement: return (conf_cols (W, K, K) column-stochastic, prior (K,))
    def _moment_step(self, data: CrowdLabels) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _fit(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None):
        if self.n_em_iter < 0:
            raise ValueError(f"n_em_iter must be >= 0, got {self.n_em_iter}")
        k, m = data.n_classes, data.n_workers
        if m * k * k > _MAX_TABLE_CELLS:  # the same guard as DawidSkene, before any work
            raise ValueError(
                f"{type(self).__name__} would need {m} workers x {k}^2 confusion cells "
                f"({m * k * k * 8 / 1e9:.1f} GB); with {k} classes use 'mv', 'wawa' or 'zbs'"
            )
        self.fallback_: str | None = None
        self.init_ = "moment"
        self.moment_confusions_ = None
        self.moment_priors_ = None
        try:
            if k < 2:
                raise _Degenerate("fewer than two classes")
            if k > self._max_classes:
                raise _Degenerate(
                    f"{k} classes: the moment step of {type(self).__name__} is limited to "
                    f"{self._max_classes} classes"
                )
            conf_cols, prior = self._moment_step(data)
            if not (np.all(np.isfinite(conf_cols)) and np.all(np.isfinite(prior))):
                raise _Degenerate("the moment estimate is not finite")
        except _Degenerate as why:
            self.fallback_ = str(why)
        except np.linalg.LinAlgError as why:
            self.fallback_ = f"linear algebra failure in the moment step ({why})"
        if self.fallback_ is not None:
            self.init_ = "majority vote"
            return self._adopt(data, self._em(data, gold, None))
        conf = conf_cols.transpose(0, 2, 1)  # -> [w, true, answered]
        self.moment_confusions_ = conf
        self.moment_priors_ = pd.Series(prior, index=data.classes, name="prior")
        log_table = _log_table_from(conf_cols)
        log_prior = np.log(np.maximum(prior, _TINY))
        post, ll = kernels.estep(data, log_table, log_prior, "numpy")
        if self.n_em_iter == 0:
            self.history_.append(ll)
            self._set_model(data, log_table, log_prior)
            return post
        # the moment E-step counts as the first E-step: n_em_iter (M, E) rounds follow
        ds = self._em(data, gold, post)
        if self.compare_with_mv:
            ds_mv = self._em(data, gold, None)
            if ds_mv.history_[-1] > ds.history_[-1]:
                self.init_ = "majority vote"
                ds = ds_mv
        return self._adopt(data, ds)

    def _em(self, data, gold, init) -> DawidSkene:
        """``n_em_iter`` rounds of DS EM from posteriors ``init`` (None: majority vote)."""
        ds = DawidSkene(
            max_iter=self.n_em_iter,
            tol=self.tol,
            alpha=self.alpha,
            diag_alpha=self.diag_alpha,
            prior_alpha=self.prior_alpha,
            random_state=self.random_state,
        )
        return ds.fit(data, gold=gold, init=init)

    def _adopt(self, data, ds: DawidSkene) -> np.ndarray:
        self.history_.extend(ds.history_)
        self.n_iter_ = int(ds.n_iter_)
        self.converged_ = bool(ds.converged_) if self.n_em_iter else True
        self._set_model(data, ds._log_table, ds._log_prior)
        return ds.probas_.to_numpy().copy()

    def _set_model(self, data, log_table, log_prior):
        m, k = data.n_workers, data.n_classes
        self._log_table = np.ascontiguousarray(log_table)
        self._log_prior = np.asarray(log_prior, dtype=np.float64)
        self.confusions_ = np.exp(self._log_table.reshape(m, k, k).transpose(0, 2, 1))
        prior = np.exp(self._log_prior)
        self.priors_ = pd.Series(prior, index=data.classes, name="prior")
        diag = np.einsum("wjj->wj", self.confusions_)
        self.skills_ = pd.Series(diag @ prior, index=data.workers, name="skill")


# ===================================================================== Spectral-DS
def _robust_tensor_power(t: np.ndarray, rng: np.random.Generator, n_restarts: int, n_iter: int):
    """Eigenpairs of a symmetric K x K x K tensor by the robust tensor power method.

    Anandkumar, Ge, Hsu, Kakade & Telgarsky (2014), Algorithm 1: per component, ``n_restarts``
    random unit starts run ``n_iter`` power steps ``v <- T(I, v, v) / ||.||`` (vectorised
    over the starts); the start with the largest ``T(v, v, v)`` gets ``n_iter`` more steps,
    then the tensor is deflated by ``lambda v o v o v``.
    """
    k = t.shape[0]
    t = t.copy()
    lams = np.empty(k)
    vecs = np.empty((k, k))

    def power(v):  # n_iter steps of v <- T(I, v, v) / ||.|| on the columns of v (BLAS)
        for _ in range(n_iter):
            new = t.reshape(k, k * k) @ (v[:, None, :] * v[None, :, :]).reshape(k * k, -1)
            nrm = np.linalg.norm(new, axis=0, keepdims=True)
            new = np.divide(new, nrm, out=np.zeros_like(new), where=nrm > 0)
            done = np.max(np.abs(new - v), initial=0.0) < 1e-12
            v = new
            if done:  # converged to machine precision: further steps change nothing
                break
        return v

    for c in range(k):
        v = rng.standard_normal((k, n_restarts))
        v = power(v / np.linalg.norm(v, axis=0, keepdims=True))
        tv = t.reshape(k, k * k) @ (v[:, None, :] * v[None, :, :]).reshape(k * k, -1)
        vals = np.einsum("ir,ir->r", v, tv)  # T(v, v, v) per start
        u = power(v[:, [int(np.argmax(vals))]])[:, 0]
        lam = float(np.einsum("ijk,i,j,k->", t, u, u, u))
        if not np.isfinite(lam) or lam <= 0:
            raise _Degenerate("the whitened third-order moment has a non-positive eigenvalue")
        lams[c], vecs[:, c] = lam, u
        t -= lam * np.einsum("i,j,k->ijk", u, u, u)
    return lams, vecs


def _solve_view(xa, xb, xc, rng, n_restarts, n_iter):
    """Columns of ``C_c = E[x_c | y]`` and the class weights from three views (N x K each)."""
    n, k = xc.shape
    m_ab, m_ba = xa.T @ xb / n, xb.T @ xa / n
    m_cb, m_ca = xc.T @ xb / n, xc.T @ xa / n
    if max(_cond(m_ab), _cond(m_cb), _cond(m_ca)) > _COND_MAX:
        raise _Degenerate("a group co-occurrence matrix is singular (a class is never answered "
                          "or the groups share no tasks)")
    # x~_a = M_cb M_ab^{-1} x_a, x~_b = M_ca M_ba^{-1} x_b  (rows are tasks)
    xa_t = xa @ np.linalg.solve(m_ab.T, m_cb.T)
    xb_t = xb @ np.linalg.solve(m_ba.T, m_ca.T)
    m2 = xa_t.T @ xb_t / n
    m2 = (m2 + m2.T) / 2
    u, s, _ = np.linalg.svd(m2)
    if s[-1] <= s[0] / _COND_MAX:
        raise _Degenerate("the symmetrised second moment is singular")
    w = u / np.sqrt(s)
    # whitened views: M3(W, W, W) = E[(W^T x~_a) o (W^T x~_b) o (W^T x_c)]
    ya, yb, yc = xa_t @ w, xb_t @ w, xc @ w
    t = np.zeros((k, k, k))
    for lo in range(0, n, _M3_CHUNK):
        sl = slice(lo, lo + _M3_CHUNK)
        ab = (ya[sl, :, None] * yb[sl, None, :]).reshape(-1, k * k)
        t += (ab.T @ yc[sl]).reshape(k, k, k)
    t /= n
    t = (t + t.transpose(0, 2, 1) + t.transpose(1, 0, 2) + t.transpose(1, 2, 0)
         + t.transpose(2, 0, 1) + t.transpose(2, 1, 0)) / 6
    lams, vecs = _robust_tensor_power(t, rng, n_restarts, n_iter)
    cols = np.linalg.pinv(w.T) @ vecs * lams  # K x K, one recovered column per eigenpair
    if not np.all(np.isfinite(cols)):
        raise _Degenerate("the tensor decomposition produced non-finite columns")
    return cols, 1.0 / lams**2


def _argmax_order(cols: np.ndarray) -> np.ndarray:
    """Column order putting each recovered column at the class of its largest entry.

    The reference assigns greedily (first free class on a collision); here the assignment
    maximises the total of the column-normalised entries that land on the diagonal.
    """
    score = cols / np.maximum(np.abs(cols).sum(axis=0, keepdims=True), _TINY)
    rows, cols_idx = linear_sum_assignment(score, maximize=True)
    perm = np.empty(len(rows), dtype=np.int64)
    perm[rows] = cols_idx  # class r <- recovered column perm[r]
    return perm


def _match_to(c_ref: np.ndarray, c_other: np.ndarray, m_cross: np.ndarray) -> np.ndarray:
    """Order of ``c_other``'s columns matching ``c_ref``'s classes.

    ``m_cross = E[x_ref x_other^T] = C_ref D C_other^T``, so ``C_ref^+ m_cross C_other^{+T}``
    is ``D`` times the permutation between the two column orders; Hungarian reads it off.
    """
    score = np.linalg.pinv(c_ref) @ m_cross @ np.linalg.pinv(c_other).T
    rows, cols_idx = linear_sum_assignment(score, maximize=True)
    perm = np.empty(len(rows), dtype=np.int64)
    perm[rows] = cols_idx
    return perm


def _balanced_groups(data: CrowdLabels, per_worker: np.ndarray) -> np.ndarray:
    """Three worker groups of similar quality: round-robin in order of MV agreement.

    Workers sorted by their agreement with the majority vote (ties: more answers first,
    then worker code) are dealt 0, 1, 2, 0, 1, 2, ... so that every view gets good and poor
    workers alike; the weakest view bounds the conditioning of the whole spectral step.
    """
    from .voting import agreement_with, split_ties, vote_fractions

    agree = agreement_with(data, split_ties(vote_fractions(data)))
    m = data.n_workers
    order = np.lexsort((np.arange(m), -per_worker, -agree))
    groups = np.empty(m, dtype=np.int64)
    groups[order] = np.arange(m) % 3
    return groups


class SpectralDawidSkene(_MomentThenEM):
    """Spectral-DS / Opt-D&S: spectral (tensor) initialisation of Dawid-Skene, then EM.

    Parameters
    ----------
    n_em_iter : int, default 10
        DS EM rounds after the spectral estimate (10 in the paper's Opt-D&S); 0 returns the
        MAP posteriors of the spectral confusions.
    n_restarts : int, default 100
        Random starts per component of the robust tensor power method.
    n_power_iter : int, default 100
        Power iterations per start (and for the refinement of the best start).
    tol : float, default 0
        EM stops early when the log-likelihood per answer improves by less than ``tol``;
        0 runs exactly ``n_em_iter`` rounds (as the paper).
    alpha, diag_alpha, prior_alpha
        Smoothing of the EM M-step, as in
        :class:`~crowdlearn.aggregation.dawid_skene.DawidSkene`.  The paper's EM is
        unsmoothed (``diag_alpha=0, compare_with_mv=False``).
    compare_with_mv : bool, default True
        Also run the EM rounds from majority vote and keep the higher-likelihood fit (see
        the module notes); False is the paper's algorithm.
    random_state : int, default 0
        Seed of the power-method restarts and of tie-breaking.

    Attributes
    ----------
    confusions_ : ndarray (n_workers, n_classes, n_classes), ``[w, true, answered]``.
    moment_confusions_ : same shape, the spectral estimate before EM (None on fallback).
    moment_priors_ : Series, the class weights of the spectral step.
    priors_, skills_ : Series, as for DawidSkene.
    groups_ : ndarray (n_workers,), the worker group (0, 1, 2) of the spectral step.
    init_ : {"moment", "majority vote"}
        Which start the returned EM fit came from.
    fallback_ : str or None
        Why the spectral step was skipped (DS EM from majority vote was run instead).
    history_ : list of float
        Log-likelihood after each E-step of the kept EM run.
    """

    _invariance_atol = None  # groups depend on worker codes; restarts are random
    #: the tensor power method costs O(K^4 n_restarts n_power_iter) whatever the data size:
    #: ~1.5 s per fit at K = 20, ~15 s at K = 30
    _max_classes = 20

    def __init__(
        self,
        n_em_iter: int = 10,
        n_restarts: int = 100,
        n_power_iter: int = 100,
        tol: float = 0.0,
        alpha: float = 0.0,
        diag_alpha: float = 1.0,
        prior_alpha: float = 1.0,
        compare_with_mv: bool = True,
        random_state: int | None = 0,
    ) -> None:
        self.n_em_iter = n_em_iter
        self.n_restarts = n_restarts
        self.n_power_iter = n_power_iter
        self.tol = tol
        self.alpha = alpha
        self.diag_alpha = diag_alpha
        self.prior_alpha = prior_alpha
        self.compare_with_mv = compare_with_mv
        self.random_state = random_state

    def _moment_step(self, data):
        n, m, k = data.n_tasks, data.n_workers, data.n_classes
        per_worker = data.labels_per_worker()
        groups = _balanced_groups(data, per_worker)
        self.groups_ = groups
        if np.any(np.bincount(groups[per_worker > 0], minlength=3) == 0):
            raise _Degenerate("fewer than three workers with answers (three groups needed)")
        # selector (W*K x 3K): answer l of worker w -> column group(w)*K + l
        rows = np.arange(m * k)
        sel = sp.csr_matrix(
            (np.ones(m * k), (rows, groups[rows // k] * k + rows % k)), shape=(m * k, 3 * k)
        )
        inc = data.incidence()
        z = (inc @ sel).toarray()  # N x 3K: group one-hot sums per task
        views = [z[:, g * k:(g + 1) * k] for g in range(3)]
        rng = np.random.default_rng(self.random_state)
        c_mats, weights = [None] * 3, [None] * 3
        for a, b, c in ((1, 2, 0), (2, 0, 1), (0, 1, 2)):  # reference: SolveCFG(x2, x3, x1) ...
            c_mats[c], weights[c] = _solve_view(
                views[a], views[b], views[c], rng, self.n_restarts, self.n_power_iter
            )
        # one class order for the three views: view 0 by its columns' largest entries, the
        # others matched to it through the cross moments E[x_0 x_g^T] = C_0 D C_g^T
        perm = _argmax_order(c_mats[0])
        c_mats[0], weights[0] = c_mats[0][:, perm], weights[0][perm]
        for g in (1, 2):
            perm = _match_to(c_mats[0], c_mats[g], views[0].T @ views[g] / n)
            c_mats[g], weights[g] = c_mats[g][:, perm], weights[g][perm]
        # per worker: E[x_i x_alt^T] (D_alt C_alt^T)^{-1}, all workers of a group at once
        cross = np.asarray(inc.T @ z)  # (W*K) x 3K, row w*K+l, column g*K+l'
        conf_cols = np.empty((m, k, k))
        for g in range(3):
            alt = [h for h in range(3) if h != g]
            c_alt = c_mats[alt[0]] + c_mats[alt[1]]
            d_alt = (weights[alt[0]] + weights[alt[1]]) / 2
            denom = np.diag(d_alt) @ c_alt.T
            if _cond(denom) > _COND_MAX:
                raise _Degenerate("the estimated view confusions are singular")
            members = np.flatnonzero(groups == g)
            r = (members[:, None] * k + np.arange(k)).ravel()
            rows_r = cross[r]
            x_alt = (
                rows_r[:, alt[0] * k:(alt[0] + 1) * k] + rows_r[:, alt[1] * k:(alt[1] + 1) * k]
            ) / n
            est = np.linalg.solve(denom.T, x_alt.T).T  # x_alt @ denom^{-1}
            conf_cols[members] = est.reshape(len(members), k, k)
        conf_cols = _normalise_columns(conf_cols)
        prior = _prior_or_uniform(np.mean([w / w.sum() for w in weights], axis=0))
        # the class names: the order that maximises the answer-weighted diagonal mass
        perm = _diagonal_order(conf_cols, per_worker)
        return conf_cols[:, :, perm], prior[perm]


def _diagonal_order(conf_cols: np.ndarray, n_answers: np.ndarray) -> np.ndarray:
    """Order of the true-class columns maximising ``sum_w n_w trace(A_w)``.

    Moment methods identify the classes only up to one global permutation; this picks the
    one under which most answers are correct, i.e. it assumes that the answers come mostly
    from workers who are better than any relabelling of themselves.
    """
    total = np.einsum("w,wab->ab", np.asarray(n_answers, float), conf_cols)
    rows, cols_idx = linear_sum_assignment(total, maximize=True)
    perm = np.empty(len(rows), dtype=np.int64)
    perm[rows] = cols_idx  # class r <- column perm[r]
    return perm


# ========================================================================= MultiSPA
class MultiSPA(_MomentThenEM):
    """MultiSPA: per-worker confusions by SPA on pairwise co-occurrences, then MAP labels.

    Parameters
    ----------
    min_shared : int, default 10
        A worker pair enters the co-occurrence step only if the two share at least this many
        tasks.
    max_partners : int, default 100
        At most this many partners (the most co-labelling ones) per worker.
    min_columns : int or None, default None
        A worker is identified only if its stacked co-occurrence matrix has more than this
        many non-zero columns; ``None`` means ``7 * K`` (the reference code's rule).
    max_workers : int, default 2000
        Only the most active workers enter the co-occurrence step (memory/time bound); the
        others are completed from the posterior like unidentified workers.
    min_column_count : int, default 0
        Drop stacked columns backed by fewer co-occurrences than this.
    n_kl_iter : int, default 0
        Rounds of coupled KL refinement of all confusions (MultiSPA-KL; :class:`MultiSPAKL`
        uses 10).
    n_em_iter : int, default 0
        DS EM rounds after the MultiSPA estimate (``MultiSPADawidSkene`` uses 10).
    tol, alpha, diag_alpha, prior_alpha
        EM settings (:class:`~crowdlearn.aggregation.dawid_skene.DawidSkene`); ``diag_alpha``
        also smooths the completion of unidentified workers.
    compare_with_mv : bool, default True
        With ``n_em_iter > 0``: also run EM from majority vote, keep the higher likelihood.
    random_state : int, default 0
        Seed of tie-breaking (the method itself is deterministic).

    Attributes
    ----------
    confusions_ : ndarray (n_workers, n_classes, n_classes), ``[w, true, answered]``.
    moment_confusions_ : the MultiSPA estimate before EM (None on fallback).
    identified_ : ndarray of bool (n_workers,), workers whose confusion SPA identified.
    kl_history_ : list of float, composite log-likelihood per KL round.
    priors_, skills_, init_, fallback_ : as for :class:`SpectralDawidSkene`.

    Notes
    -----
    Plain MultiSPA needs many co-labelled tasks per worker pair: SPA keeps the most extreme
    stacked columns, and with tens of shared tasks those are the noisiest ones.  On a
    sparse synthetic crowd (5000 tasks, 50 workers, 5 answers per task, 5 seeds) the mean
    per-worker Frobenius error of the confusions is 0.43 (K=3) / 0.64 (K=5); 10 KL rounds
    bring it to 0.09 / 0.16 (Spectral-DS 0.11 / 0.18, converged DS EM 0.08 / 0.14).
    """

    #: rank checks cost O(K^3) per worker pair, SPA needs more than 7K stacked columns
    _max_classes = 50

    def __init__(
        self,
        min_shared: int = 10,
        max_partners: int = 100,
        min_columns: int | None = None,
        min_column_count: int = 0,
        max_workers: int = 2000,
        n_kl_iter: int = 0,
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
        self.min_columns = min_columns
        self.min_column_count = min_column_count
        self.max_workers = max_workers
        self.n_kl_iter = n_kl_iter
        self.n_em_iter = n_em_iter
        self.tol = tol
        self.alpha = alpha
        self.diag_alpha = diag_alpha
        self.prior_alpha = prior_alpha
        self.compare_with_mv = compare_with_mv
        self.random_state = random_state

    # ------------------------------------------------------------------ moments
    def _moment_step(self, data):
        n, m, k = data.n_tasks, data.n_workers, data.n_classes
        self.identified_ = np.zeros(m, dtype=bool)
        self.kl_history_: list[float] = []
        if m < 2:
            raise _Degenerate("fewer than two workers (no co-occurrences)")
        per_worker = data.labels_per_worker()
        active = np.flatnonzero(per_worker > 0)
        if len(active) > self.max_workers:
            order = np.lexsort((active, -per_worker[active]))
            active = np.sort(active[order[: self.max_workers]])
        sub = len(active)
        # restrict the incidence to the active workers' columns (W' * K of them)
        cols = (active[:, None] * k + np.arange(k)).ravel()
        inc = data.incidence()[:, cols].tocsr()
        cooc = (inc.T @ inc).tocsr()  # (W'K) x (W'K) answer co-occurrence counts
        cooc.sum_duplicates()
        # shared-task counts per worker pair (duplicates of an answer count once per task)
        pos = np.full(m, -1, dtype=np.int64)
        pos[active] = np.arange(sub)
        keep = pos[data.worker] >= 0
        b = sp.csr_matrix(
            (np.ones(int(keep.sum())), (data.task[keep], pos[data.worker[keep]])), shape=(n, sub)
        )  # construction sums repeated answers; binarise
        b.data[:] = 1.0
        shared = (b.T @ b).tocsr()
        min_cols = 7 * k if self.min_columns is None else int(self.min_columns)

        partners: list[np.ndarray] = [np.empty(0, np.int64)] * sub
        blocks: list[np.ndarray] = [np.empty((0, k, k))] * sub
        weights: list[np.ndarray] = [np.empty(0)] * sub
        est = np.zeros((sub, k, k))
        ncols = np.zeros(sub, dtype=np.int64)
        good = np.zeros(sub, dtype=bool)
        for i in range(sub):
            lo, hi = shared.indptr[i], shared.indptr[i + 1]
            nb, cnt = shared.indices[lo:hi], shared.data[lo:hi]
            ok = (nb != i) & (cnt >= self.min_shared)
            nb, cnt = nb[ok], cnt[ok]
            if len(nb) == 0:
                continue
            if len(nb) > self.max_partners:
                top = np.lexsort((nb, -cnt))[: self.max_partners]
                nb, cnt = nb[top], cnt[top]
            rows = cooc[i * k:(i + 1) * k].toarray().reshape(k, sub, k)
            blk = rows[:, nb, :].transpose(1, 0, 2) / cnt[:, None, None]  # R_{i,l}: [p, a_i, b_l]
            partners[i], blocks[i], weights[i] = nb, blk, cnt
            full = np.linalg.matrix_rank(blk) == k
            if not np.any(full):
                continue
            h = blk[full].transpose(1, 0, 2).reshape(k, -1)  # K x (P*K) columns
            counts = (blk[full].sum(axis=1) * cnt[full][:, None]).ravel()  # answers per column
            colsum = h.sum(axis=0)
            use = (colsum > 0) & (counts >= self.min_column_count)
            h = h[:, use] / colsum[use]
            ncols[i] = h.shape[1]
            if h.shape[1] <= min_cols:
                continue
            picked = successive_projection(h, k)
            if len(picked) < k:
                continue
            a_hat = h[:, picked]
            if np.linalg.matrix_rank(a_hat) < k:
                continue
            est[i] = a_hat / a_hat.sum(axis=0, keepdims=True)
            good[i] = True
        if not np.any(good):
            raise _Degenerate("no worker has enough full-rank co-occurrence blocks for SPA")

        aligned, prior = self._align(
            est, good, ncols, partners, blocks, weights, per_worker[active], k
        )
        ident = np.zeros(m, dtype=bool)
        ident[active[aligned]] = True
        self.identified_ = ident
        conf_cols = np.full((m, k, k), 1.0 / k)
        conf_cols[active[aligned]] = _normalise_columns(est[aligned])
        conf_cols = self._complete(data, conf_cols, ident, prior)
        if self.n_kl_iter > 0:
            sub_conf, prior = _coupled_kl(
                conf_cols[active], prior, cooc, self.n_kl_iter, self.kl_history_
            )
            conf_cols[active] = sub_conf
        return conf_cols, prior

    def _align(self, est, good, ncols, partners, blocks, weights, n_answers, k):
        """Resolve the column permutations (in place in ``est``); return (aligned mask, prior)."""
        sub = len(est)
        pinv = np.zeros_like(est)
        pinv[good] = np.linalg.pinv(est[good])
        aligned = np.zeros(sub, dtype=bool)
        # reference worker: the one with the most stacked columns (reference code's rule)
        ref = int(np.argmax(np.where(good, ncols, -1)))
        aligned[ref] = True
        # partner lists are per worker (top partners); make the good-good graph symmetric
        nbrs: list[set[int]] = [set() for _ in range(sub)]
        for i in np.flatnonzero(good):
            for p in partners[i]:
                if good[p]:
                    nbrs[i].add(int(p))
                    nbrs[int(p)].add(int(i))
        stats = {}
        for i in np.flatnonzero(good):
            for p, blk, c in zip(partners[i], blocks[i], weights[i]):
                stats[(int(i), int(p))] = (blk, c)
        queue = deque([ref])
        seen = {ref}
        while queue:
            frontier = []
            while queue:
                frontier.extend(x for x in nbrs[queue.popleft()] if x not in seen)
            for l in sorted(set(frontier)):
                seen.add(l)
                score = np.zeros((k, k))
                for mm in nbrs[l]:
                    if not aligned[mm]:
                        continue
                    if (l, mm) in stats:
                        blk, c = stats[(l, mm)]
                    else:
                        blk, c = stats[(mm, l)]
                        blk = blk.T
                    # A_l^+ R_{l,m} A_m^{+T} ~ Pi_l^T D  (rows: l's columns, cols: classes)
                    score += c * (pinv[l] @ blk @ pinv[mm].T)
                rows, cols = linear_sum_assignment(score, maximize=True)
                perm = np.empty(k, dtype=np.int64)
                perm[cols] = rows  # new column j = old column perm[j]
                est[l] = est[l][:, perm]
                pinv[l] = pinv[l][perm, :]
                aligned[l] = True
                queue.append(l)
        # global permutation: maximise the answer-weighted diagonal of the aligned workers
        perm = _diagonal_order(est[aligned], n_answers[aligned])
        est[aligned] = est[aligned][:, :, perm]
        pinv[aligned] = pinv[aligned][:, perm, :]
        # prior: diag(A_l^+ R_{l,m} A_m^{+T}) = d over the aligned pairs
        d = np.zeros(k)
        for (i, p), (blk, c) in stats.items():
            if aligned[i] and aligned[p]:
                d += c * np.diag(pinv[i] @ blk @ pinv[p].T)
        return aligned, _prior_or_uniform(d)

    def _complete(self, data, conf_cols, ident, prior):
        """Confusions of unidentified workers from the identified workers' MAP posterior."""
        if np.all(ident):
            return conf_cols
        k, m = data.n_classes, data.n_workers
        log_table = _log_table_from(conf_cols)
        log_table.reshape(m, k, k)[~ident] = 0.0  # no vote in the first pass
        post, _ = kernels.estep(data, log_table, np.log(prior), "numpy")
        has_ident = np.bincount(data.task[ident[data.worker]], minlength=data.n_tasks) > 0
        post[~has_ident] = 0.0
        counts, _ = kernels.mstep(data, post, "numpy")  # (W*K answered, K true)
        counts = counts.reshape(m, k, k) + self.alpha + self.diag_alpha * np.eye(k)
        sums = counts.sum(axis=1, keepdims=True)
        filled = np.divide(counts, sums, out=np.full_like(counts, 1.0 / k), where=sums > 0)
        conf_cols[~ident] = _normalise_columns(filled[~ident])
        return conf_cols


def _coupled_kl(a, d, cooc, n_iter, history, chunk=1 << 20):
    """MultiSPA-KL: refine all confusions by the coupled KL factorisation of the pair counts.

    Minimises ``sum_{m<l} KL(N_ml || n_ml A_m D A_l^T)`` over column-stochastic ``A`` and
    ``d`` (``N_ml`` = K x K answer co-occurrence counts of workers m and l, every
    co-labelling pair) -- the pairwise composite likelihood of the DS model -- by its EM
    (latent class per co-labelled answer pair).  Same objective as the paper's MultiSPA-KL,
    solved with EM updates instead of the reference's alternating optimisation.  Works on
    the non-zero entries of the sparse upper triangle of ``cooc`` (index ``w*K + answer``),
    O(nnz * K) per round.  ``a`` is (S, K, K) [answer, true]; a worker or class column
    without co-occurrences keeps its estimate.  Appends the composite log-likelihood per
    round to ``history``.
    """
    s, k = a.shape[0], a.shape[1]
    coo = cooc.tocoo()
    upper = coo.row // k < coo.col // k
    ri, rl, cnt = coo.row[upper], coo.col[upper], coo.data[upper]
    e = len(cnt)
    if e == 0:
        return a, d
    cols = np.arange(e)
    scatter = (
        sp.csr_matrix((np.ones(e), (ri, cols)), shape=(s * k, e))
        + sp.csr_matrix((np.ones(e), (rl, cols)), shape=(s * k, e))
    ).tocsc()
    a = a.copy()
    d = np.asarray(d, dtype=np.float64).copy()
    for _ in range(n_iter):
        flat = a.reshape(s * k, k)
        acc = np.zeros((s * k, k))
        ll = 0.0
        for lo in range(0, e, chunk):
            sl = slice(lo, lo + chunk)
            joint = flat[ri[sl]] * flat[rl[sl]] * d  # (entries, K): d_j A_m[a,j] A_l[b,j]
            tot = joint.sum(axis=1)
            ll += float(np.sum(cnt[sl] * np.log(np.maximum(tot, _TINY))))
            joint *= (cnt[sl] / np.maximum(tot, _TINY))[:, None]  # posterior mass per class
            acc += (scatter if e <= chunk else scatter[:, sl]) @ joint
        history.append(ll)
        acc = acc.reshape(s, k, k)
        mass = acc.sum(axis=1, keepdims=True)
        has = mass[:, 0, :] > 0
        upd = np.divide(acc, mass, out=a.copy(), where=mass > 0)
        a = np.where(has[:, None, :], _normalise_columns(upd), a)
        # every pair entry's mass lands twice in acc (once per worker)
        d = _prior_or_uniform(mass[:, 0, :].sum(axis=0))
    return a, d


class MultiSPAKL(MultiSPA):
    """MultiSPA-KL: MultiSPA, then ``n_kl_iter`` rounds of coupled KL factorisation.

    Same parameters as :class:`MultiSPA`; ``n_kl_iter`` defaults to 10 (the paper's setting)
    and ``n_em_iter`` to 0.  See :func:`_coupled_kl`.
    """

    def __init__(
        self,
        min_shared: int = 10,
        max_partners: int = 100,
        min_columns: int | None = None,
        max_workers: int = 2000,
        n_kl_iter: int = 10,
        n_em_iter: int = 0,
        tol: float = 0.0,
        alpha: float = 0.0,
        diag_alpha: float = 1.0,
        prior_alpha: float = 1.0,
        compare_with_mv: bool = True,
        random_state: int | None = 0,
    ) -> None:
        super().__init__(
            min_shared=min_shared,
            max_partners=max_partners,
            min_columns=min_columns,
            max_workers=max_workers,
            n_kl_iter=n_kl_iter,
            n_em_iter=n_em_iter,
            tol=tol,
            alpha=alpha,
            diag_alpha=diag_alpha,
            prior_alpha=prior_alpha,
            compare_with_mv=compare_with_mv,
            random_state=random_state,
        )


class MultiSPADawidSkene(MultiSPA):
    """MultiSPA-D&S: MultiSPA confusions as the initialisation of ``n_em_iter`` DS EM rounds.

    Same parameters as :class:`MultiSPA`; ``n_em_iter`` defaults to 10 (the paper's setting).
    """

    def __init__(
        self,
        min_shared: int = 10,
        max_partners: int = 100,
        min_columns: int | None = None,
        max_workers: int = 2000,
        n_kl_iter: int = 0,
        n_em_iter: int = 10,
        tol: float = 0.0,
        alpha: float = 0.0,
        diag_alpha: float = 1.0,
        prior_alpha: float = 1.0,
        compare_with_mv: bool = True,
        random_state: int | None = 0,
    ) -> None:
        super().__init__(
            min_shared=min_shared,
            max_partners=max_partners,
            min_columns=min_columns,
            max_workers=max_workers,
            n_kl_iter=n_kl_iter,
            n_em_iter=n_em_iter,
            tol=tol,
            alpha=alpha,
            diag_alpha=diag_alpha,
            prior_alpha=prior_alpha,
            compare_with_mv=compare_with_mv,
            random_state=random_state,
        )
