"""M-MSR: worker skills by robust rank-one completion of the worker agreement matrix.

Ma & Olshevsky (2020), "Adversarial crowdsourcing through robust rank-one matrix completion",
NeurIPS 33 (arXiv 2010.12181; reference code ``maqqbu/MMSR``).

Model.  Under the one-coin model with K classes a worker with accuracy ``p_i`` has skill
``s_i = (K p_i - 1) / (K - 1)`` (1 = perfect, 0 = guessing, negative = worse than chance).
If ``c_ij`` is the fraction of their co-labelled tasks on which workers ``i`` and ``j`` agree,
then, whatever the class prior,

    E[(K c_ij - 1) / (K - 1)] = s_i s_j        (i != j),

so the centred agreement matrix ``C`` is a rank-one matrix ``s s^T`` observed on the pairs of
workers that share tasks (never on the diagonal).  Workers that break the model (arbitrary
"adversaries") corrupt whole rows and columns of ``C``.

Algorithm (M-MSR, "matrix mean-subsequence-reduced").  Alternating updates of ``u v^T ~ C``::

    v_j <- mean of the ratios C_ij / u_i over the observed i, after removing the F largest
           of those above the current v_j and the F smallest of those below it
    u_i <- the same with the roles of u and v swapped

until the rank-one iterate ``u v^T`` moves by less than ``tol`` (relative Frobenius norm,
computed in closed form, never as a W x W dense matrix); then ``s = u / k`` with
``k = sqrt(|u| / |v|)`` (averaged with ``v k``), the global sign is chosen so that most
workers have a positive skill (the reference code's rule; counting workers rather than
answers keeps a prolific colluding bloc from claiming the positive side), and ``s`` is
clipped to ``[-1/(K-1) + eps, 1 - eps]`` with ``eps = 1/sqrt(n_tasks)`` as in the reference
code.  Tasks are labelled by the weighted vote with the one-coin log-odds
weights ``log((K - 1) p / (1 - p))``, ``p = 1/K + (K - 1)/K s``, and ``probas_`` is the
one-coin posterior ``softmax(sum of weights per class)``.

Differences from the reference code (mostly for sparse data):

* The reference completes ``|C|`` and recovers the signs afterwards from a 2-colouring of the
  sign graph.  When pairs share one or two tasks, ``|C_ij|`` is strongly biased upwards (for
  binary answers from one shared task it is always 1), so here the signed ``C`` is completed
  directly: adversaries come out with negative ``u_i``, and only the global sign is left.
* The mean of ratios is weighted by ``n_ij u_i^2`` (``n_ij`` = number of co-labelled tasks),
  i.e. each step is a weighted least-squares fit of the kept entries; the plain mean of ratios
  is dominated by ``C_ij / u_i`` for near-zero ``u_i`` (spammers).
* ``F`` is per worker, ``floor(trim * number of observed pairs)``; the reference uses
  ``floor(min_j deg_j / 2) - 1`` for everybody, which is a near-median on dense data and no
  filtering at all on sparse data.
* Workers that share no task with anybody get the answer-weighted mean skill.
* The filter is discontinuous, so the iteration can end in a small limit cycle (relative
  change ~1e-3, labels fixed) instead of converging; after 10 rounds without a new lowest
  change it stops, averages those rounds' iterates and leaves ``converged_`` False.

Choice of ``trim``: the default 0.1 was chosen on simulated crowds (sparse workers, many
classes, spammers and adversaries, asymmetric confusions, class imbalance;
``benchmarks/tune_defaults.py``), not on the real benchmark sets.  Trimming more protects
against more adversaries but discards more of the honest pairs, which sparse crowds cannot
spare.

Memory is O(L + P) with P the number of co-labelling worker pairs: agreements and co-label
counts come from sparse products (``sum_c A_c^T A_c`` and ``B^T B``), nothing of size
tasks x workers or (dense) workers x workers is allocated.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.special import softmax

from ..core.base import Tags
from ..core.data import CrowdLabels
from ..core.stats import weighted_votes
from .base import BaseAggregator

__all__ = ["MMSR", "pair_agreements"]

_TINY = 1e-12
_PATIENCE = 10


def pair_agreements(data: CrowdLabels) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Co-labelling statistics of every pair of distinct workers that share a task.

    Returns ``(indptr, indices, agree, count)``: a symmetric CSR pattern over workers (no
    diagonal) with, for pair (i, j), ``count`` = number of (answer of i, answer of j) pairs on
    shared tasks and ``agree`` = how many of those are equal.  Computed as ``B^T B`` and
    ``sum_c A_c^T A_c`` with ``B`` the sparse task x worker incidence and ``A_c`` its
    restriction to answers of class ``c`` (stacked as one (task, class) x worker matrix).
    """
    n, m, k = data.n_tasks, data.n_workers, data.n_classes
    ones = np.ones(data.n_labels)
    b = sp.csr_matrix((ones, data.worker, data.task_ptr), shape=(n, m))
    rows = data.task.astype(np.int64) * k + data.label
    a = sp.csr_matrix((ones, (rows, data.worker)), shape=(n * k, m))
    count = (b.T @ b).tocsr()
    count.sum_duplicates()
    # agreements live on a subset of count's pattern; adding count aligns the patterns
    both = (a.T @ a).tocsr() + count
    both.sum_duplicates()
    if not (np.array_equal(both.indptr, count.indptr) and np.array_equal(both.indices, count.indices)):
        raise RuntimeError("internal error: agreement and co-label patterns differ")
    row = np.repeat(np.arange(m, dtype=np.int64), np.diff(count.indptr))
    off = row != count.indices
    indptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(row[off], minlength=m), out=indptr[1:])
    cnt = count.data[off]
    agree = both.data[off] - cnt
    return indptr, count.indices[off].astype(np.int64), agree, cnt


class MMSR(BaseAggregator):
    """Matrix Mean-Subsequence-Reduced (M-MSR) skill estimation + weighted vote.

    Parameters
    ----------
    n_iter : int, default 100
        Maximum number of alternating (u, v) rounds.
    tol : float, default 1e-6
        Stop when ``||u v^T - u' v'^T||_F / ||u v^T||_F < tol`` (previous iterate primed).
    trim : float in [0, 0.5), default 0.1 (chosen on simulated crowds; module notes)
        The MSR filter removes, per worker, up to ``F = floor(trim * pairs)`` ratios above and
        below the current value (the paper's ``F``, as a fraction of the worker's observed
        pairs).  ``0`` gives plain weighted alternating least squares.
    random_state : int, default 0
        Seed of the draw between classes of exactly equal weight.  The iteration starts from
        ``u = v = 1`` (every worker equally skilled, so the first step gives each worker its
        weighted mean agreement), not from the reference code's random start: where it ends
        in a limit cycle (``converged_`` False) the end depends on the start, and a start
        drawn per worker code made the skills depend on how the workers are named.

    Attributes
    ----------
    skills_ : Series, worker -> s in [-1/(K-1), 1]
        ``s = (K p - 1) / (K - 1)``; 0 is a spammer, negative is worse than chance.
    accuracies_ : Series, worker -> implied accuracy ``p = 1/K + (K - 1)/K s``.
    weights_ : Series, worker -> vote weight ``log((K - 1) p / (1 - p))``.
    history_ : list of float
        Relative change of the rank-one iterate per round.

    Notes
    -----
    Gold labels are not used to estimate skills (the method is unsupervised); gold tasks are
    clamped in the output.
    """

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), has_worker_model=True)

    def __init__(
        self,
        n_iter: int = 100,
        tol: float = 1e-6,
        trim: float = 0.1,
        random_state: int | None = 0,
    ) -> None:
        self.n_iter = n_iter
        self.tol = tol
        self.trim = trim
        self.random_state = random_state

    # ------------------------------------------------------------------ fit
    def _fit(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None) -> np.ndarray:
        if self.n_iter < 0:
            raise ValueError(f"n_iter must be >= 0, got {self.n_iter}")
        if not 0 <= self.trim < 0.5:
            raise ValueError(f"trim must lie in [0, 0.5), got {self.trim}")
        k, n, m = data.n_classes, data.n_tasks, data.n_workers
        n_answers = data.labels_per_worker().astype(np.float64)
        if k == 1:
            s = np.ones(m)
        else:
            s = self._skills(data, k, n, m, n_answers)
        self._set_worker_model(s, k, data.workers)
        return self._predict_proba_codes(data)

    def _skills(self, data, k, n, m, n_answers) -> np.ndarray:
        indptr, indices, agree, cnt = pair_agreements(data)
        c = (k * agree / cnt - 1.0) / (k - 1)
        msr = _MSRFilter(indptr, indices, c, cnt, self.trim)
        connected = msr.deg > 0

        u = np.ones(m)
        v = np.ones(m)
        u[~connected] = 0.0
        v[~connected] = 0.0
        self.converged_ = False
        best = np.inf
        since_best = 0
        recent: list[tuple[np.ndarray, np.ndarray]] = []
        for it in range(self.n_iter):
            u_prev, v_prev = u, v
            v = msr.step(u, v)
            u = msr.step(v, u)
            change = _rank_one_change(u, v, u_prev, v_prev)
            self.history_.append(change)
            self._progress_step(change)
            self.n_iter_ = it + 1
            if change < self.tol:
                self.converged_ = True
                break
            # the filter is discontinuous and can settle into a small limit cycle: stop when
            # the change has not improved for _PATIENCE rounds and average over that window
            recent = (recent + [(u, v)])[-_PATIENCE:]
            if change < best:
                best, since_best = change, 0
            else:
                since_best += 1
                if since_best >= _PATIENCE:
                    u = np.mean([r[0] for r in recent], axis=0)
                    v = np.mean([r[1] for r in recent], axis=0)
                    break

        nu, nv = np.linalg.norm(u), np.linalg.norm(v)
        if nu > 0 and nv > 0:
            scale = np.sqrt(nu / nv)
            s = 0.5 * (u / scale + v * scale)
        else:
            s = np.zeros(m)
        # global sign: most workers are better than chance (the reference code's rule; a
        # worker count, so a few prolific colluders cannot outvote the crowd); exact ties
        # fall back to the answer-weighted mean
        vote = np.sign(s[connected]).sum()
        if vote < 0 or (vote == 0 and np.dot(n_answers[connected], s[connected]) < 0):
            s = -s
        eps = 1.0 / np.sqrt(max(n, 4))
        s = np.clip(s, -1.0 / (k - 1) + eps, 1.0 - eps)
        if connected.any():
            fill = np.dot(n_answers[connected], s[connected]) / max(n_answers[connected].sum(), 1.0)
        else:  # nobody shares a task: no information on skills, fall back to majority vote
            fill = 0.5
        s[~connected] = np.clip(fill, -1.0 / (k - 1) + eps, 1.0 - eps)
        return s

    def _set_worker_model(self, s: np.ndarray, k: int, workers: pd.Index) -> None:
        self.skills_ = pd.Series(s, index=workers, name="skill")
        if k > 1:
            p = 1.0 / k + (k - 1.0) / k * s
            w = np.log((k - 1) * p / (1.0 - p))
        else:
            p = np.ones_like(s)
            w = s.copy()  # log-odds undefined for one class: weight by s itself
        self.accuracies_ = pd.Series(p, index=workers, name="accuracy")
        self.weights_ = pd.Series(w, index=workers, name="weight")

    # ------------------------------------------------------------- predict
    def _predict_proba_codes(self, data: CrowdLabels) -> np.ndarray:
        return softmax(weighted_votes(data, self.weights_.to_numpy()), axis=1)


# ---------------------------------------------------------------------------- helpers
class _MSRFilter:
    """The M-MSR update on a symmetric sparse pattern (CSR arrays), with a warm-started sort.

    Each half step needs the ratios of every row in sorted order.  Sorting on the key
    ``row + squash(ratio)`` keeps rows contiguous, so an entry's rank inside its row is just
    its position minus the row start; and since ratios reorder little from one step to the
    next, the previous permutation is reused as the starting point of an adaptive (Timsort)
    sort, which then costs close to one pass.  Equal ratios are ordered by their weight, so
    which of them the filter trims is read from the answers, not from the worker codes.
    """

    def __init__(self, indptr, indices, c, cnt, trim):
        self.indptr, self.indices, self.c, self.cnt = indptr, indices, c, cnt
        self.cnt_c = cnt * c
        m = len(indptr) - 1
        self.size = m
        self.deg = np.diff(indptr)
        self.row = np.repeat(np.arange(m, dtype=np.int64), self.deg)
        self.n_drop = np.floor(trim * self.deg).astype(np.int64)
        self.filtering = bool(self.n_drop.any())
        if self.filtering:
            self.order = np.arange(len(indices), dtype=np.int64)
            self.rows = np.arange(m, dtype=np.float64)

    @staticmethod
    def _squash(x: np.ndarray) -> np.ndarray:
        """A strictly increasing map of the reals into (0, 1)."""
        return 0.5 + 0.4999999 * x / (1.0 + np.abs(x))

    def step(self, u: np.ndarray, v_old: np.ndarray) -> np.ndarray:
        """New v: per row j, weighted mean of ``C_ij / u_i`` after the MSR filter."""
        row, size = self.row, self.size
        ui = u[self.indices]
        w = self.cnt * ui * ui  # weight n_ij u_i^2 of the ratio C_ij / u_i
        wr = self.cnt_c * ui  # = weight * ratio
        if self.filtering:
            ratio = np.divide(self.c, ui, out=np.zeros_like(ui), where=ui != 0)
            key = self._squash(ratio)
            key += row
            key = key[self.order]
            sub = np.argsort(key, kind="stable")  # nearly sorted already: ~linear
            self.order = self.order[sub]
            key = key[sub]
            tied = key[1:] == key[:-1]
            if tied.any():
                # equal ratios (e.g. every C_ij = 0) with different weights: order them by
                # weight, so the trimmed ones follow the answers, not the order of the codes
                at = np.flatnonzero(np.r_[tied, False] | np.r_[False, tied])
                self.order[at] = self.order[at][np.lexsort((w[self.order[at]], key[at]))]
            # ratios below / above the current value v_j: prefix / suffix of the sorted row
            a_key = self.rows + self._squash(v_old)
            below = np.searchsorted(key, a_key, side="left") - self.indptr[:-1]
            above = self.indptr[1:] - np.searchsorted(key, a_key, side="right")
            # the kept ratios of row j are the sorted positions [start_j, end_j)
            start = self.indptr[:-1] + np.minimum(self.n_drop, below)
            end = self.indptr[1:] - np.minimum(self.n_drop, above)
            num = _segment_sums(wr[self.order], start, end)
            den = _segment_sums(w[self.order], start, end)
        else:
            num = np.bincount(row, weights=wr, minlength=size)
            den = np.bincount(row, weights=w, minlength=size)
        return np.where(den > _TINY, num / np.where(den > _TINY, den, 1.0), v_old)


def _segment_sums(values: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """``values[start[j]:end[j]].sum()`` for every j (0 for empty segments)."""
    padded = np.append(values, 0.0)  # reduceat needs every index < len
    bounds = np.empty(2 * len(start), dtype=np.int64)
    bounds[0::2] = start
    bounds[1::2] = end
    sums = np.add.reduceat(padded, bounds)[0::2]
    return np.where(end > start, sums, 0.0)


def _rank_one_change(u, v, u_prev, v_prev) -> float:
    """``||u v^T - u' v'^T||_F / ||u v^T||_F`` without forming either matrix."""
    nn = np.dot(u, u) * np.dot(v, v)
    pp = np.dot(u_prev, u_prev) * np.dot(v_prev, v_prev)
    cross = np.dot(u, u_prev) * np.dot(v, v_prev)
    diff = max(nn + pp - 2.0 * cross, 0.0)
    return float(np.sqrt(diff / nn)) if nn > 0 else 0.0
