"""Base of the pairwise-comparison methods: fit -> a score, rank and standard error per item.

A method implements ``_fit(data) -> PairwiseFit``; this base validates the input, warns about
a disconnected comparison graph, turns the fitted scores into ranks and computes standard
errors from the Fisher information the method reports.

Regularisation (every method): each item plays ``prior_strength`` virtual wins and as many
virtual losses against a virtual item of score 0 (:func:`crowdlearn.pairwise.links.prior_terms`;
Chen et al. 2013 regularise Crowd-BT this way).  It keeps every fit defined -- an item that
wins all its comparisons gets a finite score, items of different components of the
comparison graph are placed relative to the common zero, an item never compared gets the
prior mean 0 -- and vanishes relative to the data as comparisons accumulate.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..core.base import AnswerEstimator, Tags
from ..core.params import check_params
from .backend import compiled_pairwise, resolve_backend
from .data import LEFT, RIGHT, TIE, Comparisons, as_comparisons

__all__ = ["PairwiseEstimator", "PairwiseFit", "PairCounts", "pair_counts", "wins_strongly_connected", "score_stderr",
           "tied_ranks", "DENSE_STDERR_MAX", "RANK_RTOL"]

#: up to this many items the standard errors use the full inverse Fisher information; above,
#: its diagonal approximation (conditional variances, a lower bound)
DENSE_STDERR_MAX = 1000

#: scores closer than this, relative to their scale (:func:`tied_ranks`), share a rank: the
#: square root of the double-precision machine epsilon, about 1.5e-8
RANK_RTOL = float(np.sqrt(np.finfo(np.float64).eps))


@dataclass
class PairwiseFit:
    """What a method's ``_fit`` returns.

    scores : (n_items,) fitted scores, higher = better.
    info : (n_rows,) Fisher information of each row of ``info_pairs`` about ``d = s_a - s_b``,
        or a picklable function of no arguments that returns it (e.g. a
        ``functools.partial``), called only when the standard errors are first read.
    info_pairs : (a, b) item codes of those rows.
    prior_curv : (n_items,) minus the second derivative of the log prior at ``scores``.
    reliability : (n_workers,) worker reliability, or None when the model has none.
    history : objective per iteration.
    converged : whether the stopping rule ended the fit (False: it ran out of iterations).
    extra : further fitted attributes, set on the estimator as they are named.
    """

    scores: np.ndarray
    info: np.ndarray | Callable[[], np.ndarray]
    info_pairs: tuple[np.ndarray, np.ndarray]
    prior_curv: np.ndarray
    reliability: np.ndarray | None = None
    history: list = field(default_factory=list)
    converged: bool = True
    extra: dict = field(default_factory=dict)


@dataclass
class PairCounts:
    """Comparisons merged per unordered item pair ``a < b``: how often ``a`` won, ``b`` won,
    and how often they tied (optionally weighted)."""

    a: np.ndarray
    b: np.ndarray
    wins_a: np.ndarray
    wins_b: np.ndarray
    ties: np.ndarray


def wins_strongly_connected(pc: PairCounts, n_items: int) -> bool:
    """Whether every item can be reached from every other along "beat or tied with" edges.

    Ford's (1957) condition: the Bradley-Terry likelihood has a finite maximum exactly when
    this directed graph is strongly connected.  When it is not (an item that wins, or loses,
    all its comparisons; groups never compared), only the prior holds some scores, the
    posterior is flat along them, and MM's steps there shrink to nothing.  Items in no
    comparison are left out: the prior alone sets them (to 0), and no other score depends
    on them.
    """
    if n_items <= 1:
        return True
    if resolve_backend("auto", len(pc.a)) == "numba":
        # compiled, with a fast path for the common case (the scipy route below costs a third
        # of a whole 20-iteration MM fit at 10^6 comparisons)
        return bool(compiled_pairwise().strongly_connected(pc.a, pc.b, pc.wins_a, pc.wins_b, pc.ties, n_items))
    forward = (pc.wins_a > 0) | (pc.ties > 0)  # a beat (or tied) b: an edge a -> b
    backward = (pc.wins_b > 0) | (pc.ties > 0)
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    rows = np.concatenate([pc.a[forward], pc.b[backward]])
    cols = np.concatenate([pc.b[forward], pc.a[backward]])
    graph = coo_matrix((np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(n_items, n_items))
    _, labels = connected_components(graph, directed=True, connection="strong")
    present = np.unique(np.concatenate([pc.a, pc.b]))
    return len(np.unique(labels[present])) <= 1  # an item in no pair has no flat direction


def pair_counts(data: Comparisons, weights_left: np.ndarray | None = None) -> PairCounts:
    """Merge the comparisons by unordered pair in O(L) (:meth:`Comparisons.pair_index`, then
    a bincount, or for whole counts with the numba back end one compiled pass,
    :func:`crowdlearn.pairwise.compiled.count_outcomes`).

    ``weights_left`` (optional, per comparison, for fractional outcomes): the weight of
    "left wins" for a comparison answered left or right; ``1 - weight`` goes to the other
    side.  Ties always count 1.  Merging makes each iteration cost O(distinct pairs) and
    makes the result independent of which item was shown on the left.
    """
    codes, swap, a, b = data.pair_index()
    n_pairs = len(a)
    out = data.outcome
    strict = out != TIE
    if weights_left is None and resolve_backend("auto", len(codes)) == "numba":
        counts = compiled_pairwise().count_outcomes(codes, swap, out, n_pairs)
        return PairCounts(a=a, b=b, wins_a=counts[LEFT], wins_b=counts[RIGHT], ties=counts[TIE])
    if weights_left is None:
        # whole counts: the outcome seen from the pair's side (left and right swap places
        # when the left item is ``b``) indexes a column, and one unweighted bincount counts
        # all three columns at once
        side = out ^ (swap & strict).astype(out.dtype)
        counts = np.bincount(codes * 3 + side, minlength=3 * n_pairs).reshape(n_pairs, 3)
        counts = np.array(counts.T, dtype=np.float64, order="C")  # contiguous rows
        return PairCounts(a=a, b=b, wins_a=counts[LEFT], wins_b=counts[RIGHT], ties=counts[TIE])
    w_left = np.where(strict, weights_left, 0.0)
    w_right = np.where(strict, 1.0 - w_left, 0.0)
    w_a = np.where(swap, w_right, w_left)  # a is the left item unless swapped
    w_b = np.where(swap, w_left, w_right)
    return PairCounts(
        a=a, b=b,
        wins_a=np.bincount(codes, weights=w_a, minlength=n_pairs),
        wins_b=np.bincount(codes, weights=w_b, minlength=n_pairs),
        ties=np.bincount(codes, weights=(~strict).astype(np.float64), minlength=n_pairs),
    )


def score_stderr(n_items: int, a: np.ndarray, b: np.ndarray, info: np.ndarray,
                 prior_curv: np.ndarray) -> np.ndarray:
    """Standard errors of the scores from the inverse of the (regularised) Fisher information.

    The information matrix of a model whose answers depend on score differences is a
    weighted graph Laplacian (``info`` on the edges ``a - b``) plus the prior's curvature on
    the diagonal, which makes it invertible.  Up to :data:`DENSE_STDERR_MAX` items the
    diagonal of its inverse is computed exactly; above, ``1 / sqrt(H_ii)`` (each score's
    variance with the others held fixed, a lower bound) keeps the cost linear.
    """
    deg = (np.bincount(a, weights=info, minlength=n_items)
           + np.bincount(b, weights=info, minlength=n_items) + prior_curv)
    deg = np.maximum(deg, 1e-12)
    if n_items > DENSE_STDERR_MAX:
        return 1.0 / np.sqrt(deg)
    h = np.zeros((n_items, n_items))
    np.add.at(h, (a, b), -info)
    h = h + h.T
    h[np.diag_indices(n_items)] = deg
    # the inverse from the Cholesky factor (LAPACK potrf + potri): a third of np.linalg.inv's work
    from scipy.linalg.lapack import dpotrf, dpotri

    chol, info = dpotrf(h, lower=0, overwrite_a=1)
    if info != 0:
        return 1.0 / np.sqrt(deg)
    inv_upper, info = dpotri(chol, lower=0, overwrite_c=1)
    if info != 0:
        return 1.0 / np.sqrt(deg)
    return np.sqrt(np.maximum(np.diag(inv_upper), 0.0))


def tied_ranks(scores: np.ndarray, groups: np.ndarray, rtol: float = RANK_RTOL) -> np.ndarray:
    """Ranks of scores within groups, 1 = best, with equal scores sharing the rank.

    Parameters
    ----------
    scores : (n,) array of float
        Finite scores, higher = better.
    groups : (n,) array of int
        Group code of each score; ranks are counted within each group.
    rtol : float, default :data:`RANK_RTOL`
        Two scores are equal when they differ by at most ``rtol * max(1, max |scores|)``.

    Returns
    -------
    (n,) array of int64
        The "min" rank: one plus the number of scores of the group that are higher by more
        than the tolerance.  A run of scores each within the tolerance of the next shares
        the rank of its best, so equality is transitive.

    Notes
    -----
    Why a tolerance: items with identical comparison records have the same score in exact
    arithmetic, but the solvers sum their terms in different orders and hand them back a few
    units in the last place apart (up to 1e-14 relative on simulated crowds, with every
    method), so ranking the raw floats gave them different ranks.  Why ``sqrt(eps)``: every
    fit maximises a smooth objective, which changes with the square of a score's distance
    from its maximum, so scores closer than ``sqrt(eps)`` times their scale change the
    objective by about ``eps`` relative -- less than double precision resolves -- and no fit
    can order them; the bound is six orders of magnitude above that rounding noise.  Why
    ``max(1, .)``: scores are log-strengths, and the solvers compute with ``exp(score)``
    and the prior's zero, whose rounding is absolute near 0.
    """
    scores = np.asarray(scores, dtype=np.float64)
    groups = np.asarray(groups)
    n = len(scores)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    tol = float(rtol) * max(1.0, float(np.max(np.abs(scores))))
    order = np.lexsort((-scores, groups))  # by group, best first within each
    s, g = scores[order], groups[order]
    pos = np.arange(n)
    new_group = np.r_[True, g[1:] != g[:-1]]
    new_level = new_group | np.r_[True, (s[:-1] - s[1:]) > tol]
    group_start = np.maximum.accumulate(np.where(new_group, pos, 0))
    level_start = np.maximum.accumulate(np.where(new_level, pos, 0))
    ranks = np.empty(n, dtype=np.int64)
    ranks[order] = level_start - group_start + 1
    return ranks


class PairwiseEstimator(AnswerEstimator):
    """Base of the pairwise methods (kind ``"pairwise"``).

    ``fit(answers)`` takes a :class:`~crowdlearn.pairwise.data.Comparisons` (or a DataFrame
    with columns ``worker, left, right, label`` and optionally ``group``).

    Attributes
    ----------
    scores_ : Series item -> score
        Higher is better; the log-strength scale of the model (0 = the prior mean).  For
        grouped comparisons every per-item Series is indexed by the (group, item) units, a
        MultiIndex (:data:`~crowdlearn.pairwise.data.UNIT_LEVELS`).
    ranks_ : Series item -> int
        1 = best; within each group for grouped comparisons; equal scores share the rank
        (equal up to rounding: :func:`tied_ranks`).
    stderr_ : Series item -> float
        Standard error of each score (:func:`score_stderr`).  Computed on first access,
        not in ``fit``: up to :data:`DENSE_STDERR_MAX` items it inverts a dense
        items x items matrix, which at 1,000 items costs more than a Bradley-Terry fit on
        10^6 comparisons.  Until then the estimator keeps what it needs (the pairs and
        their Fisher information, or for ``bt`` and ``thurstone`` the merged pair counts it
        is computed from), so a fitted estimator pickled before the first read carries them.
    worker_reliability_ : Series worker -> float
        Methods with a worker model only (see each method).
    n_components_ : int
        Connected components of the comparison graph.
    history_ : list of float
        Objective per iteration.
    n_iter_ : int
        Iterations run (see each method); ``converged_`` : bool, whether its stopping rule
        ended the fit rather than ``max_iter``.
    """

    _result_attr = "scores_"

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), kind="pairwise",
                                   answer_type="pairwise", accepts_gold=False)

    # ------------------------------------------------------------------ fit
    def fit(self, answers: Any) -> "PairwiseEstimator":
        """Fit on comparisons; returns ``self``.  The input is not modified."""
        check_params(self)
        data = as_comparisons(answers)
        self._warn_disconnected(data)
        fitted = self._fit(data)
        scores = np.asarray(fitted.scores, dtype=np.float64)
        if not np.all(np.isfinite(scores)):  # a bug, not a data problem: never hand out NaN
            raise FloatingPointError(f"{type(self).__name__}: non-finite scores")
        items = data.items
        self.items_ = items
        self.scores_ = pd.Series(scores, index=items, name="score")
        # what stderr_ needs, computed on first access (see the class docstring)
        self._stderr = None
        self._stderr_inputs = (data.n_items, fitted.info_pairs, fitted.info, fitted.prior_curv)
        groups = data.group_codes()
        # not rank() on the raw floats: tied items come out of the solvers a few ulps apart
        self.ranks_ = pd.Series(tied_ranks(scores, groups), index=items, name="rank")
        self.groups_ = (pd.Series(data.item_group, index=items, name="group")
                        if data.grouped else None)
        if fitted.reliability is not None:
            self.worker_reliability_ = pd.Series(fitted.reliability, index=data.workers,
                                                 name="reliability")
        self.history_ = list(fitted.history)
        self.converged_ = bool(fitted.converged)
        for name, value in fitted.extra.items():
            setattr(self, name, value)
        return self

    @property
    def stderr_(self) -> pd.Series:
        """Standard error of each score (:func:`score_stderr`), computed on first access."""
        if getattr(self, "_stderr", None) is None:
            if not hasattr(self, "_stderr_inputs"):
                raise AttributeError(f"{type(self).__name__} has no stderr_ before fit")
            n_items, (a, b), info, prior_curv = self._stderr_inputs
            info = info() if callable(info) else info
            stderr = score_stderr(n_items, a, b, np.nan_to_num(info), prior_curv)
            self._stderr = pd.Series(stderr, index=self.items_, name="stderr")
            del self._stderr_inputs  # the pair arrays are not needed any more
        return self._stderr

    def _fit(self, data: Comparisons) -> PairwiseFit:
        raise NotImplementedError

    def _warn_disconnected(self, data: Comparisons) -> None:
        n_comp, _ = data.components()
        n_groups = len(np.unique(data.group_codes())) if data.n_items else 1
        self.n_components_ = n_comp
        if n_comp > n_groups:
            where = f" (across {n_groups} groups)" if data.grouped else ""
            warnings.warn(
                f"{type(self).__name__}: the comparison graph has {n_comp} connected "
                f"components{where}; scores of items in different components are not "
                "compared by any answer and are placed only through the prior "
                "(virtual games against a zero-score item, prior_strength="
                f"{getattr(self, 'prior_strength', None)})", UserWarning, stacklevel=3)

    # --------------------------------------------------------------- output
    def _result_frame(self) -> pd.DataFrame:
        """``item, score, rank, stderr``; for grouped comparisons ``group, item, score, rank,
        stderr``: the unit, a (group, item) pair, in its first two columns, each id as given
        (never one joined text, which two units could share)."""
        values = {"score": self.scores_.to_numpy(), "rank": self.ranks_.to_numpy(),
                  "stderr": self.stderr_.to_numpy()}
        if isinstance(self.items_, pd.MultiIndex):
            units = {level: self.items_.get_level_values(level) for level in self.items_.names}
            return pd.DataFrame({**units, **values})
        return pd.DataFrame({"item": self.items_, **values})
