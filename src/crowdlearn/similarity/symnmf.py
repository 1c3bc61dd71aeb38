"""Crowdclustering by completing the item-similarity matrix and factoring it by symmetric NMF,
alternating with one-coin annotator reliabilities."""

from __future__ import annotations

import numpy as np

from .base import (SimilarityEstimator, agreement_reliability, mean_filled_operator,
                   pair_evidence, top_eigen)

__all__ = ["SymNMFClustering", "procrustes_symnmf", "refine_memberships"]


def _procrustes(a: np.ndarray) -> np.ndarray:
    """The orthogonal Q maximising trace(Q^T a) (nearest orthogonal matrix to ``a``)."""
    u, _, vt = np.linalg.svd(a)
    return u @ vt


#: relative weight of the tie-breaking term of the Procrustes step: far above rounding
#: (~1e-16), far below anything the fit resolves (its tolerances are 1e-7 and coarser)
_TIE = float(np.sqrt(np.finfo(float).eps))


def _spa(w: np.ndarray, k: int) -> np.ndarray:
    """k rows of ``w`` chosen by the successive projection algorithm (Gillis and Vavasis
    2014): each pick is the row of largest norm after projecting out the previous picks, so
    the picks are near the vertices of the cone the rows span (one per cluster)."""
    r = w.copy()
    picks = []
    for _ in range(k):
        norms = np.einsum("ij,ij->i", r, r)
        norms[picks] = -1.0
        j = int(np.argmax(norms))
        picks.append(j)
        v = r[j] / max(np.linalg.norm(r[j]), 1e-300)
        r -= np.outer(r @ v, v)
    return np.array(picks)


def procrustes_symnmf(w: np.ndarray, n_iter: int = 100, tol: float = 1e-7,
                      rng: np.random.Generator | None = None, n_restarts: int = 0):
    """Nonnegative H with ``H H^T ~ W W^T`` from a symmetric square root ``W`` (n x K).

    Every exact symmetric factor of ``W W^T`` is ``W Q`` with Q orthogonal, so symmetric NMF
    is the search for the rotation that makes ``W Q`` nonnegative: alternate
    ``H = max(0, W Q)`` and ``Q = argmin_Q ||H - W Q||_F`` (orthogonal Procrustes), the
    alternating scheme of Ibrahim and Fu (2021) for provable SymNMF.  Started from the
    rotation sending the SPA anchor rows to the unit axes, then from ``n_restarts`` random
    rotations of it; each start runs until an iteration lowers its residual by less than a
    relative ``tol`` (at most ``n_iter`` iterations), and the start with the smallest
    residual wins (a later start must beat the earlier ones by more than a relative
    ``tol``).  O(n K^2) per iteration.

    The result does not depend on which square root of ``W W^T`` is passed (``W`` or ``W R``
    with R orthogonal, e.g. eigenvectors of other signs) nor on the order of its rows, up to
    rounding, and up to exact ties of the SPA picks: two rows of equal norm at a pick are
    taken in row order, which only happens when a symmetry of the data exchanges them, and
    then any deterministic pick follows the order of the items.
    """
    n, k = w.shape
    anchors = _spa(w, k)
    # rotate anchor row i onto axis i: Q = Procrustes(W[anchors]^T I)
    q0 = _procrustes(w[anchors].T)
    starts = [q0]
    # The random rotations act after q0, in the anchors' frame.  ``W`` is only defined up to
    # a right rotation (eigenvector signs, and any basis of a repeated eigenvalue, depend
    # on the solver and on the order of the items), and ``W R`` gives ``q0 -> R^T q0``, so
    # ``W R (R^T q0 G) = W q0 G``: the starts, and the winner, do not depend on that basis
    # (starts ``W G`` did, and so on the item names).
    rng = rng if rng is not None else np.random.default_rng(0)
    for _ in range(n_restarts):
        starts.append(q0 @ _procrustes(rng.normal(size=(k, k))))
    best, best_err = None, np.inf
    for q in starts:
        prev = np.inf
        wq = w @ q
        for _ in range(max(n_iter, 1)):
            h = np.maximum(wq, 0.0)
            # When H has rank < K (a start that leaves a cluster empty) the Procrustes
            # minimiser is not unique and the SVD picks one by the basis of W, i.e. by the
            # order of the items.  The proximal term (the minimiser nearest the current Q)
            # makes it unique and basis-free; its weight ``_TIE`` is far below the
            # tolerances, and a proximal step still never raises the residual.
            a = w.T @ h
            q = _procrustes(a + _TIE * max(np.linalg.norm(a), 1e-300) * q)
            wq = w @ q
            err = float(np.sum((h - wq) ** 2))
            # relative decrease below tol; not on the first step, whose prev = inf made
            # inf <= tol * inf true and stopped every start after one step
            if np.isfinite(prev) and prev - err <= tol * prev:
                break
            prev = err
        h = np.maximum(wq, 0.0)
        err = float(np.sum((h - wq) ** 2))
        # a later start must win by more than the stopping tolerance: starts that reach the
        # same optimum differ by rounding, and rounding follows the order of the items
        if best is None or err < best_err - tol * best_err:
            best, best_err = h, err
    return best


class SymNMFClustering(SimilarityEstimator):
    r"""Crowdclustering by similarity-matrix completion and symmetric NMF, with annotator
    reliabilities (the approach of the signal-processing tutorial, Part III).

    Model: item ``i`` has a membership vector ``h_i`` on the simplex and the pair (i, j) is
    "same" with probability :math:`S_{ij} = h_i^\top h_j`, so the full similarity matrix is
    :math:`S = H H^\top` with :math:`H \ge 0` of rank K (Vinayak and Hassibi 2016, on
    crowdclustering as low-rank recovery).  Annotator ``w`` reports the pair's true status
    with probability :math:`r_w` (one coin).  The fit alternates:

    1. *Pair targets*: the posterior that a pair is "same" given its answers,
       :math:`t_{ij} = \sigma(\operatorname{logit}\pi + \sum_{a \in (i,j)}
       \operatorname{logit}(r_{w_a}) (2 y_a - 1))`, with :math:`\pi` the share of "same"
       pairs under the current clustering (1/K at first).
    2. *Completion*: the rank-K part of the mean-filled, rate-scaled target matrix
       ``fill 1 1^T + P_Omega(T - fill) / p`` (``p`` the sampling rate of pairs), whose
       expectation under uniform pair sampling is the full matrix: the first step of singular
       value projection (Jain, Meka and Dhillon 2010), computed by ARPACK with products by a
       sparse matrix and a rank-one one (linear in answers).  Further SVP steps with the
       ``1/p`` step amplify the noise of sparsely sampled pairs, so none are taken.
    3. *Symmetric NMF*: with the completion ``W W^T``, ``H = max(0, W Q)`` for the rotation
       ``Q`` found by :func:`procrustes_symnmf` (Ibrahim and Fu 2021); its rows, normalised,
       start mean-field updates of the memberships on the observed pairs, with a weight on
       the pairs never asked (:func:`refine_memberships`); clusters are the argmax.
    4. *Reliabilities*: each annotator's expected agreement with the current soft clustering
       (:func:`~crowdlearn.similarity.base.agreement_reliability`), the M-step of EM: an
       answer on (i, j) is scored against the pair's posterior of being "same"
       (:func:`~crowdlearn.similarity.base.pair_same_posterior`: the memberships without the
       pair's own field, joined by its answers), not against :math:`h_i^\top h_j`: that
       product is near 1/K for uncertain items whatever the answers say, so it would rate
       error-free annotators low, soften the next memberships and feed back down to
       uniform ones.  Coin-flipping annotators come out at 1/2 and get weight
       ``logit(1/2) = 0`` in step 1.

    Parameters
    ----------
    n_clusters : int or None
        K; None estimates it from the eigen-gap of the completed similarity matrix
        (:func:`~crowdlearn.similarity.base.estimate_n_clusters`).
    max_iter : int
        Rounds of steps 1-4 (stops earlier when the clusters and reliabilities settle).
    n_refine_iter : int
        Mean-field sweeps per round (0 = the SymNMF rotation only).
    unobserved_weight : float
        Weight ``mu`` of the pairs never asked, each counted as a fraction of an average
        "different" answer (see :func:`refine_memberships`).
    n_nmf_iter : int
        Procrustes iterations of the SymNMF step.
    n_restarts : int
        Random rotations tried in the SymNMF step besides the SPA start.
    reliability_prior : float
        Pseudo-answers shrinking each reliability towards 1/2.
    tol : float
        Stop when no item changes cluster and no reliability moves by more than ``tol``.
    random_state : int, Generator or None
        Seeds the random restarts.

    References
    ----------
    Ibrahim, S. and Fu, X. (2021). Crowdsourcing via annotator co-occurrence imputation and
    provable symmetric nonnegative matrix factorization. ICML.
    Jain, P., Meka, R. and Dhillon, I. (2010). Guaranteed rank minimization via singular value
    projection. NeurIPS.
    Vinayak, R. K. and Hassibi, B. (2016). Crowdsourced clustering: querying edges vs
    triangles. NeurIPS.
    """

    def __init__(self, n_clusters=None, max_iter=10, n_nmf_iter=100, n_refine_iter=10,
                 unobserved_weight=1.0, n_restarts=2, reliability_prior=2.0, tol=1e-3,
                 random_state=0):
        self.n_clusters = n_clusters
        self.max_iter = max_iter
        self.n_refine_iter = n_refine_iter
        self.unobserved_weight = unobserved_weight
        self.n_nmf_iter = n_nmf_iter
        self.n_restarts = n_restarts
        self.reliability_prior = reliability_prior
        self.tol = tol
        self.random_state = random_state

    def _fit(self, data, n_clusters, rng):
        if not (np.isfinite(self.reliability_prior) and self.reliability_prior >= 0):
            raise ValueError(f"reliability_prior must be a finite number >= 0, got "
                             f"{self.reliability_prior!r} (SymNMFClustering)")
        k = n_clusters
        answered = data.answers_per_item() > 0
        rel = np.full(data.n_workers, 0.75)  # equal weights: round 1 is a vote count
        same_share = 1.0 / k
        hard, h = None, None
        self.n_iter_, self.converged_, self.history_ = 0, False, []
        for _ in range(max(int(self.max_iter), 1)):
            weight = np.log(np.clip(rel, 0.02, 0.98) / (1 - np.clip(rel, 0.02, 0.98)))
            lo, hi, ev, _ = pair_evidence(data, weight)
            share = np.clip(same_share, 1e-3, 1 - 1e-3)
            target = 1.0 / (1.0 + np.exp(-(ev + np.log(share / (1 - share)))))
            w = self._complete(data, target, lo, hi, share, k)
            h = procrustes_symnmf(w, int(self.n_nmf_iter), rng=rng, n_restarts=int(self.n_restarts))
            h = refine_memberships(h, lo, hi, ev, int(self.n_refine_iter),
                                   float(self.unobserved_weight))
            memb = _normalise(h, answered)
            new_rel = agreement_reliability(data, memb, float(self.reliability_prior),
                                            evidence=ev)
            new_hard = np.argmax(memb, axis=1)
            sizes = np.bincount(new_hard[answered], minlength=k) / max(answered.sum(), 1)
            same_share = float(np.sum(sizes ** 2))
            change = float(np.max(np.abs(new_rel - rel), initial=0.0))
            done = hard is not None and np.array_equal(new_hard, hard) and change <= self.tol
            hard, rel = new_hard, new_rel
            self.n_iter_ += 1
            self.history_.append(change)  # the largest change of a reliability
            if done:
                self.converged_ = True
                break
        h = np.where(answered[:, None], h, 0.0)
        return h, rel

    def _complete(self, data, target, lo, hi, fill, k):
        """Rank-k symmetric square root W (n x k) of the completed target matrix."""
        n = data.n_items
        vals, vecs = top_eigen(mean_filled_operator(data, target, lo, hi, fill), n, k)
        w = vecs[:, :k] * np.sqrt(np.maximum(vals[:k], 0.0))
        if w.shape[1] < k:
            w = np.hstack([w, np.zeros((n, k - w.shape[1]))])
        return w


def refine_memberships(h: np.ndarray, lo: np.ndarray, hi: np.ndarray, evidence: np.ndarray,
                       n_iter: int = 10, unobserved_weight: float = 1.0,
                       damping: float = 0.5) -> np.ndarray:
    r"""Memberships refined on the observed pairs by mean-field updates, started from ``h``.

    Under the model (one-hot memberships, one-coin annotators) the log-likelihood of the
    answers is :math:`\sum_{(i,j) \in \Omega} e_{ij} [c_i = c_j]` + const, with
    :math:`e_{ij} = \sum_a \operatorname{logit}(r_{w_a}) (2 y_a - 1)` the pair's signed
    evidence.  The mean-field update of item ``i``'s membership is
    :math:`m_i \propto \exp(\sum_j e_{ij} m_j - \mu p \bar e \sum_j m_j)`: the second term
    counts every pair never asked as ``mu`` times an average "different" (``p`` the sampling
    rate, :math:`\bar e` the mean absolute evidence), which keeps all items from falling
    into one cluster -- the same role as the small weight on unobserved entries in a
    masked SymNMF fit.  All rows are updated together and moved ``1 - damping`` of the way,
    against the oscillation of simultaneous updates.  O(|Omega| K) per sweep.
    """
    from .base import symmetric

    n, k = h.shape
    total = h.sum(axis=1, keepdims=True)
    m = np.where(total > 0, h / np.where(total > 0, total, 1.0), 1.0 / k)
    if n_iter <= 0 or len(lo) == 0:
        return m
    p = len(lo) / max(n * (n - 1) / 2, 1.0)
    emat = symmetric(lo, hi, evidence, n)
    repulsion = unobserved_weight * p * float(np.mean(np.abs(evidence)))
    for _ in range(int(n_iter)):
        score = emat @ m - repulsion * m.sum(axis=0)
        score -= score.max(axis=1, keepdims=True)
        new = np.exp(score)
        new /= new.sum(axis=1, keepdims=True)
        m = damping * m + (1.0 - damping) * new
    return m


def _normalise(h: np.ndarray, answered: np.ndarray) -> np.ndarray:
    """Rows of h on the simplex; rows without evidence get the mean of the others."""
    h = np.maximum(h, 0.0)
    total = h.sum(axis=1, keepdims=True)
    ok = (total[:, 0] > 0) & answered
    out = np.empty_like(h)
    out[ok] = h[ok] / total[ok]
    out[~ok] = out[ok].mean(axis=0) if ok.any() else 1.0 / h.shape[1]
    return out
