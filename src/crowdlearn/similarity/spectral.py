"""Baseline crowdclustering: majority vote per pair, then spectral clustering of the signed
vote graph."""

from __future__ import annotations

import numpy as np

from .base import SimilarityEstimator, agreement_reliability, pair_evidence, symmetric, top_eigen

__all__ = ["SpectralSimilarity"]


class SpectralSimilarity(SimilarityEstimator):
    r"""Majority vote per pair, spectral embedding of the signed vote graph, k-means.

    Each distinct pair gets the sign of its vote margin, :math:`A_{ij} =
    \operatorname{sign}(\#\text{same} - \#\text{different}) \in \{-1, 0, 1\}`; items are
    embedded by the K leading eigenvectors of the signed adjacency ``A`` (scaled by the
    square roots of their eigenvalues; for K planted clusters ``E[A]`` is a block matrix
    shifted by a constant, Kunegis et al. 2010 on signed spectral analysis), rows normalised
    to unit length, and clustered by :class:`sklearn.cluster.KMeans`.  Every annotator
    counts the same; ``worker_reliability_`` is only reported: each annotator's agreement with
    the final clustering (one-coin, as in
    :func:`~crowdlearn.similarity.base.agreement_reliability`).  Linear in answers (ARPACK
    on a sparse matrix); items never compared get the prior cluster.

    Parameters
    ----------
    n_clusters : int or None
        K; None estimates it (:func:`~crowdlearn.similarity.base.estimate_n_clusters`).
    n_init : int
        k-means restarts.
    random_state : int, Generator or None
        Seeds k-means.

    References
    ----------
    Kunegis, J., Schmidt, S., Lommatzsch, A., Lerner, J., De Luca, E. W. and Albayrak, S.
    (2010). Spectral analysis of signed graphs for clustering, prediction and visualization.
    SIAM SDM.
    """

    def __init__(self, n_clusters=None, n_init=10, random_state=0):
        self.n_clusters = n_clusters
        self.n_init = n_init
        self.random_state = random_state

    def _fit(self, data, n_clusters, rng):
        from sklearn.cluster import KMeans

        if isinstance(self.n_init, bool) or not float(self.n_init).is_integer() or self.n_init < 1:
            raise ValueError(f"n_init must be a whole number >= 1, got {self.n_init!r} "
                             "(SpectralSimilarity)")
        n, k = data.n_items, n_clusters
        lo, hi, ev, _ = pair_evidence(data)
        adj = symmetric(lo, hi, np.sign(ev), n)
        answered = data.answers_per_item() > 0
        h = np.zeros((n, k))
        if k == 1:
            h[:, 0] = 1.0
        else:
            vals, vecs = top_eigen(lambda x: adj @ np.asarray(x, float), n, k)
            emb = vecs * np.sqrt(np.abs(vals))
            norm = np.linalg.norm(emb, axis=1, keepdims=True)
            ok = answered & (norm[:, 0] > 1e-12)
            if ok.sum() >= k:
                seed = int(rng.integers(0, 2**31 - 1))
                km = KMeans(n_clusters=k, n_init=int(self.n_init), random_state=seed)
                labels = km.fit_predict(emb[ok] / norm[ok])
                h[np.flatnonzero(ok), labels] = 1.0
            else:
                h[np.flatnonzero(ok), 0] = 1.0
        memb = h.copy()
        empty = memb.sum(axis=1) == 0
        memb[empty] = memb[~empty].mean(axis=0) if (~empty).any() else 1.0 / k
        return h, agreement_reliability(data, memb)
