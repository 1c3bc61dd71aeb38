"""Moment-then-EM: the shared machinery of the moment-based Dawid-Skene initialisations.

Spectral-DS (:mod:`~crowdlearn.aggregation.spectral_ds`), MultiSPA
(:mod:`~crowdlearn.aggregation.multispa`), CoupledNMF (:mod:`~crowdlearn.aggregation.cnmf`),
TensorADMM (:mod:`~crowdlearn.aggregation.tensor_admm`) and EigenRatio
(:mod:`~crowdlearn.aggregation.eigenratio`) all estimate every worker's confusion matrix
from low-order co-occurrence statistics of the answers and then (optionally) refine them
with a few Dawid-Skene EM rounds.  Under the DS model (papers' orientation
``A_m[answer, true]``, columns sum to 1, ``D = diag(d)`` the class prior) the pairwise
co-occurrence of two different workers is::

    R_{m,l} = E[e_{answer m} e_{answer l}^T] = A_m D A_l^T                (m != l)

The papers use *columns* = true class; these methods compute in that orientation
internally and convert once, at the boundary, to the library's
``confusions_[w, true, answered]`` (rows sum to 1).

:class:`MomentThenEM` runs a subclass's ``_moment_step`` (column-stochastic confusions and
a class prior), labels by the MAP rule ``argmax_j log d_j + sum_m log A_m[answer_m, j]``
and then runs ``n_em_iter`` DS EM rounds:

* EM safeguard (``compare_with_mv=True``): the EM rounds are also run from majority vote
  and the run with the higher final log-likelihood is kept (``init_`` says which), as with
  several EM starts; moment estimates are noisy on small sparse crowds (see
  :mod:`~crowdlearn.aggregation.spectral_ds` for the measurements).  With ``n_em_iter=0``
  the same criterion judges the moment estimate: one EM round from the moment posteriors
  and one from majority vote (the moment model is not a likelihood fit, so scoring it
  as-is against a model fitted to majority vote would be unfair); when majority vote's
  round ends higher it is returned (``init_ = "majority vote"``, ``n_iter_ = 1``),
  otherwise the moment posteriors are returned unchanged (measurements: RESULTS.md,
  section ``moment-safeguard``; ``compare_with_mv=False`` gives the moment estimate alone).
* Degenerate inputs (one class, one worker, singular moment matrices, no identified worker,
  too many classes, ...) make the moment step raise :class:`Degenerate`; the estimator then
  falls back to Dawid-Skene EM from majority vote (with ``n_em_iter`` rounds; with
  ``n_em_iter=0``, majority vote itself with the DS worker model fitted to it) and records
  the reason in ``fallback_`` (``None`` when the moment step ran).  No NaN ever leaves
  ``fit``.
* Gold labels are not used by the (unsupervised) moment step; the EM rounds learn from them
  and the output is clamped to them, as for every estimator.

The helpers below are shared by several moment methods: column normalisation, the global
class order (:func:`diagonal_order`), SPA (:func:`successive_projection`), the sparse pair
moments of the most active workers (:func:`pair_moments`) and the completion of the workers
a moment step could not identify (:func:`complete_unidentified`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment

from ..core import kernels
from ..core.data import CrowdLabels
from ..core.stats import TINY, confusions_from_log_table, expected_skills
from .base import ConfusionAggregator, GoldCodes
from .dawid_skene import DawidSkene, check_table_size

__all__ = [
    "MomentThenEM",
    "Degenerate",
    "FLOOR",
    "successive_projection",
    "normalise_columns",
    "floored_columns",
    "log_table_from_columns",
    "prior_or_uniform",
    "condition_number",
    "diagonal_order",
    "active_workers",
    "pair_moments",
    "worker_rank",
    "complete_unidentified",
    "moments_of_answered_classes",
]

FLOOR = 1e-6  # confusion entries floor (the Spectral-DS and MultiSPA reference codes)


class Degenerate(Exception):
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


def normalise_columns(a: np.ndarray) -> np.ndarray:
    """Floor at 1e-6 and make every column (axis -2) sum to 1."""
    a = np.maximum(a, FLOOR)
    return a / a.sum(axis=-2, keepdims=True)


def floored_columns(conf_cols: np.ndarray, floor: float) -> np.ndarray:
    """Columns (axis -2) floored at ``min(floor, 0.1 / K)`` and renormalised."""
    k = conf_cols.shape[-2]
    f = min(float(floor), 0.1 / k)
    if f <= 0:
        return normalise_columns(conf_cols)
    c = np.maximum(conf_cols, f)
    return c / c.sum(axis=-2, keepdims=True)


def log_table_from_columns(conf_cols: np.ndarray) -> np.ndarray:
    """(W, K answer, K true) column-stochastic confusions -> the kernels' (W*K, K) log table."""
    m, k, _ = conf_cols.shape
    return np.log(np.maximum(conf_cols, TINY)).reshape(m * k, k)


def prior_or_uniform(d: np.ndarray) -> np.ndarray:
    """``d`` normalised to sum 1, or the uniform prior when ``d`` is not a positive vector."""
    d = np.asarray(d, dtype=np.float64)
    if d.size == 0 or not np.all(np.isfinite(d)) or np.any(d <= 0):
        return np.full(d.size, 1.0 / max(d.size, 1))
    return d / d.sum()


def condition_number(a: np.ndarray) -> float:
    """2-norm condition number of ``a`` (inf when singular)."""
    s = np.linalg.svd(a, compute_uv=False)
    return float(s[0] / s[-1]) if s[-1] > 0 else np.inf


def diagonal_order(conf_cols: np.ndarray, n_answers: np.ndarray) -> np.ndarray:
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



def worker_rank(data: CrowdLabels) -> np.ndarray:
    """Preference of every worker (0 = first) where a moment method chooses among workers its
    statistics tie: partners sharing as many tasks, triples with as many common tasks, workers
    with as many answers.

    First the workers whose answers agree with more of the other answers on their tasks (the
    share of those others giving the same label), then those with more answers, then the
    code.  Read from the answers, so the choice does not follow the sort order of the ids: a
    choice by code did, and on bluebirds, where every pair of workers shares all 108 tasks,
    new worker ids changed TensorADMM's labels.  The shares are ratios of integer counts, so
    they do not depend on the order of the rows either.
    """
    m = data.n_workers
    counts = data.vote_counts()
    same = counts[data.task, data.label] - 1.0  # the other answers agreeing with this one
    others = np.diff(data.task_ptr)[data.task] - 1.0
    agree_num = np.bincount(data.worker, weights=same, minlength=m)
    agree_den = np.bincount(data.worker, weights=others, minlength=m)
    agree = np.divide(agree_num, agree_den, out=np.zeros(m), where=agree_den > 0)
    order = np.lexsort((np.arange(m), -data.labels_per_worker(), -agree))
    rank = np.empty(m, dtype=np.int64)
    rank[order] = np.arange(m)
    return rank


def active_workers(data: CrowdLabels, max_workers: int) -> np.ndarray:
    """Codes of the (at most ``max_workers``) most active workers, sorted (ties:
    :func:`worker_rank`)."""
    per_worker = data.labels_per_worker()
    active = np.flatnonzero(per_worker > 0)
    if len(active) > max_workers:
        order = np.lexsort((worker_rank(data)[active], -per_worker[active]))
        active = np.sort(active[order[:max_workers]])
    return active


def pair_moments(data: CrowdLabels, active: np.ndarray, min_shared: int, max_partners: int):
    """Empirical pair co-occurrences ``R_{i,l}`` of the ``active`` workers.

    Returns ``(pi, pl, cnt, blocks)``: pairs ``pi < pl`` (positions in ``active``) sharing at
    least ``min_shared`` tasks, kept when ``l`` is among the ``max_partners`` most
    co-labelling partners of ``i`` or vice versa; ``cnt`` the shared-task counts and
    ``blocks[p, a, b]`` the fraction of shared tasks on which ``i`` answered ``a`` and ``l``
    answered ``b`` (orientation: rows = first worker's answer).  All from two sparse
    products; no dense S x S or (S K) x (S K) matrix is built here.
    """
    n, k = data.n_tasks, data.n_classes
    s = len(active)
    cols = (active[:, None] * k + np.arange(k)).ravel()
    inc = data.incidence()[:, cols].tocsr()
    cooc = (inc.T @ inc).tocoo()
    pos = np.full(data.n_workers, -1, dtype=np.int64)
    pos[active] = np.arange(s)
    keep = pos[data.worker] >= 0
    b = sp.csr_matrix(
        (np.ones(int(keep.sum())), (data.task[keep], pos[data.worker[keep]])), shape=(n, s)
    )
    b.data[:] = 1.0  # a repeated answer counts its task once
    shared = (b.T @ b).tocoo()
    off = (shared.row != shared.col) & (shared.data >= min_shared)
    si, sl = shared.row[off].astype(np.int64), shared.col[off].astype(np.int64)
    sc = shared.data[off]
    # top partners per worker (rows of the symmetric list), most shared first, ties by
    # worker_rank (not by code: the sort order of the ids)
    rank = worker_rank(data)[active]
    order = np.lexsort((rank[sl], -sc, si))
    si, sl, sc = si[order], sl[order], sc[order]
    start = np.searchsorted(si, si, side="left")
    rank = np.arange(len(si)) - start
    top = rank < max_partners
    keys_top = np.unique(np.minimum(si[top], sl[top]) * s + np.maximum(si[top], sl[top]))
    pi, pl = keys_top // s, keys_top % s
    up = si < sl
    ukey = si[up] * s + sl[up]
    uorder = np.argsort(ukey)
    ukey, ucnt = ukey[uorder], sc[up][uorder]
    cnt = ucnt[np.searchsorted(ukey, keys_top)].astype(np.float64)
    # scatter the co-occurrence entries of the kept pairs into K x K blocks
    wr, wc = (cooc.row // k).astype(np.int64), (cooc.col // k).astype(np.int64)
    ent = wr < wc
    ekey = wr[ent] * s + wc[ent]
    if len(keys_top):
        where = np.minimum(np.searchsorted(keys_top, ekey), len(keys_top) - 1)
        hit = keys_top[where] == ekey
    else:
        where, hit = np.zeros(len(ekey), np.int64), np.zeros(len(ekey), bool)
    blocks = np.zeros((len(keys_top), k, k))
    np.add.at(
        blocks,
        (where[hit], cooc.row[ent][hit] % k, cooc.col[ent][hit] % k),
        cooc.data[ent][hit],
    )
    blocks /= np.maximum(cnt, 1.0)[:, None, None]
    return pi, pl, cnt, blocks


def complete_unidentified(
    data: CrowdLabels,
    conf_cols: np.ndarray,
    ident: np.ndarray,
    prior: np.ndarray,
    alpha: float,
    diag_alpha: float,
    n_rounds: int = 1,
) -> np.ndarray:
    """Confusions of the workers a moment step did not identify, from the posterior.

    First pass (MultiSPA's completion): the MAP posterior of the identified workers alone
    (the others get no vote; tasks without an identified worker get no weight), and each
    unidentified worker's columns are its ``alpha + diag_alpha I``-smoothed soft answer
    counts against it.  Then ``n_rounds - 1`` refinements against the posterior of *all*
    workers, updating only the completed ones (CoupledNMF and TensorADMM use 2 rounds: with
    few identified workers per task the first posterior is weak and its soft counts are
    biased towards uniform).  ``conf_cols`` (W, K answer, K true) is updated in place.
    """
    if np.all(ident):
        return conf_cols
    k, m = data.n_classes, data.n_workers
    log_table = log_table_from_columns(conf_cols)
    log_table.reshape(m, k, k)[~ident] = 0.0  # no vote in the first pass
    post, _ = kernels.estep(data, log_table, np.log(prior), "numpy")
    has_ident = np.bincount(data.task[ident[data.worker]], minlength=data.n_tasks) > 0
    post[~has_ident] = 0.0
    conf_cols[~ident] = _smoothed_columns(data, post, alpha, diag_alpha)[~ident]
    for _ in range(n_rounds - 1):
        log_table = np.log(np.maximum(conf_cols, TINY)).reshape(m * k, k)
        post, _ = kernels.estep(data, log_table, np.log(np.maximum(prior, TINY)), "numpy")
        conf_cols[~ident] = _smoothed_columns(data, post, alpha, diag_alpha)[~ident]
    return conf_cols


def _smoothed_columns(data: CrowdLabels, post: np.ndarray, alpha: float, diag_alpha: float):
    """Column-stochastic (W, K answer, K true) confusions from the soft counts against ``post``."""
    k, m = data.n_classes, data.n_workers
    counts, _ = kernels.mstep(data, post, "numpy")  # (W*K answered, K true)
    counts = counts.reshape(m, k, k) + alpha + diag_alpha * np.eye(k)
    sums = counts.sum(axis=1, keepdims=True)
    filled = np.divide(counts, sums, out=np.full_like(counts, 1.0 / k), where=sums > 0)
    return normalise_columns(filled)


def moments_of_answered_classes(step, data: CrowdLabels) -> tuple[np.ndarray, np.ndarray]:
    """``step(data)`` on the classes that have answers, embedded back into all K classes.

    A class nobody answered (one only the gold has, or one named in ``classes``) leaves no
    trace in any co-occurrence statistic, yet a rank-K factorisation still spends a factor
    on it: noise then becomes a class, and tasks nobody answered with it got it as their
    label.  So the moment step sees only the answered classes; an unanswered true class gets
    prior 0 (the answers give it no weight) and a uniform column over the answered classes.

    Parameters
    ----------
    step : callable
        ``step(data) -> (conf_cols (W, K answer, K true) column-stochastic, prior (K,))``.
    data : CrowdLabels

    Returns
    -------
    conf_cols : ndarray (W, K, K)
    prior : ndarray (K,)

    Raises
    ------
    Degenerate
        When fewer than two classes have answers.
    """
    k, m = data.n_classes, data.n_workers
    answered = np.bincount(data.label, minlength=k) > 0
    if answered.all():
        return step(data)
    r = int(answered.sum())
    if r < 2:
        raise Degenerate("fewer than two classes have answers")
    code = np.cumsum(answered) - 1  # class code -> its position among the answered classes
    sub = CrowdLabels(data.task, data.worker, code[data.label], tasks=data.tasks,
                      workers=data.workers, classes=data.classes[answered])
    sub_cols, sub_prior = step(sub)
    conf_cols = np.zeros((m, k, k))
    conf_cols[:, answered[:, None] & answered[None, :]] = sub_cols.reshape(m, r * r)
    conf_cols[:, answered[:, None] & ~answered[None, :]] = 1.0 / r
    prior = np.zeros(k)
    prior[answered] = sub_prior
    return conf_cols, prior


# ======================================================================= shared base
class MomentThenEM(ConfusionAggregator):
    """Moment estimate of the confusions, MAP posteriors, then ``n_em_iter`` DS EM rounds."""

    #: above this many classes the moment step is skipped (fallback); see the subclasses
    _max_classes = 20

    # ----- subclasses implement: return (conf_cols (W, K, K) column-stochastic, prior (K,))
    def _moment_step(self, data: CrowdLabels) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _fit(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None):
        if self.n_em_iter < 0:
            raise ValueError(f"n_em_iter must be >= 0, got {self.n_em_iter}")
        k, m = data.n_classes, data.n_workers
        check_table_size(type(self).__name__, m, k)
        self.fallback_: str | None = None
        self.init_ = "moment"
        self.moment_confusions_ = None
        self.moment_priors_ = None
        try:
            if k < 2:
                raise Degenerate("fewer than two classes")
            if k > self._max_classes:
                raise Degenerate(
                    f"{k} classes: the moment step of {type(self).__name__} is limited to "
                    f"{self._max_classes} classes"
                )
            conf_cols, prior = moments_of_answered_classes(self._moment_step, data)
            if not (np.all(np.isfinite(conf_cols)) and np.all(np.isfinite(prior))):
                raise Degenerate("the moment estimate is not finite")
        except Degenerate as why:
            self.fallback_ = str(why)
        except np.linalg.LinAlgError as why:
            self.fallback_ = f"linear algebra failure in the moment step ({why})"
        if self.fallback_ is not None:
            self.init_ = "majority vote"
            return self._adopt(data, self._em(data, gold, None))
        conf = conf_cols.transpose(0, 2, 1)  # -> [w, true, answered]
        self.moment_confusions_ = conf
        self.moment_priors_ = pd.Series(prior, index=data.classes, name="prior")
        log_table = log_table_from_columns(conf_cols)
        log_prior = np.log(np.maximum(prior, TINY))
        post, ll = kernels.estep(data, log_table, log_prior, "numpy")
        if self.n_em_iter == 0:
            if self.compare_with_mv:
                ds_mv = self._moment_loses_to_mv(data, gold, post)
                if ds_mv is not None:
                    self.init_ = "majority vote"
                    return self._adopt(data, ds_mv)
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

    def _moment_loses_to_mv(self, data, gold, post) -> DawidSkene | None:
        """The moment-only safeguard: one DS EM round from the moment posteriors ``post``
        and one from majority vote; the majority-vote fit when it ends at the higher
        log-likelihood, else None (keep the moment estimate).

        The EM safeguard's criterion, applied like with like: the moment model itself is not
        a likelihood fit (floored columns, workers completed from a few identified ones), so
        its log-likelihood against that of the DS model fitted to majority vote rejects it
        on crowds where it is far better (adversarial crowds).  One M-step from each
        posterior, with the same smoothing, gives two fitted models scored on the answers.
        The winner's own posteriors are returned: the moment E-step as without the
        safeguard (``n_em_iter=0`` asks for no EM), or the E-step of the DS model fitted to
        majority vote, so that ``probas_`` is the posterior of ``confusions_``.
        """
        ds_moment = self._em(data, gold, post, n_iter=1)
        ds_mv = self._em(data, gold, None, n_iter=1)
        return ds_mv if ds_mv.history_[-1] > ds_moment.history_[-1] else None

    def _em(self, data, gold, init, n_iter: int | None = None) -> DawidSkene:
        """``n_iter`` (default ``n_em_iter``) rounds of DS EM from posteriors ``init`` (None:
        majority vote).

        ``gold`` is this fit's class codes of the same table, so it goes in as
        :class:`GoldCodes`: a plain array is refused by ``fit``."""
        ds = DawidSkene(
            max_iter=self.n_em_iter if n_iter is None else n_iter,
            tol=self.tol,
            alpha=self.alpha,
            diag_alpha=self.diag_alpha,
            prior_alpha=self.prior_alpha,
            random_state=self.random_state,
        )
        return ds.fit(data, gold=None if gold is None else GoldCodes(gold), init=init, verbose=False,
                      callback=self._progress_relay())

    def _adopt(self, data, ds: DawidSkene) -> np.ndarray:
        self.history_.extend(ds.history_)
        self.n_iter_ = int(ds.n_iter_)
        self.converged_ = bool(ds.converged_) if self.n_em_iter else True
        self._set_model(data, ds._log_table, ds._log_prior)
        return ds.probas_.to_numpy().copy()

    def _set_model(self, data, log_table, log_prior):
        self._log_table = np.ascontiguousarray(log_table)
        self._log_prior = np.asarray(log_prior, dtype=np.float64)
        self.confusions_ = confusions_from_log_table(self._log_table, data.n_workers)
        prior = np.exp(self._log_prior)
        self.priors_ = pd.Series(prior, index=data.classes, name="prior")
        self.skills_ = pd.Series(
            expected_skills(self.confusions_, prior), index=data.workers, name="skill"
        )
