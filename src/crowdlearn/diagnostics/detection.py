"""Spammer and adversary detection from second-order statistics of the answers.

Model (Traganitis & Giannakis, "Unsupervised ensemble classification with sequential and
networked data" / "Detecting adversaries in crowdsourcing", ICASSP 2021; the tutorial
"Learning from crowdsourced noisy labels: a signal processing perspective", section on
spammers and adversaries).  Write ``x_m`` for the one-hot answer of worker ``m`` on a task,
``A_m = E[x_m | y]`` its (K x K, column = true class) confusion and ``d`` the class prior.
For two workers answering independently given the truth, the centred cross-covariance is::

    R_{ml} = E[x_m x_l^T] - E[x_m] E[x_l]^T = A_m (D - d d^T) A_l^T = U_m U_l^T,
    U_m = A_m (D - d d^T)^{1/2}                      (K x K, rank <= K - 1)

so the block matrix of all ``R_{ml}`` (its diagonal blocks unobserved) is *low rank plus
block diagonal*.  A spammer answers independently of the truth, ``A_m = a 1^T``, hence
``A_m (D - d d^T) = a (d^T - d^T) = 0``: all its blocks vanish and its factor rows are
zero.  Colluding
adversaries copy one another, so their mutual blocks carry covariance that the rank-(K-1)
model of the honest majority cannot express: their residual is large.

What is computed
----------------
1. All pairwise co-occurrence counts from one sparse product ``A^T A`` of the
   (tasks x workers*K) incidence (only the ``max_workers`` most active workers; pairs sharing
   fewer than ``min_shared`` tasks are treated as missing), centred with the means of the two
   workers *on their shared tasks*.
2. ``U`` (workers*K x r, r = K - 1) by weighted alternating least squares on the observed
   off-diagonal blocks only (weights = shared tasks), started from the top eigenvectors of
   the zero-filled matrix.
3. Spammer score = Frobenius norm of ``U_m``, divided by the largest; flagged workers are the
   low cluster of a two-means split of the scores (as in the paper) *and* fail a chi-square
   test of dependence between their answers and the leave-one-out majority vote of the
   other workers on their tasks (p > ``alpha``).  The test is what keeps honest workers
   unflagged when there is no spammer at all (two-means always splits).
4. Collusion: the agreement of each pair beyond what the model explains,
   ``trace(R_ml - U_m U_l^T)``, divided by its sampling standard deviation over the pair's
   shared tasks (:func:`pair_excess_z`); both workers of a pair are flagged when it exceeds
   the Bonferroni critical value over all pairs.  Copiers agree with one another far beyond
   the model; honest workers, however weak or sparse, do not.  (A score per worker, such
   as the relative residual of all its blocks, which is also reported, has no common null
   distribution: a weak honest worker's blocks are mostly noise and its relative residual
   is near 1.)  Workers answering systematically below chance (a permuted confusion, also
   "adversarial") are reported separately: agreement with the leave-one-out majority
   significantly below chance level.

Every worker of the input appears in the output tables; workers outside the factorised set
(too few shared tasks or beyond ``max_workers``) get ``score`` NaN and are judged by the
chi-square test alone (column ``basis`` says which evidence was used).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy import stats
from scipy.sparse.csgraph import connected_components

from ..core.data import CrowdLabels, as_crowd_labels

__all__ = ["detect_spammers", "detect_adversaries", "second_order_model", "pair_excess_z", "pair_critical_z"]

#: Above this many classes the K x K blocks per worker pair (and the K x K dependence tables)
#: cost too much memory; the detectors then report every worker with basis "too many classes"
#: and flag nobody (no evidence computed is not evidence of spamming).
MAX_CLASSES = 50


def _too_many_classes(data: CrowdLabels, columns: dict) -> pd.DataFrame | None:
    if data.n_classes <= MAX_CLASSES:
        return None
    n = data.n_workers
    out = {}
    for name, kind in columns.items():
        out[name] = {"f": lambda: np.full(n, np.nan), "o": lambda: np.full(n, None, dtype=object)}.get(
            kind, lambda: np.zeros(n, dtype=bool))()
    out["n_labels"] = data.labels_per_worker()
    out["basis"] = np.full(n, "too many classes", dtype=object)
    return pd.DataFrame(out, index=pd.Index(data.workers, name="worker"))


@dataclass
class SecondOrderModel:
    """Low-rank fit of the centred worker cross-covariances (see the module docstring).

    Attributes
    ----------
    workers : ndarray of int
        Worker codes that entered the factorisation (``factors`` rows follow this order).
    factors : ndarray, shape (len(workers), K, r)
        ``U_m`` per worker.
    pair_m, pair_l : ndarray of int
        Positions (into ``workers``) of each observed ordered pair ``m != l``.
    shared : ndarray of float
        Number of shared tasks per pair.
    blocks : ndarray, shape (n_pairs, K, K)
        Centred cross-covariance estimates ``R_ml``.
    agreement : ndarray of float
        Share of the pair's shared tasks on which both gave the same answer.
    """

    workers: np.ndarray
    factors: np.ndarray
    pair_m: np.ndarray
    pair_l: np.ndarray
    shared: np.ndarray
    blocks: np.ndarray
    agreement: np.ndarray

    def residuals(self) -> np.ndarray:
        """Per-pair squared Frobenius residual ``||R_ml - U_m U_l^T||^2``."""
        fit = np.einsum("pkr,pjr->pkj", self.factors[self.pair_m], self.factors[self.pair_l])
        return ((self.blocks - fit) ** 2).sum(axis=(1, 2))


def _pair_blocks(data: CrowdLabels, workers: np.ndarray, min_shared: int):
    """Centred co-occurrence blocks of all worker pairs among ``workers`` with enough overlap."""
    k = data.n_classes
    pos = np.full(data.n_workers, -1, dtype=np.int64)
    pos[workers] = np.arange(len(workers))
    keep = pos[data.worker] >= 0
    col = pos[data.worker[keep]] * k + data.label[keep]
    inc = sp.csr_matrix(
        (np.ones(int(keep.sum())), (data.task[keep], col)),
        shape=(data.n_tasks, len(workers) * k),
    )
    cooc = (inc.T @ inc).tocoo()
    m, a = np.divmod(cooc.row.astype(np.int64), k)
    l, b = np.divmod(cooc.col.astype(np.int64), k)
    off = m != l
    m, a, l, b, v = m[off], a[off], l[off], b[off], cooc.data[off]
    n_w = len(workers)
    key = m * n_w + l
    uniq, inv = np.unique(key, return_inverse=True)
    blocks = np.zeros((len(uniq), k, k))
    np.add.at(blocks, (inv, a, b), v)
    # with repeated (task, worker) answers the block sum exceeds the shared-task count;
    # the normalisation below uses the block sum, i.e. it treats each answer pair as one draw
    shared = blocks.sum(axis=(1, 2))
    ok = shared >= min_shared
    uniq, blocks, shared = uniq[ok], blocks[ok], shared[ok]
    pm, pl = np.divmod(uniq, n_w)
    joint = blocks / shared[:, None, None]
    centred = joint - joint.sum(axis=2)[:, :, None] * joint.sum(axis=1)[:, None, :]
    return pm, pl, shared, centred, np.einsum("pkk->p", joint)


def second_order_model(
    labels: Any,
    rank: int | None = None,
    min_shared: int = 10,
    max_workers: int = 500,
    n_iter: int = 50,
    robust_passes: int = 0,
    z_exclude: float = 4.0,
) -> SecondOrderModel:
    """Fit ``R_ml ≈ U_m U_l^T`` on the observed off-diagonal blocks (weighted ALS).

    Parameters
    ----------
    labels : CrowdLabels or DataFrame
    rank : int, optional
        Rank ``r`` of the model; default ``K - 1`` (the rank of ``D - d d^T``).
    min_shared : int
        Pairs sharing fewer tasks are missing entries.
    max_workers : int
        Only the most active workers enter (the pair list grows quadratically).
    n_iter : int
        ALS sweeps.
    robust_passes : int
        Refits that give zero weight to pairs whose excess agreement has a robust z-score
        above ``z_exclude`` (see :func:`pair_excess_z`); used to find groups of copiers.
    """
    data = as_crowd_labels(labels)
    k = data.n_classes
    r = max(1, k - 1) if rank is None else int(rank)
    per_worker = data.labels_per_worker()
    order = np.lexsort((np.arange(data.n_workers), -per_worker))
    workers = np.sort(order[: max(0, int(max_workers))])
    pm, pl, shared, blocks, agreement = _pair_blocks(data, workers, min_shared)
    n_w = len(workers)
    model = SecondOrderModel(workers, np.zeros((n_w, k, r)), pm, pl, shared, blocks, agreement)
    if len(pm) == 0 or k < 2:
        return model
    model.factors = _als(_initial_factors(blocks, pm, pl, n_w, k, r), blocks, pm, pl, shared, n_iter)
    for _ in range(robust_passes):
        # refit without the pairs that agree far more than the model allows (copiers), so a
        # clique of colluders cannot bend the honest low-rank structure towards itself
        z = pair_excess_z(model)
        model.factors = _als(model.factors, blocks, pm, pl, np.where(z > z_exclude, 0.0, shared), n_iter)
    return model


#: fractions of a simultaneous ALS sweep's move tried in turn (see :func:`_als`)
_STEP_SIZES = (1.0, 0.5, 0.25, 0.125, 0.0625)


def _initial_factors(blocks, pm, pl, n_w, k, r):
    """Top-``r`` eigenvectors of the zero-filled block matrix, one connected component of the
    pair graph at a time.

    Designs where workers answer in separate batches (each batch of tasks seen by its own
    group of workers) have one component per batch; the leading eigenvectors of the whole
    matrix then live in one or two components and leave the others at zero, from where the
    simultaneous ALS updates amplify rounding noise instead of fitting the blocks.
    """
    u = np.zeros((n_w, k, r))
    graph = sp.csr_matrix((np.ones(len(pm)), (pm, pl)), shape=(n_w, n_w))
    n_comp, comp = connected_components(graph, directed=False)
    sizes = np.bincount(comp, minlength=n_comp)
    pair_comp = comp[pm]
    order = np.argsort(pair_comp, kind="stable")
    starts = np.searchsorted(pair_comp[order], np.arange(n_comp + 1))
    local = np.zeros(n_w, dtype=np.int64)
    for c in np.flatnonzero(sizes >= 2):
        members = np.flatnonzero(comp == c)
        local[members] = np.arange(len(members))
        sel = order[starts[c]:starts[c + 1]]
        n_c = len(members) * k
        rows = np.broadcast_to((local[pm[sel]] * k)[:, None, None] + np.arange(k)[None, :, None], blocks[sel].shape)
        cols = np.broadcast_to((local[pl[sel]] * k)[:, None, None] + np.arange(k)[None, None, :], blocks[sel].shape)
        big = sp.csr_matrix((blocks[sel].ravel(), (rows.ravel(), cols.ravel())), shape=(n_c, n_c))
        sym = (big + big.T) * 0.5
        if n_c <= 3000:
            vals, vecs = np.linalg.eigh(sym.toarray())
        else:
            from scipy.sparse.linalg import eigsh

            v0 = np.ones(n_c)  # deterministic start vector: same input, same output
            vals, vecs = eigsh(sym, k=min(r, n_c - 1), which="LA", v0=v0)
        idx = np.argsort(-vals)[:r]
        part = vecs[:, idx] * np.sqrt(np.maximum(vals[idx], 0.0))[None, :]
        u[members, :, : part.shape[1]] = part.reshape(len(members), k, part.shape[1])
    return u


def _als(u, blocks, pm, pl, w, n_iter):
    """Weighted ALS sweeps: ``U_m = (sum_l w R_ml U_l) (sum_l w U_l^T U_l)^-1`` for all m.

    All workers are updated at once (one vectorised sweep), which unlike one-at-a-time
    updates does not always lower the weighted residual: each sweep's move is shortened
    (halved, a few times at most) until it does, and the sweeps stop when none does.
    """
    n_w, k, r = u.shape
    ridge = 1e-9 * max(1.0, float(w.max(initial=0.0)))

    def loss(f):
        fit = np.einsum("pkr,pjr->pkj", f[pm], f[pl])
        return float(np.sum(w * ((blocks - fit) ** 2).sum(axis=(1, 2))))

    best = loss(u)
    for _ in range(n_iter):
        num = np.zeros((n_w, k, r))
        np.add.at(num, pm, w[:, None, None] * np.einsum("pkj,pjr->pkr", blocks, u[pl]))
        gram = np.einsum("lkr,lks->lrs", u, u)
        den = np.zeros((n_w, r, r))
        np.add.at(den, pm, w[:, None, None] * gram[pl])
        den += ridge * np.eye(r)[None]
        step = np.linalg.solve(den, num.transpose(0, 2, 1)).transpose(0, 2, 1) - u
        for t in _STEP_SIZES:
            value = loss(u + t * step)
            if value <= best:
                break
        else:
            break  # no step along the sweep's direction lowers the residual: converged
        u, best = u + t * step, value
    return u


def pair_excess_z(model: SecondOrderModel) -> np.ndarray:
    """Standardised excess agreement of every pair beyond the honest model.

    A pair's agreement rate under the rank-``r`` model is
    ``a_model = a_obs - e_ml`` with ``e_ml = trace(R_ml - U_m U_l^T)``, the agreement that the
    model does not explain.  Over ``n_ml`` shared tasks the observed rate has sampling
    variance about ``a (1 - a) / n_ml``; the larger of the model's and the observed rate's
    variance is used (the model's rate is only an estimate, and near 0 or 1 its variance
    would make any small excess look significant), plus ``1 / n_ml^2``, so that
    ``t_ml = e_ml / sd_ml`` is about standard normal for conditionally independent workers.
    Real crowds deviate from the model in ways that raise the spread of every pair (task
    difficulty, for instance), so the ``t_ml`` are then centred on their median and divided
    by their robust spread (1.4826 MAD) when it exceeds 1; a spread below 1 is sampling
    discreteness, not evidence, and is left at 1.

    Returns the z-score of each ordered pair of ``model`` (``(m, l)`` and ``(l, m)`` agree).
    """
    if len(model.pair_m) == 0:
        return np.zeros(0)
    fit = np.einsum("pkr,pjr->pkj", model.factors[model.pair_m], model.factors[model.pair_l])
    excess = np.einsum("pkk->p", model.blocks - fit)
    observed = np.clip(model.agreement, 0.0, 1.0)
    expected = np.clip(observed - excess, 0.0, 1.0)
    var = np.maximum(expected * (1.0 - expected), observed * (1.0 - observed)) + 1.0 / model.shared
    t = excess * np.sqrt(model.shared / var)
    med = np.median(t)
    scale = max(1.0, 1.4826 * float(np.median(np.abs(t - med))))
    return (t - med) / scale


def pair_critical_z(model: SecondOrderModel, alpha: float) -> float:
    """One-sided normal critical value of :func:`pair_excess_z` at level ``alpha`` with
    Bonferroni's correction over the model's unordered pairs (each tested once)."""
    n_pairs = max(1, int(np.sum(model.pair_m < model.pair_l)))
    return float(stats.norm.isf(alpha / n_pairs))


def _loo_majority(data: CrowdLabels) -> np.ndarray:
    """Per answer: the majority class of the *other* answers on its task (-1 if none).

    Tied majorities and single-answer tasks give -1 (not compared): a tie rule by class code
    would make the test depend on how the classes happen to be numbered.
    """
    votes = data.vote_counts().astype(np.float64)
    others = votes[data.task].copy()
    others[np.arange(data.n_labels), data.label] -= 1.0
    out = np.argmax(others, axis=1)
    top = others.max(axis=1)
    tied = (others == top[:, None]).sum(axis=1) > 1
    out[(top <= 0) | tied] = -1
    return out


def _dependence_test(data: CrowdLabels, loo: np.ndarray):
    """Test of independence: worker answer vs leave-one-out majority.

    Two tests of the same null hypothesis (the worker's answers are independent of the
    others' majority), combined by Bonferroni (twice the smaller p-value):

    - Pearson's chi-square on the worker's ``K x K`` table: it sees any dependence (a worker
      who systematically swaps two classes carries information too), but with many classes
      and a few dozen answers its ``(K-1)^2`` degrees of freedom leave it almost no power;
    - agreement above chance: the observed share of answers equal to the majority,
      ``p_o``, against ``p_e = sum_k r_k c_k`` of the table's margins, with the variance of
      ``p_o`` under independence of Fleiss, Cohen & Everitt (1969, the null variance of
      Cohen's kappa), one-sided.  One degree of freedom: a worker who agrees with the
      crowd more often than chance is not a spammer, however many classes there are.

    Returns per worker: p-value (NaN when the table is too small), agreement rate with the
    leave-one-out majority, number of compared answers.
    """
    k, n_w = data.n_classes, data.n_workers
    ok = loo >= 0
    table = np.zeros((n_w, k, k))
    np.add.at(table, (data.worker[ok], data.label[ok], loo[ok]), 1.0)
    n = table.sum(axis=(1, 2))
    p = np.full(n_w, np.nan)
    for w in np.flatnonzero(n >= 5):
        t = table[w]
        t = t[t.sum(axis=1) > 0][:, t.sum(axis=0) > 0]
        if t.shape[0] < 2 or t.shape[1] < 2:
            continue  # one answer class only: dependence cannot be tested
        p_chi2 = stats.chi2_contingency(t, correction=False)[1]
        p[w] = min(1.0, 2.0 * min(p_chi2, _agreement_p_value(table[w])))
    agree = np.einsum("wkk->w", table) / np.maximum(n, 1.0)
    return p, agree, n


def _agreement_p_value(table: np.ndarray) -> float:
    """One-sided p-value of "more agreement than the margins give by chance" for a square
    table (answers x majority); see :func:`_dependence_test`."""
    n = table.sum()
    rows, cols = table.sum(axis=1) / n, table.sum(axis=0) / n
    p_o, p_e = np.trace(table) / n, float(rows @ cols)
    var = (p_e + p_e**2 - float(np.sum(rows * cols * (rows + cols)))) / n
    if var <= 0:
        return 1.0 if p_o <= p_e else 0.0
    return float(stats.norm.sf((p_o - p_e) / np.sqrt(var)))


def _two_means_low(scores: np.ndarray) -> np.ndarray:
    """Boolean mask of the lower cluster of the optimal 1-D two-means split."""
    finite = np.flatnonzero(np.isfinite(scores))
    low = np.zeros(len(scores), dtype=bool)
    if len(finite) < 2:
        return low
    s = scores[finite]
    order = np.argsort(s, kind="stable")
    ss = s[order]
    csum, csq = np.cumsum(ss), np.cumsum(ss**2)
    n = len(ss)
    best, cut = np.inf, 0
    for i in range(1, n):  # split after position i-1: within-cluster sum of squares
        left = csq[i - 1] - csum[i - 1] ** 2 / i
        right = (csq[-1] - csq[i - 1]) - (csum[-1] - csum[i - 1]) ** 2 / (n - i)
        if left + right < best:
            best, cut = left + right, i
    low[finite[order[:cut]]] = True
    return low


def detect_spammers(
    labels: Any,
    alpha: float = 0.01,
    min_answers: int = 20,
    min_shared: int = 10,
    max_workers: int = 500,
) -> pd.DataFrame:
    """Flag workers whose answers carry no information about the truth.

    Parameters
    ----------
    labels : CrowdLabels or DataFrame (task, worker, label)
    alpha : float
        Significance level of the dependence test: a worker is flagged only if independence
        of its answers from the others' majority is *not* rejected at this level.
    min_answers : int
        A worker needs at least this many answers on tasks with a strict majority among the
        other answers to be flagged: with fewer, "not significantly dependent" only means
        "too little data", not "spammer".
    min_shared, max_workers : int
        See :func:`second_order_model`.

    Returns
    -------
    DataFrame indexed by worker with columns ``score`` (norm of the low-rank factor rows,
    divided by the largest; NaN outside the factorised set), ``low_cluster`` (two-means),
    ``p_value`` (chi-square dependence test), ``agreement`` (with the leave-one-out
    majority), ``n_labels``, ``basis`` (``"factor+test"``, ``"test"`` or
    ``"too few answers"``; ``"too many classes"`` when K > ``MAX_CLASSES``, where nothing is
    computed and nobody is flagged) and ``spammer`` (the flag; ``flag`` is the same column).

    Notes
    -----
    A worker with fewer than ``min_answers`` comparable answers is never flagged (``basis``
    ``"too few answers"``): there is no evidence either way.
    """
    data = as_crowd_labels(labels)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    skipped = _too_many_classes(
        data, {"score": "f", "low_cluster": "b", "p_value": "f", "agreement": "f", "spammer": "b", "flag": "b"}
    )
    if skipped is not None:
        return skipped
    model = second_order_model(data, min_shared=min_shared, max_workers=max_workers)
    norms = np.linalg.norm(model.factors.reshape(len(model.workers), -1), axis=1)
    score = np.full(data.n_workers, np.nan)
    in_pairs = np.zeros(data.n_workers, dtype=bool)
    in_pairs[model.workers[np.unique(model.pair_m)]] = True
    top = norms.max() if len(norms) else 0.0
    if top > 0:
        score[model.workers] = norms / top
    score[~in_pairs] = np.nan
    low = _two_means_low(score)
    p, agree, n_cmp = _dependence_test(data, _loo_majority(data))
    independent = np.isfinite(p) & (p > alpha)
    basis = np.where(np.isfinite(score), "factor+test", "test")
    enough = np.isfinite(p) & (n_cmp >= min_answers)
    independent &= enough
    basis = np.where(enough, basis, "too few answers")
    flag = np.where(np.isfinite(score), low & independent, independent)
    return pd.DataFrame(
        {
            "score": score,
            "low_cluster": low,
            "p_value": p,
            "agreement": agree,
            "n_labels": data.labels_per_worker(),
            "basis": basis,
            "spammer": flag.astype(bool),
            "flag": flag.astype(bool),
        },
        index=pd.Index(data.workers, name="worker"),
    )


def detect_adversaries(
    labels: Any,
    z: float | None = None,
    alpha: float = 0.01,
    min_shared: int = 10,
    max_workers: int = 500,
) -> pd.DataFrame:
    """Flag colluding workers and workers answering systematically below chance.

    Parameters
    ----------
    labels : CrowdLabels or DataFrame
    z : float, optional
        Threshold on a pair's standardised excess agreement (:func:`pair_excess_z`) above
        which both workers of the pair are flagged ``colluding``.  Default: the Bonferroni
        critical value at level ``alpha`` over all pairs tested (:func:`pair_critical_z`),
        so that a crowd of conditionally independent workers has all its workers unflagged
        with probability about ``1 - alpha``.
    alpha : float
        Level of both tests: the collusion test above, and the one-sided binomial test of
        agreement with the leave-one-out majority below ``1/K`` (flag ``below_chance``).

    Returns
    -------
    DataFrame indexed by worker: ``residual`` (relative residual of its blocks under the
    honest rank-(K-1) model, ``sum_l n_ml ||R_ml - U_m U_l^T||^2 / sum_l n_ml ||R_ml||^2``;
    NaN outside the factorised set), ``z`` (its largest pair excess agreement; NaN without a
    pair), ``partner`` (the worker of that pair), ``colluding``, ``agreement``,
    ``below_chance``, ``adversary`` (either flag), ``n_labels``; ``attrs["critical_z"]``: the
    threshold the pair z-scores were compared with.
    """
    data = as_crowd_labels(labels)
    k = data.n_classes
    skipped = _too_many_classes(
        data, {"residual": "f", "z": "f", "partner": "o", "colluding": "b", "agreement": "f",
               "below_chance": "b", "adversary": "b"}
    )
    if skipped is not None:
        return skipped
    # one refit without the most excessive pairs: a clique of copiers would otherwise pull
    # the honest model towards itself and hide part of its own excess
    model = second_order_model(data, min_shared=min_shared, max_workers=max_workers, robust_passes=1)
    res = model.residuals()
    total = (model.blocks**2).sum(axis=(1, 2))
    n_w = len(model.workers)
    num = np.bincount(model.pair_m, weights=model.shared * res, minlength=n_w)
    den = np.bincount(model.pair_m, weights=model.shared * total, minlength=n_w)
    rel = np.full(data.n_workers, np.nan)
    has = den > 0
    rel[model.workers[has]] = num[has] / den[has]
    pair_z = pair_excess_z(model)
    zs = np.full(data.n_workers, np.nan)
    partner = np.full(data.n_workers, None, dtype=object)
    if len(pair_z):
        # the largest pair z of each worker (pairs sorted by z, the last one per worker wins)
        order = np.argsort(pair_z, kind="stable")
        best = np.full(n_w, -1)
        best[model.pair_m[order]] = order
        own = best >= 0
        zs[model.workers[own]] = pair_z[best[own]]
        partner[model.workers[own]] = data.workers.take(model.workers[model.pair_l[best[own]]]).to_numpy()
    crit = pair_critical_z(model, alpha) if z is None else float(z)
    colluding = np.nan_to_num(zs, nan=-np.inf) > crit
    _, agree, n_cmp = _dependence_test(data, _loo_majority(data))
    p_low = stats.binom.cdf(np.round(agree * n_cmp), np.maximum(n_cmp, 1).astype(int), 1.0 / max(k, 2))
    below = (n_cmp >= 5) & (p_low < alpha)
    table = pd.DataFrame(
        {
            "residual": rel,
            "z": zs,
            "partner": partner,
            "colluding": colluding,
            "agreement": agree,
            "below_chance": below,
            "adversary": colluding | below,
            "n_labels": data.labels_per_worker(),
        },
        index=pd.Index(data.workers, name="worker"),
    )
    table.attrs["critical_z"] = crit
    return table
