"""The estimator base of similarity annotations (crowdclustering) and its shared pieces.

A method fits on a :class:`~crowdlearn.similarity.data.SimilarityAnswers` and returns a
soft clustering of the items: ``memberships_`` (item x cluster, rows sum to one), the hard
``clusters_`` (the most likely cluster, numbered ``0 .. K-1``) and ``worker_reliability_``
(probability that an annotator reports the true same/different status of a pair).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..core.base import AnswerEstimator, Tags
from ..core.params import check_params
from .data import SimilarityAnswers, as_similarity_answers

__all__ = ["SimilarityEstimator", "pair_evidence", "estimate_n_clusters", "top_eigen",
           "agreement_reliability", "pair_same_posterior"]


class SimilarityEstimator(AnswerEstimator):
    """Base of the crowdclustering methods.

    Subclasses implement ``_fit(data, n_clusters, rng) -> (memberships, reliability)``:
    ``memberships`` a nonnegative (n_items, n_clusters) array whose all-zero rows mean "no
    evidence" (the base gives them the prior), ``reliability`` one number per worker.

    Fitted attributes
    -----------------
    clusters_ : Series item -> int
        The most likely cluster of every item.  Clusters are numbered ``0 .. K-1`` in the
        order of their first item (in the table's item order), so the numbering does not depend
        on the method's internal labels; a cluster no item picks is dropped (K may shrink).
    memberships_ : DataFrame item x cluster
        Soft memberships (rows sum to one).
    worker_reliability_ : Series worker -> float
        Probability that the annotator reports a pair's true status (1/2 = coin flips).
    n_clusters_ : int
        The number of clusters used (given, or estimated when ``n_clusters`` is None).
    n_iter_, converged_, history_ : int, bool, list
        Rounds of the method's outer loop, whether its stopping rule ended it, and the
        quantity that rule reads per round (1, True and empty for one-pass methods).

    Notes
    -----
    An item never compared (listed through ``all_items``), or compared only in pairs that
    carry no evidence, gets the prior: memberships equal to the cluster proportions of the
    other items, and so the largest cluster as its hard cluster.  Giving it a cluster of its
    own would invent a (K+1)-th group out of no answer at all.
    """

    _result_attr = "clusters_"

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), kind="similarity",
                                   answer_type="similarity", accepts_gold=False)

    def fit(self, answers) -> "SimilarityEstimator":
        """Fit on a :class:`SimilarityAnswers` (or a DataFrame with its default columns)."""
        check_params(self)
        data = as_similarity_answers(answers)
        k = getattr(self, "n_clusters", None)
        if k is not None and (isinstance(k, bool) or not float(k).is_integer() or k < 1):
            raise ValueError(f"n_clusters must be a whole number >= 1 or None, got {k!r} "
                             f"({type(self).__name__})")
        from ..core.base import resolve_generator

        rng = resolve_generator(getattr(self, "random_state", 0))
        # one-pass methods leave these; iterative ones set them in _fit
        self.n_iter_, self.converged_, self.history_ = 1, True, []
        if data.n_answers == 0:
            k_used = 1
            memberships, reliability = np.zeros((data.n_items, 1)), np.zeros(0)
        else:
            k_used = int(k) if k is not None else estimate_n_clusters(data)
            k_used = max(1, min(k_used, data.n_items))
            memberships, reliability = self._fit(data, k_used, rng)
        self._set_result(data, np.asarray(memberships, float), np.asarray(reliability, float))
        return self

    def _fit(self, data: SimilarityAnswers, n_clusters: int, rng: np.random.Generator):
        raise NotImplementedError

    def _set_result(self, data: SimilarityAnswers, memberships: np.ndarray,
                    reliability: np.ndarray) -> None:
        h = np.where(np.isfinite(memberships), np.maximum(memberships, 0.0), 0.0)
        total = h.sum(axis=1, keepdims=True)
        known = total[:, 0] > 0
        h[known] /= total[known]
        if known.any():
            prior = h[known].sum(axis=0) / known.sum()
        else:
            prior = np.full(h.shape[1], 1.0 / h.shape[1])
        h[~known] = prior
        hard = np.argmax(h, axis=1)
        # number clusters by their first item so equal partitions print equal labels
        used, first = np.unique(hard, return_index=True)
        order = used[np.argsort(first, kind="stable")]
        h = h[:, order]
        h /= h.sum(axis=1, keepdims=True)
        relabel = np.empty(memberships.shape[1], dtype=np.int64)
        relabel[order] = np.arange(len(order))
        hard = relabel[hard]
        self.n_clusters_ = len(order)
        self.memberships_ = pd.DataFrame(h, index=data.items, columns=pd.RangeIndex(len(order), name="cluster"))
        self.clusters_ = pd.Series(hard, index=data.items, name="cluster")
        rel = np.full(data.n_workers, 0.5) if reliability.size == 0 else reliability
        self.worker_reliability_ = pd.Series(np.nan_to_num(rel, nan=0.5), index=data.workers,
                                             name="reliability")

    def _result_frame(self) -> pd.DataFrame:
        conf = self.memberships_.to_numpy()[np.arange(len(self.clusters_)), self.clusters_.to_numpy()]
        return pd.DataFrame({"item": self.clusters_.index, "cluster": self.clusters_.to_numpy(),
                             "confidence": conf})


# ------------------------------------------------------------------------- shared pieces
def pair_evidence(data: SimilarityAnswers, weight: np.ndarray | None = None):
    """Signed evidence per distinct pair: ``sum over its answers of weight[w] * (2 same - 1)``.

    Returns ``(lo, hi, evidence, count)`` over the distinct unordered pairs (``lo < hi``);
    ``weight`` is one number per worker (default 1: the vote margin).  Linear in answers.
    """
    lo, hi, code = data.pairs()
    sign = 2.0 * data.same - 1.0
    w = sign if weight is None else sign * weight[data.worker]
    evidence = np.bincount(code, weights=w, minlength=len(lo))
    count = np.bincount(code, minlength=len(lo)).astype(float)
    return lo, hi, evidence, count


def symmetric(lo: np.ndarray, hi: np.ndarray, values: np.ndarray, n: int) -> sp.csr_matrix:
    """The symmetric sparse n x n matrix with ``values`` at (lo, hi) and (hi, lo)."""
    rows = np.concatenate([lo, hi])
    cols = np.concatenate([hi, lo])
    return sp.csr_matrix((np.concatenate([values, values]), (rows, cols)), shape=(n, n))


def top_eigen(matvec, n: int, k: int):
    """The ``k`` largest (algebraic) eigenpairs of a symmetric operator, in decreasing order.

    Dense for small ``n`` (exact and quick), ARPACK (``scipy.sparse.linalg.eigsh``) started
    from the constant vector otherwise, so the result does not depend on a random start and
    relabelling items permutes it.
    """
    from scipy.sparse.linalg import LinearOperator, eigsh

    if n <= 400:
        # the dense solver has all n eigenpairs: K = n items (two items, two clusters) gets
        # n vectors, where the cap of ARPACK below (k < n) would leave a rank n - 1 matrix
        k = max(1, min(k, n))
        dense = matvec(np.eye(n))
        vals, vecs = np.linalg.eigh((dense + dense.T) / 2)
        idx = np.argsort(vals)[::-1][:k]
        return vals[idx], vecs[:, idx]
    k = max(1, min(k, n - 1))
    op = LinearOperator((n, n), matvec=matvec, matmat=matvec, dtype=float)
    vals, vecs = eigsh(op, k=k, which="LA", v0=np.ones(n), tol=1e-6,
                       ncv=min(n, max(2 * k + 1, 20)))
    idx = np.argsort(vals)[::-1]
    return vals[idx], vecs[:, idx]


def mean_filled_operator(data: SimilarityAnswers, target: np.ndarray, lo, hi, fill: float):
    """``x -> M x`` for the completed similarity matrix of a uniform sampling model.

    ``M = fill * 1 1^T + P_Omega(T - fill) / p``: the unobserved entries are the mean
    ``fill`` and the observed deviations are scaled by the inverse of the sampling rate
    ``p = |Omega| / (n (n-1) / 2)``, so ``E[M]`` is the full matrix when pairs are sampled
    uniformly (the first step of singular value projection, Jain et al. 2010).
    """
    n = data.n_items
    p = max(len(lo) / max(n * (n - 1) / 2, 1.0), 1e-12)
    dev = symmetric(lo, hi, (target - fill) / p, n)

    def matvec(x):
        x = np.asarray(x, float)
        col = x.ndim == 1
        x2 = x[:, None] if col else x
        out = dev @ x2 + fill * np.sum(x2, axis=0, keepdims=True)
        return out[:, 0] if col else out

    return matvec


def estimate_n_clusters(data: SimilarityAnswers, max_clusters: int = 20) -> int:
    """K from the eigen-gap of the centred completed similarity matrix.

    The matrix is ``D = P_Omega(T - m) / p``: the vote targets (1 where most of a pair's
    answers say "same", 0 where most say "different", 1/2 on a tie) minus their mean ``m``,
    on the observed pairs, scaled by the inverse sampling rate ``p`` (the centred version of
    :func:`mean_filled_operator`).  If "same" is answered with rate ``a`` within a cluster
    and ``b`` across, ``E[D] = (a - b) (B - s 1 1^T)`` with ``B`` the block indicator of the
    clusters and ``s`` the share of within-cluster pairs: K - 1 eigenvalues of the order of
    ``(a - b) n / K`` and the rest near zero (centring removes the mean's large first
    eigenvalue, which otherwise makes every gap but the first look small).  So
    ``K = 1 + argmax_k (lambda_k - lambda_{k+1})`` over ``k = 1 .. max_clusters``.  K = 1 is
    returned only when no pair's answers lean "different" (then nothing separates any two
    items, and the centred matrix is zero, so its gaps say nothing): otherwise, with no
    cluster structure, the largest gap is noise, so pass ``n_clusters`` when a single
    cluster is plausible.  Two items have no spectrum to read a gap from: they are two
    clusters when their answers lean "different", else one.
    """
    n = data.n_items
    if n < 2:
        return 1
    lo, hi, ev, _ = pair_evidence(data)
    if not np.any(ev < 0):
        return 1
    if n == 2:
        return 2
    target = np.where(ev > 0, 1.0, np.where(ev < 0, 0.0, 0.5))
    fill = float(target.mean()) if len(target) else 0.5
    p = max(len(lo) / max(n * (n - 1) / 2, 1.0), 1e-12)
    dev = symmetric(lo, hi, (target - fill) / p, n)
    k = min(max_clusters + 1, n - 1)
    vals, _ = top_eigen(lambda x: dev @ np.asarray(x, float), n, k)
    if len(vals) < 2:
        return 2
    gaps = vals[:-1] - vals[1:]
    return int(np.argmax(gaps)) + 2


def pair_same_posterior(memberships: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                        evidence: np.ndarray) -> np.ndarray:
    r"""Posterior that each answered pair is "same", from mean-field memberships and its answers.

    Under a factorised (mean-field) posterior the pair (i, j) is "same" with probability
    :math:`m_i^\top m_j`, which drops the pair's own answers' coupling of :math:`c_i` and
    :math:`c_j`: two items joined by a correct "same" answer but each unsure of its cluster
    get :math:`m_i^\top m_j \approx 1/K`, as if the answer were mostly wrong.  The pairwise
    marginal of the Bethe approximation keeps it: with the cavity memberships
    :math:`a = m_{i \setminus j} \propto m_i \odot e^{-e_{ij} m_j}` and
    :math:`b = m_{j \setminus i}` (each item's membership without the field the pair gave
    it, ``e_ij`` the pair's signed evidence as in the mean-field update of
    :func:`~crowdlearn.similarity.symnmf.refine_memberships`), the joint of the two clusters
    is :math:`\propto a_c b_d \exp(e_{ij} [c = d])`, so

    .. math:: P(c_i = c_j) = \sigma(e_{ij} + \operatorname{logit} a^\top b).

    With one-hot memberships this is :math:`m_i^\top m_j` again.  O(|Omega| K).

    The mean-field cavities stand in for the messages of belief propagation, whose pairwise
    beliefs have this form (Yedidia, Freeman and Weiss 2003).

    Parameters
    ----------
    memberships : ndarray, shape (n_items, K)
        Rows on the simplex.
    lo, hi, evidence : ndarray
        The distinct pairs and their signed evidence, as returned by :func:`pair_evidence`
        with the weights the memberships were fitted with.

    Returns
    -------
    ndarray, shape (n_pairs,)

    References
    ----------
    Yedidia, J. S., Freeman, W. T. and Weiss, Y. (2003). Understanding belief propagation and
    its generalizations. Exploring Artificial Intelligence in the New Millennium, 239-269.
    """
    m = np.asarray(memberships, float)
    ev = np.asarray(evidence, float)
    with np.errstate(divide="ignore"):
        logm = np.log(np.maximum(m, 0.0))

    def cavity(own, other):
        z = logm[own] - ev[:, None] * m[other]
        z -= z.max(axis=1, keepdims=True)
        z = np.exp(z)
        return z / z.sum(axis=1, keepdims=True)

    q = np.clip(np.einsum("ij,ij->i", cavity(lo, hi), cavity(hi, lo)), 0.0, 1.0)
    # sigma(e + logit q) written so neither e^{|e|} nor logit(0) or logit(1) is formed
    up = ev >= 0
    decay = np.exp(-np.abs(ev))
    num = np.where(up, q, q * decay)
    den = num + np.where(up, (1.0 - q) * decay, 1.0 - q)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), q)


def agreement_reliability(data: SimilarityAnswers, memberships: np.ndarray,
                          prior: float = 2.0, evidence: np.ndarray | None = None) -> np.ndarray:
    """One-coin reliability of every annotator: its expected agreement with a clustering.

    With soft memberships ``h`` (rows on the simplex), the pair (i, j) is "same" with
    probability ``s_ij = h_i . h_j``; an answer agrees with probability ``s_ij`` when it
    says "same" and ``1 - s_ij`` otherwise, and ``r_w`` is the mean agreement of the
    annotator's answers shrunk towards 1/2 by ``prior`` pseudo-answers (a Beta(prior/2,
    prior/2) prior), so an annotator with few answers is not declared perfect.

    ``evidence``, the signed evidence of the distinct pairs (:func:`pair_evidence`, in the
    order of ``data.pairs()``) that soft memberships were fitted with, replaces ``s_ij`` by
    the pair's posterior (:func:`pair_same_posterior`).  That is the expectation an EM step
    needs: ``h_i . h_j`` of uncertain memberships sits near 1/K whatever the pair's answers
    say, so correct answers count as partly wrong, the reliabilities fall, the next
    memberships get weaker evidence and are less certain still -- a loop that ends with
    uniform memberships and error-free annotators rated near or below 1/2.  Hard
    (one-hot) memberships give the same result either way.
    """
    if evidence is None:
        s = np.einsum("ij,ij->i", memberships[data.item_a], memberships[data.item_b])
    else:
        lo, hi, code = data.pairs()
        s = pair_same_posterior(memberships, lo, hi, evidence)[code]
    s = np.clip(s, 0.0, 1.0)
    agree = np.where(data.same == 1, s, 1.0 - s)
    m = data.n_workers
    total = np.bincount(data.worker, weights=agree, minlength=m)
    count = np.bincount(data.worker, minlength=m)
    return (total + prior / 2) / (count + prior)
