"""EigenRatio: worker reliabilities from two leading eigenvectors (Dalvi et al. 2013).

Dalvi, Dasgupta, Kumar & Rastogi, "Aggregating crowdsourced binary ratings", WWW 2013
(the ``EigenRatio`` routine of the ICML 2021 co-occurrence imputation code of Ibrahim & Fu
is this estimator).  One-coin workers: worker ``i`` is right with probability ``p_i`` and
otherwise answers one of the ``K - 1`` wrong classes uniformly.  With the normalised skill
``s_i = (K p_i - 1) / (K - 1)`` (0 for a random answerer, 1 for a perfect one, negative below
chance) and uniform classes, two workers sharing a task agree with probability
``1/K + (K-1)/K s_i s_j``.  Hence, summed over their ``n_ij`` shared tasks::

    C_ij = K/(K-1) sum_shared (1[a_i = a_j] - 1/K)  ≈  n_ij s_i s_j          (i != j)

When the co-labelling counts are close to rank one, ``n_ij ≈ c v_i v_j`` (random or regular
assignments), ``C ≈ c (v∘s)(v∘s)^T``: the leading eigenvector ``u`` of ``C`` is ``v∘s`` and
that of ``N = [n_ij]`` is ``v``, so ``s_i = (u_i / v_i) sqrt(lambda_C / lambda_N)`` — the ratio
of two eigenvectors, scale included.  For binary labels this is the paper's ``w_i = 2p_i - 1``
(the K-class form above is the same derivation with the one-coin agreement probability).

Details (documented departures):

* the unknown diagonals (``s_i^2 n_i``) are filled iteratively with the current estimate
  (rank-one completion, ``n_diag_iter`` rounds) instead of the paper's plain ``A^T A``;
* each connected component of the co-labelling graph is solved on its own (an eigenvector
  of a block-diagonal matrix lives on one block);
* the global sign is chosen so that the answer-weighted mean skill is positive (most answers
  come from better-than-random workers);
* workers left without an estimate (no co-labelled task, a tiny component, ``v_i ≈ 0``)
  get their skill from their agreement with the first-pass posterior;
* labels: the one-coin MAP rule ``argmax_c sum_i 1[a_i = c] log(p_i (K-1) / (1 - p_i))``
  (uniform class prior), optionally refined by ``n_em_iter`` Dawid-Skene EM rounds, which
  turn the one-coin reliabilities into full confusions (sensitivity and specificity for
  binary labels).

Orientation: ``confusions_[w, true, answered]`` (one-coin: ``p_w`` on the diagonal).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ..core.data import CrowdLabels
from ..core.stats import one_coin_confusions
from .moments import Degenerate, MomentThenEM

__all__ = ["EigenRatio"]

_DENSE_MAX = 3000  # components up to this many workers use a dense eigh


def _leading(mat: sp.spmatrix | np.ndarray) -> tuple[float, np.ndarray]:
    """Largest algebraic eigenpair of a symmetric matrix (deterministic sign: sum >= 0)."""
    n = mat.shape[0]
    if n <= _DENSE_MAX:
        dense = mat.toarray() if sp.issparse(mat) else mat
        vals, vecs = np.linalg.eigh(dense)
        lam, vec = vals[-1], vecs[:, -1]
    else:
        from scipy.sparse.linalg import eigsh

        vals, vecs = eigsh(mat, k=1, which="LA", v0=np.ones(n))
        lam, vec = vals[0], vecs[:, 0]
    if vec.sum() < 0:
        vec = -vec
    return float(lam), vec


class EigenRatio(MomentThenEM):
    """EigenRatio one-coin reliabilities (Dalvi et al. 2013), MAP labels, optional DS EM.

    Parameters
    ----------
    n_diag_iter : int, default 10
        Rounds of diagonal completion of the agreement matrix.
    min_component : int, default 3
        Components of the co-labelling graph with fewer workers get no eigen estimate.
    n_em_iter : int, default 0
        DS EM rounds after the EigenRatio estimate.
    tol, alpha, diag_alpha, prior_alpha, compare_with_mv
        EM settings, as for :class:`~crowdlearn.aggregation.multispa.MultiSPA`.
    random_state : int, default 0
        Tie-breaking seed (the estimator is deterministic).

    Attributes
    ----------
    worker_skill_ : ndarray (n_workers,), normalised skill ``s_i`` of the eigen step.
    confusions_, priors_, skills_, moment_confusions_, init_, fallback_ : as for MultiSPA.
    """

    _max_classes = 10_000  # the estimator is O(W^2) whatever K

    def __init__(
        self,
        n_diag_iter: int = 10,
        min_component: int = 3,
        n_em_iter: int = 0,
        tol: float = 0.0,
        alpha: float = 0.0,
        diag_alpha: float = 1.0,
        prior_alpha: float = 1.0,
        compare_with_mv: bool = True,
        random_state: int | None = 0,
    ) -> None:
        self.n_diag_iter = n_diag_iter
        self.min_component = min_component
        self.n_em_iter = n_em_iter
        self.tol = tol
        self.alpha = alpha
        self.diag_alpha = diag_alpha
        self.prior_alpha = prior_alpha
        self.compare_with_mv = compare_with_mv
        self.random_state = random_state

    def _skills(self, data: CrowdLabels) -> np.ndarray:
        k, n_w = data.n_classes, data.n_workers
        any_ans = sp.csr_matrix(
            (np.ones(data.n_labels), (data.task, data.worker)), shape=(data.n_tasks, n_w)
        )
        any_ans.data[:] = 1.0  # repeated answers of one worker count once here
        any_ans.sum_duplicates()
        any_ans.data[:] = 1.0
        counts = (any_ans.T @ any_ans).tocsr()
        inc = data.incidence()  # (tasks, W*K) one-hot answers
        cooc = (inc.T @ inc).tocoo()
        same = (cooc.row % k) == (cooc.col % k)
        agree = sp.csr_matrix(
            (cooc.data[same], (cooc.row[same] // k, cooc.col[same] // k)), shape=(n_w, n_w)
        )
        c_mat = (agree - counts / k) * (k / (k - 1.0))
        c_mat = sp.csr_matrix(c_mat)
        c_mat.setdiag(0.0)
        counts.setdiag(0.0)
        c_mat.eliminate_zeros()
        counts.eliminate_zeros()
        skill = np.full(n_w, np.nan)
        answers = data.labels_per_worker()
        _, comp = connected_components(counts, directed=False)
        # each component's workers in increasing code order, only the components big enough
        # (one pass instead of a scan of every worker per component: many one-answer workers
        # make thousands of tiny components)
        order = np.argsort(comp, kind="stable")
        sizes = np.bincount(comp)
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        for c in np.flatnonzero(sizes >= max(2, self.min_component)):
            members = order[bounds[c]:bounds[c + 1]]
            cm = c_mat[members][:, members].toarray() if len(members) <= _DENSE_MAX else c_mat[members][:, members]
            nm = counts[members][:, members]
            s = np.zeros(len(members))
            n_i = np.asarray(nm.sum(axis=1)).ravel()
            # the co-labelling counts with their diagonal filled do not change over the rounds
            nm_f = nm + sp.diags(n_i / max(len(members) - 1, 1))
            lam_n, v = _leading(nm_f)
            for _ in range(max(1, self.n_diag_iter)):
                # fill the unknown diagonal with its model value n_i s_i^2 / (W - 1) scale
                filled = cm.copy()
                diag = s**2 * n_i / max(len(members) - 1, 1)
                if sp.issparse(filled):
                    filled = filled + sp.diags(diag)
                else:
                    filled[np.diag_indices_from(filled)] = diag
                lam_c, u = _leading(filled)
                if lam_c <= 0 or lam_n <= 0:
                    break
                ok = np.abs(v) > 1e-8 * np.abs(v).max()
                s = np.zeros(len(members))
                s[ok] = u[ok] / v[ok] * np.sqrt(lam_c / lam_n)
            if not np.any(s):
                continue
            # global sign: the answer-weighted skill must be positive
            if (s * answers[members]).sum() < 0:
                s = -s
            skill[members] = s
        return skill

    def _moment_step(self, data: CrowdLabels):
        k, n_w = data.n_classes, data.n_workers
        skill = self._skills(data)
        known = np.isfinite(skill)
        if not known.any():
            raise Degenerate("no worker shares tasks with enough others for the eigen step")
        lo, hi = -1.0 / (k - 1) + 1e-3, 1.0 - 1e-3
        s = np.clip(np.where(known, skill, 0.0), lo, hi)
        acc = s * (k - 1) / k + 1.0 / k
        # first MAP pass with the estimated workers only; the others from agreement with it
        weight = np.log(acc * (k - 1) / (1.0 - acc))
        weight[~known] = 0.0
        scores = np.zeros((data.n_tasks, k))
        np.add.at(scores, (data.task, data.label), weight[data.worker])
        post = np.exp(scores - scores.max(axis=1, keepdims=True))
        post /= post.sum(axis=1, keepdims=True)
        if (~known).any():
            hit = np.bincount(data.worker, weights=post[data.task, data.label], minlength=n_w)
            tot = np.bincount(data.worker, minlength=n_w).astype(float)
            p_est = (hit + 1.0) / (tot + 2.0)  # Laplace-smoothed agreement with the posterior
            acc[~known] = np.clip(p_est[~known], 1.0 / k * (1 - 1e-3), 1 - 1e-3)
        self.worker_skill_ = np.where(known, s, (k * acc - 1) / (k - 1))
        # one-coin confusions are symmetric: the same in column (true-class) orientation
        return one_coin_confusions(acc, k), np.full(k, 1.0 / k)
