"""Statistics of crowd answers shared by the aggregators, learners and diagnostics.

Everything here is a function of a :class:`~crowdlearn.core.data.CrowdLabels` (answers
``(task n, worker w, label l)``) and of arrays of posteriors or parameters; no estimator
state.  The conventions are the library's:

* task posteriors ``post`` are (n_tasks, K) rows summing to 1;
* confusion matrices are ``conf[w, true, answered]`` (rows sum to 1);
* the E-step's log table is ``log_table[w * K + answered, true]`` (the layout of
  :func:`crowdlearn.core.kernels.estep`);
* gold labels are a class code per task, ``-1`` where unknown.

Contents: vote counts and fractions (majority vote), tie splitting and agreement with a
consensus; the gold clamp; soft confusion counts and the Dawid-Skene E-step sum (Dawid &
Skene, "Maximum likelihood estimation of observer error-rates using the EM algorithm",
JRSS-C 28(1), 1979); expected logs under Dirichlet and Beta distributions (the
variational updates of Bayesian Dawid-Skene, MACE and mean-field one-coin models); Gauss-Jacobi
quadrature for integrals against a Beta density (belief propagation over one-coin workers).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import betaln, digamma, gammaln, roots_jacobi
from scipy.special import logsumexp as _scipy_logsumexp

from .data import CrowdLabels

__all__ = [
    "TINY",
    "id_hashes",
    "keyed_uniforms",
    "class_sums",
    "weighted_votes",
    "vote_fractions",
    "split_ties",
    "agreement_with",
    "clamp_to_gold",
    "logsumexp",
    "soft_confusion_counts",
    "soft_confusions",
    "answer_log_sum",
    "confusions_from_log_table",
    "one_coin_confusions",
    "expected_skills",
    "dirichlet_expected_log",
    "dirichlet_kl",
    "beta_kl",
    "beta_expected_logs",
    "gauss_jacobi",
    "argmax_random_ties",
]

#: floor applied before a logarithm of a probability (keeps ``log(0)`` finite)
TINY = 1e-300


# ==================================================================== votes
def logsumexp(a: np.ndarray, axis: int = -1, keepdims: bool = False) -> np.ndarray:
    """``scipy.special.logsumexp(a, axis=axis, keepdims=keepdims)`` of a real array, faster.

    The same arithmetic as SciPy's (the row maximum and its ties are taken out of the sum:
    ``log1p(sum exp(a - max) / ties) + log(ties) + max``), so the results are the same to
    the bit, in a few whole-array passes instead of SciPy's many (it also exponentiates
    every entry a second time for rows whose result would not be finite): at tens of
    classes and 10^5 rows SciPy's version dominated the minimax M-step.  Rows whose maximum
    is not finite (all ``-inf``, ``inf``, NaN), other dtypes, empty arrays and tuple axes
    go to SciPy.
    """
    a = np.asarray(a)
    if a.dtype != np.float64 or a.size == 0 or not isinstance(axis, (int, np.integer)):
        return _scipy_logsumexp(a, axis=axis, keepdims=keepdims)
    a_max = a.max(axis=axis, keepdims=True)
    if not np.isfinite(a_max).all():
        return _scipy_logsumexp(a, axis=axis, keepdims=keepdims)
    top = a == a_max
    ties = top.sum(axis=axis, keepdims=True, dtype=np.float64)
    e = np.exp(a - a_max)
    e[top] = 0.0
    s = e.sum(axis=axis, keepdims=True)
    s /= ties  # 0 stays 0 (ties >= 1)
    out = np.log1p(s, out=s)
    out += np.log(ties)
    out += a_max
    return out if keepdims else np.squeeze(out, axis=axis)


def class_sums(data: CrowdLabels, answer_weights: np.ndarray | None = None) -> np.ndarray:
    """(n_tasks, n_classes) sums of per-answer weights by answered class (counts without weights).

    ``S[n, j] = sum_{answers i of n, label_i = j} v_i``: the score of every vote-type rule and
    of one-coin messages; each cell sums its answers in answer order.
    """
    k = data.n_classes
    cell = data.task.astype(np.int64) * k + data.label
    flat = np.bincount(cell, weights=answer_weights, minlength=data.n_tasks * k)
    return flat.reshape(data.n_tasks, k)


def weighted_votes(data: CrowdLabels, worker_weights: np.ndarray | None = None) -> np.ndarray:
    """(n_tasks, n_classes) sums of worker weights per class (plain counts without weights)."""
    w = None if worker_weights is None else np.asarray(worker_weights, float)[data.worker]
    return class_sums(data, w).astype(np.float64)


def vote_fractions(data: CrowdLabels, worker_weights: np.ndarray | None = None) -> np.ndarray:
    """Share of (weighted) votes per class; uniform where a task has no vote weight.

    This is the soft majority vote, the usual start of EM-type methods.
    """
    votes = weighted_votes(data, worker_weights)
    total = votes.sum(axis=1, keepdims=True)
    empty = total[:, 0] <= 0
    total[empty] = 1.0
    out = votes / total
    out[empty] = 1.0 / data.n_classes
    return out


def split_ties(proba: np.ndarray, gold: np.ndarray | None = None) -> np.ndarray:
    """One-hot argmax where tied classes share the unit mass (order-free, unlike argmax).

    Classes within 1e-12 of a row's maximum count as tied; gold rows are one-hot on the gold
    class.
    """
    best = proba.max(axis=1, keepdims=True)
    top = (proba >= best - 1e-12).astype(np.float64)
    top /= top.sum(axis=1, keepdims=True)
    return clamp_to_gold(top, gold)


def agreement_with(data: CrowdLabels, consensus: np.ndarray) -> np.ndarray:
    """Per worker, the share of answers equal to the consensus (0.5 with no answers).

    ``consensus`` is either a class code per task or a (tasks x classes) soft assignment, in
    which case an answer counts by the weight its class has in its task's row.
    """
    if consensus.ndim == 2:
        hits = consensus[data.task, data.label]
    else:
        hits = (data.label == consensus[data.task]).astype(np.float64)
    n = np.bincount(data.worker, minlength=data.n_workers)
    agree = np.bincount(data.worker, weights=hits, minlength=data.n_workers)
    return np.divide(agree, n, out=np.full(data.n_workers, 0.5), where=n > 0)


# ===================================================================== gold
def clamp_to_gold(post: np.ndarray, gold: np.ndarray | None) -> np.ndarray:
    """Set the rows of tasks with a gold class (``gold >= 0``) to that class, in place.

    Gold labels are observed values of the latent class, so their posterior is one-hot;
    every EM-type method clamps after each E-step.  Returns ``post``.
    """
    if gold is not None:
        known = gold >= 0
        post[known] = 0.0
        post[known, gold[known]] = 1.0
    return post


# ========================================================== confusion model
def soft_confusion_counts(data: CrowdLabels, post: np.ndarray) -> np.ndarray:
    """Expected answer counts ``N[w, j, l] = sum_{answers (n, w, l)} post[n, j]``.

    The sufficient statistic of the Dawid-Skene M-step (and of the Dirichlet posterior of a
    worker's confusion rows); orientation ``[worker, true, answered]``.  One weighted
    ``bincount`` per class: O(answers) memory, and every cell sums its answers in answer
    order.
    """
    m, k = data.n_workers, data.n_classes
    wl = data.worker.astype(np.int64) * k + data.label
    counts = np.zeros((m, k, k))
    for j in range(k):
        counts[:, j, :] = np.bincount(wl, weights=post[data.task, j], minlength=m * k).reshape(m, k)
    return counts


def soft_confusions(data: CrowdLabels, post: np.ndarray, smoothing: float) -> np.ndarray:
    """Confusions ``T[w, j, l] ∝ smoothing + N[w, j, l]`` from the soft counts against ``post``.

    The Dawid-Skene M-step with a symmetric Dirichlet(``smoothing + 1``) prior on every row
    (MAP; ``smoothing = 0`` is the maximum-likelihood step); orientation
    ``[worker, true, answered]``, rows sum to 1.  A (worker, true class) row with no mass at
    all carries no information and is uniform.
    """
    k = data.n_classes
    t = soft_confusion_counts(data, post) + smoothing
    tot = t.sum(-1, keepdims=True)
    return np.where(tot > 0, t / np.where(tot > 0, tot, 1.0), 1.0 / k)


def answer_log_sum(
    data: CrowdLabels, log_conf: np.ndarray, start: np.ndarray | None = None
) -> np.ndarray:
    """The Dawid-Skene E-step sum ``S[n, j] = start[n, j] + sum_{(n, w, l)} log_conf[w, j, l]``.

    ``log_conf`` is (W, K, K) ``[worker, true, answered]`` (log confusions, or expected log
    confusions in variational methods); ``start`` (broadcastable to (N, K), e.g. a log
    prior) is copied, zeros when omitted.  Normalising ``exp(S)`` over ``j`` gives the task
    posteriors.
    """
    shape = (data.n_tasks, data.n_classes)
    s = np.zeros(shape) if start is None else np.array(np.broadcast_to(start, shape))
    np.add.at(s, data.task, log_conf[data.worker, :, data.label])
    return s


def confusions_from_log_table(log_table: np.ndarray, n_workers: int) -> np.ndarray:
    """The E-step table ``[w * K + answered, true]`` (log scale) as ``conf[w, true, answered]``."""
    k = log_table.shape[1]
    return np.exp(log_table.reshape(n_workers, k, k).transpose(0, 2, 1))


def one_coin_confusions(accuracy, n_classes: int) -> np.ndarray:
    """One-coin confusions: ``accuracy`` on the diagonal, the errors spread evenly.

    ``conf[w, j, l] = a_w`` if ``l == j`` else ``(1 - a_w) / (K - 1)``: the symmetric
    channel of Dawid-Skene's one-parameter special case (Karger, Oh and Shah, 2011).

    Parameters
    ----------
    accuracy : float or array of shape (n,)
    n_classes : int

    Returns
    -------
    ndarray, shape (n, K, K), or (K, K) for a scalar accuracy
    """
    acc = np.asarray(accuracy, dtype=np.float64)
    if acc.ndim == 0:
        return one_coin_confusions(acc[None], n_classes)[0]
    k = int(n_classes)
    if k == 1:  # one class is every answer: its row is [1] (not [accuracy], nor 0/0 off it)
        return np.ones((len(acc), 1, 1))
    off = (1.0 - acc) / (k - 1)
    conf = np.repeat(off[:, None, None], k, axis=1).repeat(k, axis=2)
    idx = np.arange(k)
    conf[:, idx, idx] = acc[:, None]
    return conf


def expected_skills(confusions: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """Per worker, the probability of a correct answer ``sum_j prior_j conf[w, j, j]``."""
    return np.einsum("wjj->wj", confusions) @ prior


# ============================================================ expected logs
def dirichlet_expected_log(conc: np.ndarray) -> np.ndarray:
    """``E[log theta]`` for ``theta ~ Dir(conc)`` along the last axis.

    ``E[log theta_l] = digamma(a_l) - digamma(sum_l' a_l')``: the variational-Bayes
    replacement of ``log theta`` in the E-step (Beal 2003; Kim & Ghahramani 2012 for iBCC).
    """
    return digamma(conc) - digamma(conc.sum(axis=-1, keepdims=True))


def dirichlet_kl(post: np.ndarray, prior: Any, elog: np.ndarray | None = None) -> np.ndarray:
    """``KL(Dir(post) || Dir(prior))`` over the last axis (arrays broadcast; ``prior`` may be a
    scalar, a symmetric Dirichlet).

    ``elog``: ``E[log theta]`` under ``Dir(post)`` (:func:`dirichlet_expected_log`) when the
    caller has it already, as a variational E-step does; it saves the digammas.
    """
    post = np.asarray(post, dtype=np.float64)
    prior = np.asarray(prior, dtype=np.float64)
    if prior.ndim == 0:  # a symmetric Dirichlet: the scalar along the last axis
        prior = np.full(post.shape[-1], float(prior))
    if elog is None:
        elog = dirichlet_expected_log(post)
    # the prior's log-gammas on the prior's own shape, broadcast in the sum: a prior shared by
    # every worker would otherwise take W times as many
    return (
        gammaln(post.sum(axis=-1))
        - gammaln(post).sum(axis=-1)
        - gammaln(prior.sum(axis=-1))
        + gammaln(prior).sum(axis=-1)
        + ((post - prior) * elog).sum(axis=-1)
    )


def beta_expected_logs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``E[log q]`` and ``E[log(1 - q)]`` for ``q ~ Beta(a, b)`` (elementwise)."""
    total = digamma(a + b)
    return digamma(a) - total, digamma(b) - total


def beta_kl(a1: Any, b1: Any, a0: Any, b0: Any, elogs: tuple | None = None) -> np.ndarray:
    """``KL(Beta(a1, b1) || Beta(a0, b0))`` elementwise; ``elogs``: the pair
    :func:`beta_expected_logs` ``(a1, b1)`` when the caller has it already."""
    log_q, log_1mq = beta_expected_logs(a1, b1) if elogs is None else elogs
    return betaln(a0, b0) - betaln(a1, b1) + (a1 - a0) * log_q + (b1 - b0) * log_1mq


# =============================================================== quadrature
@lru_cache(maxsize=128)
def gauss_jacobi(n: int, a: float, b: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nodes ``q``, ``1 - q`` and log-weights of the n-point rule for ``q^(a-1) (1-q)^(b-1)``.

    Gauss-Jacobi quadrature mapped from [-1, 1] to [0, 1]: exact for polynomials of degree
    <= 2n - 1 against the Beta(a, b) weight, up to the constant ``B(a, b)`` (the weights are
    not normalised).  The returned arrays are cached and read-only.
    """
    x, w = roots_jacobi(n, b - 1.0, a - 1.0)  # weight (1 - x)^(b-1) (1 + x)^(a-1) on [-1, 1]
    q = (1.0 + x) / 2.0
    omq = (1.0 - x) / 2.0
    logw = np.log(w)
    for arr in (q, omq, logw):
        arr.flags.writeable = False
    return q, omq, logw


#: posteriors within this of a row's maximum count as tied
_TIE_TOL = 1e-12


def argmax_random_ties(proba: np.ndarray, rng: np.random.RandomState, ids: pd.Index | None = None) -> np.ndarray:
    """Row-wise argmax; exact ties (within 1e-12) go to a class drawn uniformly by ``rng``.

    ``rng`` gives one 64-bit salt; the key of cell (row n, class j) is a fixed hash
    (SplitMix64) of the salt, the row's identity and ``j``, and a tied row takes its tied
    class with the largest key.  The row's identity is its id in ``ids`` (:func:`id_hashes`:
    the id's text, so ``17`` read from Parquet and ``"17"`` read from CSV break alike) when
    given, else its position.  So the rule is
    reproducible for a given seed, uniform over the tied classes, and the outcome of a task
    does not depend on how many other tasks are tied; with ``ids`` it does not depend on the
    task's position either, so a task split off into another partition or file
    (:mod:`crowdlearn.scale`) is broken the same way.  Keys are only computed for the
    (usually few) tied rows, not for all N x K cells.  A renamed task, or classes renamed
    into another sort order, draw the tie anew (the rows' order never matters).
    """
    n, k = proba.shape
    if k == 0:
        return np.zeros(n, dtype=np.int64)
    salt = np.uint64(rng.randint(0, 2**62, dtype=np.int64))
    codes = np.argmax(proba, axis=1)
    best = proba[np.arange(n), codes][:, None]
    tied = proba >= best - _TIE_TOL
    rows = np.flatnonzero(np.count_nonzero(tied, axis=1) > 1)
    if rows.size:
        row_key = rows.astype(np.uint64) if ids is None else id_hashes(pd.Index(ids).take(rows))
        cells = _splitmix64(row_key + salt)[:, None] + np.arange(k, dtype=np.uint64)
        keys = _splitmix64(cells)
        keys[~tied[rows]] = 0  # hashes of tied cells are > 0 except with probability 2^-64
        codes[rows] = np.argmax(keys, axis=1)
    return codes


def id_hashes(ids: Any) -> np.ndarray:
    """A fixed 64-bit hash of each id's text (:func:`pandas.util.hash_pandas_object` of
    ``str(id)``): an id read as the number ``17`` from Parquet or JSON Lines and as the text
    ``"17"`` from CSV is one id in every output table, and must draw the same."""
    text = pd.Series([str(v) for v in ids], dtype=object)
    return pd.util.hash_pandas_object(text, index=False).to_numpy(np.uint64)


def keyed_uniforms(ids: Any, rng: np.random.Generator) -> np.ndarray:
    """One uniform number in [0, 1) per id, from one seed drawn from ``rng`` and the id's
    text (:func:`id_hashes`): a seeded random order of the ids that does not depend on
    their position, their type, or which other ids are present."""
    salt = np.uint64(rng.integers(0, 2**62))
    return (_splitmix64(id_hashes(ids) + salt) >> np.uint64(11)).astype(np.float64) / float(2**53)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """The SplitMix64 finaliser (Steele, Lea & Flood 2014): a bijective 64-bit mix."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))
