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
4. Adversary (collusion) score = weighted relative residual of a worker's blocks
   ``sum_l n_ml ||R_ml - U_m U_l^T||^2 / sum_l n_ml ||R_ml||^2``; flagged when its robust
   z-score (median / MAD over workers) exceeds ``z``.  Workers answering systematically below
   chance (a permuted confusion, also "adversarial") are reported separately: agreement with
   the leave-one-out majority significantly below chance level.

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

from ..core.data import CrowdLabels, as_crowd_labels

__all__ = ["detect_spammers", "detect_adversaries", "second_order_model", "pair_excess_z"]

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
        out[name] = np.full(n, np.nan) if kind == "f" else np.zeros(n, dtype=bool)
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
    """

    workers: np.ndarray
    factors: np.ndarray
    pair_m: np.ndarray
    pair_l: np.ndarray
    shared: np.ndarray
    blocks: np.ndarray

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
    return pm, pl, shared, centred


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
    pm, pl, shared, blocks = _pair_blocks(data, workers, min_shared)
    n_w = len(workers)
    if len(pm) == 0 or k < 2:
        return SecondOrderModel(workers, np.zeros((n_w, k, r)), pm, pl, shared, blocks)
    # initialisation: top-r eigenvectors of the weighted, zero-filled block matrix
    rows = (pm[:, None, None] * k + np.arange(k)[None, :, None]) + 0 * np.arange(k)[None, None, :]
    cols = (pl[:, None, None] * k + np.arange(k)[None, None, :]) + 0 * np.arange(k)[None, :, None]
    big = sp.csr_matrix((blocks.ravel(), (rows.ravel(), cols.ravel())), shape=(n_w * k, n_w * k))
    dense_ok = n_w * k <= 3000
    sym = (big + big.T) * 0.5
    if dense_ok:
        vals, vecs = np.linalg.eigh(sym.toarray())
        idx = np.argsort(-vals)[:r]
    else:
        from scipy.sparse.linalg import eigsh

        v0 = np.ones(n_w * k)  # deterministic start vector: same input, same output
        vals, vecs = eigsh(sym, k=min(r, n_w * k - 1), which="LA", v0=v0)
        idx = np.argsort(-vals)[:r]
    u = vecs[:, idx] * np.sqrt(np.maximum(vals[idx], 0.0))[None, :]
    if u.shape[1] < r:
        u = np.hstack([u, np.zeros((u.shape[0], r - u.shape[1]))])
    u = u.reshape(n_w, k, r)
    u = _als(u, blocks, pm, pl, shared, n_iter)
    for _ in range(robust_passes):
        # refit without the pairs that agree far more than the model allows (copiers), so a
        # clique of colluders cannot bend the honest low-rank structure towards itself
        z = pair_excess_z(u, blocks, pm, pl, shared)
        u = _als(u, blocks, pm, pl, np.where(z > z_exclude, 0.0, shared), n_iter)
    return SecondOrderModel(workers, u, pm, pl, shared, blocks)


def _als(u, blocks, pm, pl, w, n_iter):
    """Weighted ALS sweeps: ``U_m = (sum_l w R_ml U_l) (sum_l w U_l^T U_l)^-1`` for all m."""
    n_w, k, r = u.shape
    ridge = 1e-9 * max(1.0, float(w.max(initial=0.0)))
    for _ in range(n_iter):
        num = np.zeros((n_w, k, r))
        np.add.at(num, pm, w[:, None, None] * np.einsum("pkj,pjr->pkr", blocks, u[pl]))
        gram = np.einsum("lkr,lks->lrs", u, u)
        den = np.zeros((n_w, r, r))
        np.add.at(den, pm, w[:, None, None] * gram[pl])
        den += ridge * np.eye(r)[None]
        u = np.linalg.solve(den, num.transpose(0, 2, 1)).transpose(0, 2, 1)
    return u


def pair_excess_z(u, blocks, pm, pl, shared) -> np.ndarray:
    """Robust z-score of each pair's excess agreement ``trace(R_ml - U_m U_l^T) sqrt(n_ml)``."""
    fit = np.einsum("pkr,pjr->pkj", u[pm], u[pl])
    excess = np.einsum("pkk->p", blocks - fit) * np.sqrt(shared)
    med = np.median(excess)
    mad = 1.4826 * np.median(np.abs(excess - med))
    scale = mad if mad > 0 else (np.std(excess) or 1.0)
    return (excess - med) / scale


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
    z: float = 3.5,
    alpha: float = 0.01,
    min_shared: int = 10,
    max_workers: int = 500,
) -> pd.DataFrame:
    """Flag colluding workers and workers answering systematically below chance.

    Parameters
    ----------
    labels : CrowdLabels or DataFrame
    z : float
        Robust z-score (``(x - median) / (1.4826 MAD)``) of the relative residual above which a
        worker is flagged as ``colluding``.
    alpha : float
        Level of the one-sided binomial test of agreement with the leave-one-out majority
        below ``1/K`` (flag ``below_chance``).

    Returns
    -------
    DataFrame indexed by worker: ``residual`` (relative residual of its blocks under the
    honest rank-(K-1) model; NaN outside the factorised set), ``z``, ``colluding``,
    ``agreement``, ``below_chance``, ``adversary`` (either flag), ``n_labels``.
    """
    data = as_crowd_labels(labels)
    k = data.n_classes
    skipped = _too_many_classes(
        data, {"residual": "f", "z": "f", "colluding": "b", "agreement": "f", "below_chance": "b", "adversary": "b"}
    )
    if skipped is not None:
        return skipped
    model = second_order_model(data, min_shared=min_shared, max_workers=max_workers)
    res = model.residuals()
    total = (model.blocks**2).sum(axis=(1, 2))
    n_w = len(model.workers)
    num = np.bincount(model.pair_m, weights=model.shared * res, minlength=n_w)
    den = np.bincount(model.pair_m, weights=model.shared * total, minlength=n_w)
    rel = np.full(data.n_workers, np.nan)
    has = den > 0
    rel[model.workers[has]] = num[has] / den[has]
    fin = np.isfinite(rel)
    zs = np.full(data.n_workers, np.nan)
    if fin.sum() >= 3:
        med = np.median(rel[fin])
        mad = 1.4826 * np.median(np.abs(rel[fin] - med))
        scale = mad if mad > 0 else (np.std(rel[fin]) or 1.0)
        zs[fin] = (rel[fin] - med) / scale
    colluding = np.nan_to_num(zs, nan=-np.inf) > z
    _, agree, n_cmp = _dependence_test(data, _loo_majority(data))
    p_low = stats.binom.cdf(np.round(agree * n_cmp), np.maximum(n_cmp, 1).astype(int), 1.0 / max(k, 2))
    below = (n_cmp >= 5) & (p_low < alpha)
    return pd.DataFrame(
        {
            "residual": rel,
            "z": zs,
            "colluding": colluding,
            "agreement": agree,
            "below_chance": below,
            "adversary": colluding | below,
            "n_labels": data.labels_per_worker(),
        },
        index=pd.Index(data.workers, name="worker"),
    )
