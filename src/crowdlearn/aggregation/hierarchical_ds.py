"""Hierarchical Dawid-Skene: worker confusions shrunk toward a population learned from the data.

Model (Dawid & Skene, 1979, with the hierarchical prior of Kim & Ghahramani, 2012, "Bayesian
classifier combination", AISTATS, and Venanzi et al., 2014, "Community-based Bayesian
aggregation models for crowdsourcing", WWW, whose community model this is with one
community)::

    y_n ~ Cat(pi)
    confusions_[w, j, :] ~ Dirichlet(alpha_[j, :])             (one population row per class)
    answer_{n,w} | y_n = j ~ Cat(confusions_[w, j, :])

``alpha_[j, :] = s_j mu_j`` holds both the population confusion ``mu_j`` (where a typical
worker's answers go when the truth is ``j``) and the strength ``s_j`` of the shrinkage.
Neither is a fixed constant: both are set by **empirical Bayes**, maximising the marginal
(Dirichlet-multinomial) likelihood of the workers' expected counts::

    alpha_[j] = argmax_a  sum_w log DirMult(c_{w,j,:} | a),   c_{w,j,l} = sum_{n: answer_{n,w}=l} q_n(j)

(Minka, 2000, "Estimating a Dirichlet distribution": the fixed point
``a_l <- a_l sum_w [psi(c_wl + a_l) - psi(a_l)] / sum_w [psi(C_w + A) - psi(A)]``), inside
every M-step.  A worker's confusion is then its posterior mean
``(c_{w,j,:} + alpha_[j]) / (C_{w,j} + s_j)``: a worker with few answers borrows the
population's row (which can be one-coin-like or class-biased, as the crowd is), a worker
with many keeps its own matrix.  The strength adapts per dataset: on crowds of similar
workers ``s_j`` grows and the model approaches one shared confusion; on heterogeneous crowds
it shrinks toward plain Dawid-Skene.  This replaces ``ds``'s fixed ``diag_alpha``.  Each
population row keeps its diagonal at least the mean of its off-diagonal cells
(:func:`diagonal_floor`): the latent class ``j`` is one whose label a typical worker gives
more often than a random answerer would, which rules out catch-all classes.

Initialisation (the signal-processing tutorial's recommendation): EM is run from majority
vote and from a moment estimate (Spectral-DS's moments, one E-step, no EM), and the run with
the higher collapsed evidence is kept (a later start that is clearly behind after
:data:`SCREEN_ITER` iterations, at equal effort, is abandoned there)::

    L(q, alpha, pi) = sum_n sum_j q_n(j) [log pi_j - log q_n(j)] + sum_{w,j} log DirMult(c_{w,j,:} | alpha_[j])

(worker confusions integrated out; with soft counts ``c`` this is the usual collapsed
approximation, not a strict bound); a later start must beat an earlier one by
:data:`EVIDENCE_MARGIN` nats.  ``starts_`` lists each start's evidence.  Starts that
cannot run (the moment step is undefined on the input, too many classes) are skipped and
recorded.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy.special import digamma, factorial, gammaln, polygamma

from ..core import kernels
from ..core.data import CrowdLabels
from ..core.stats import clamp_to_gold, vote_fractions
from .dawid_skene import DawidSkene

__all__ = ["HierarchicalDawidSkene", "fit_dirichlet_rows", "dirichlet_multinomial_loglik", "diagonal_floor"]

#: numerical floor and ceiling of a learned pseudo-count (a guard, not a tuned value: an
#: off-diagonal cell no worker ever uses drives its estimate to 0, and a crowd of identical
#: workers drives the strength to infinity)
_MIN_PSEUDO, _MAX_STRENGTH = 1e-6, 1e6

#: fixed-point steps of the population pseudo-counts per EM iteration (warm-started)
EB_STEPS_PER_ITER = 5

#: EM iterations after which a later start is compared with the kept one at equal effort:
#: a start whose evidence is then below the kept start's evidence after as many iterations
#: by more than :data:`EVIDENCE_MARGIN` is abandoned; the others run on to ``max_iter``.
#: The full runs of the default two starts end within the margin of each other on most
#: crowds, and the second full run doubled the cost of every fit; only a start that is
#: clearly behind at equal effort and would still overtake by more than the margin is lost
#: (the "small EM" idea of Biernacki, Celeux & Govaert, 2003, "Choosing starting values for
#: the EM algorithm", Computational Statistics & Data Analysis 41, used only to abandon
#: laggards).  A speed setting, not tuned on accuracy.
SCREEN_ITER = 20

#: start names: majority vote and the moment estimate
STARTS = ("mv", "spectral")

#: a later start replaces an earlier one only if its log evidence is higher by more than this
#: (a Bayes factor of e, "not worth more than a bare mention" on Kass & Raftery's 1995 scale):
#: starts that reach the same optimum by different paths differ by less, and the choice must
#: not flip on rounding or on how ids happen to be numbered
EVIDENCE_MARGIN = 1.0


def fit_dirichlet_rows(counts: np.ndarray, alpha: np.ndarray, max_iter: int = 50, tol: float = 1e-6,
                       backend: str = "numpy") -> np.ndarray:
    """Empirical-Bayes Dirichlet per true class from count rows (Minka's fixed point).

    Parameters
    ----------
    counts : ndarray (W, K, K)
        ``counts[w, j, l]``: (soft) number of times worker ``w`` answered ``l`` when the truth
        was ``j``.
    alpha : ndarray (K, K)
        Starting pseudo-counts (warm start), one Dirichlet per row ``j``.
    backend : {"numpy", "numba"}
        "numba" sums the fixed point's digamma terms in compiled passes: zero counts are
        skipped, counts small against their pseudo-count enter through power sums of a
        Taylor series computed once per call (while the pseudo-counts stay above half their
        starting value), the others through digammas
        (:func:`crowdlearn.core.compiled.dirichlet_rows_split`): the same sums to about 1e-8
        relative, several times faster on many sparse workers.

    Returns
    -------
    ndarray (K, K)
        ``argmax_a sum_w log DirMult(counts[w, j, :] | a_j)`` for every ``j``.  Rows of
        workers who never saw class ``j`` carry no information and drop out of both sums.
    """
    a = np.maximum(np.asarray(alpha, float).copy(), _MIN_PSEUDO)
    kern = kernels.compiled_kernels() if backend == "numba" else None
    totals = counts.sum(axis=2) if kern is None else None  # (W, K); the split sums its own
    split = None
    for _ in range(max_iter):
        big_a = a.sum(axis=1)  # (K,)
        if kern is not None:
            if split is None or np.any(a < split["a_low"]) or np.any(big_a < split["big_low"]):
                split = _split_counts(kern, counts, a)
            num, den = _split_sums(kern, split, a, big_a)
        else:
            num = (digamma(counts + a) - digamma(a)).sum(axis=0)  # (K, K)
            den = (digamma(totals + big_a) - digamma(big_a)).sum(axis=0)  # (K,)
        new = a * num / np.maximum(den, 1e-300)[:, None]
        new = np.where(den[:, None] > 0, new, a)  # a class no worker has seen keeps its row
        new = np.maximum(new, _MIN_PSEUDO)
        scale = np.minimum(1.0, _MAX_STRENGTH / new.sum(axis=1))
        new *= scale[:, None]
        done = np.max(np.abs(new - a) / a) < tol
        a = new
        if done:
            break
    return a


def _psi_taylor(x: np.ndarray, terms: int) -> np.ndarray:
    """``psi^(n)(x) / n!`` for ``n = 1 .. terms`` on a new last axis: the Taylor coefficients
    of the digamma for counts small against ``x``."""
    n = np.arange(1, terms + 1)
    return polygamma(n, np.asarray(x, float)[..., None]) / factorial(n)


def _split_counts(kern, counts: np.ndarray, a: np.ndarray) -> dict:
    """Small counts as power sums, the others listed (``kern.dirichlet_rows_split``), valid
    while the pseudo-counts stay above half of ``a``: the fixed point's next steps then cost
    O(K^2 + listed counts) instead of O(W K^2).  ``counts`` (W, K true, K answered) is read
    in the [w, answered, true] layout, which is how the M-step's counts arrive (no copy)."""
    k, terms = a.shape[0], kern.TAYLOR_TERMS
    a_low = a / 2.0
    big_low = a.sum(axis=1) / 2.0
    powers, big_powers = np.empty((k, k, terms)), np.empty((k, terms))
    size = counts.shape[0] * k
    cell_c, cell_jl = np.empty(size * k), np.empty(size * k, dtype=np.int64)
    tot_t, tot_j = np.empty(size), np.empty(size, dtype=np.int64)
    n_cells, n_tots = kern.dirichlet_rows_split(np.ascontiguousarray(counts.transpose(0, 2, 1)), a_low, big_low,
                                                powers, big_powers, cell_c, cell_jl, tot_t, tot_j)
    return dict(a_low=a_low, big_low=big_low, powers=powers, big_powers=big_powers,
                cells=(cell_c[:n_cells].copy(), cell_jl[:n_cells].copy()),
                tots=(tot_t[:n_tots].copy(), tot_j[:n_tots].copy()))


def _split_sums(kern, split: dict, a: np.ndarray, big_a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The fixed point's ``num`` (K, K) and ``den`` (K,) sums at ``a`` from a split."""
    terms = kern.TAYLOR_TERMS
    num, den = np.empty_like(a), np.empty(a.shape[0])
    (cell_c, cell_jl), (tot_t, tot_j) = split["cells"], split["tots"]
    kern.dirichlet_rows_listed(cell_c, cell_jl, len(cell_c), tot_t, tot_j, len(tot_t), a, big_a, num, den)
    num += (_psi_taylor(a, terms) * split["powers"]).sum(axis=-1)
    den += (_psi_taylor(big_a, terms) * split["big_powers"]).sum(axis=-1)
    return num, den


def diagonal_floor(alpha: np.ndarray) -> np.ndarray:
    """Raise each row's diagonal pseudo-count to the mean of the row's off-diagonal ones.

    The identifiability constraint of the population: when the truth is ``j``, a typical
    worker answers ``j`` at least as often as it gives the average wrong label (better than
    a random answerer on every class).  Without it a class that is rarely answered (a typo,
    a one-off label) can become a catch-all for ambiguous tasks: its population row learns
    the crowd's overall answer mix, never its own label, and EM then assigns it every task
    whose answers disagree.  The stronger constraint, a diagonal at least every off-diagonal
    cell, would also forbid a class that is genuinely answered as one other class more often
    than as itself (two look-alike classes), which a crowd can have and Dawid-Skene can
    still separate.  Rows that satisfy the constraint are returned unchanged.
    """
    a = np.array(alpha, dtype=float, copy=True)
    k = a.shape[0]
    if k < 2:
        return a
    diag = np.diag(a)
    np.fill_diagonal(a, np.maximum(diag, (a.sum(axis=1) - diag) / (k - 1)))
    return a


def dirichlet_multinomial_loglik(counts: np.ndarray, alpha: np.ndarray) -> float:
    """``sum_{w,j} log DirMult(counts[w, j, :] | alpha[j])`` of answer *sequences* (no multinomial coefficient)."""
    big_a = alpha.sum(axis=1)
    totals = counts.sum(axis=2)
    return float(
        (gammaln(big_a) - gammaln(totals + big_a)).sum()
        + (gammaln(counts + alpha) - gammaln(alpha)).sum()
    )


class HierarchicalDawidSkene(DawidSkene):
    """Dawid-Skene with worker confusions shrunk toward a learned population confusion.

    See the module docstring for the model; the population pseudo-counts ``alpha_`` are
    learned by empirical Bayes in every M-step, so there is no smoothing constant to choose.

    When not to use it: on sparse crowds (one to three answers per task) with many spammers
    or workers who always give one class.  There the empirical Bayes, fitted to expected
    counts the pooled model itself produced, keeps raising the strength, and the fit drifts
    toward a crowd that answers at random; ``ds`` or ``auto`` hold up (benchmarks/RESULTS.md,
    section ``hds-sparse-crowds``).

    Parameters
    ----------
    max_iter, tol, backend, random_state, n_jobs :
        As :class:`~crowdlearn.aggregation.DawidSkene`.
    prior_alpha : float, default 1.0
        Dirichlet pseudo-count of the class prior ``pi`` (Laplace smoothing of one
        distribution; empirical Bayes has a single draw to learn it from, so it is not
        learned).
    starts : sequence of {"mv", "spectral", "onecoin"}, default ("mv", "spectral")
        EM starts, in order of preference; the fit with the highest collapsed evidence is kept
        (a later start must win by :data:`EVIDENCE_MARGIN` nats).  ``"spectral"`` is
        Spectral-DS's moment estimate (Zhang et al., 2014) turned into posteriors by one
        E-step; ``"onecoin"`` the one-coin model's posteriors.  A start given to ``fit`` as
        ``init=`` replaces them.

    Attributes
    ----------
    alpha_ : ndarray (n_classes, n_classes)
        Learned population pseudo-counts ``[true, answered]``.
    population_ : DataFrame
        The population confusion ``alpha_ / alpha_.sum(1)`` (true x answered).
    strength_ : Series
        ``s_j = alpha_[j].sum()`` per true class: how many answers' worth of weight the
        population carries against a worker's own counts.
    evidence_ : float
        Collapsed evidence of the kept fit.
    starts_ : DataFrame
        One row per start: ``evidence``, ``n_iter``, ``error`` (why a start was skipped, or
        that it was abandoned, more than :data:`EVIDENCE_MARGIN` behind the kept one after
        :data:`SCREEN_ITER` iterations; its evidence is then the one at that point).
    init_ : str
        The start that was kept.
    confusions_, priors_, skills_, history_ :
        As :class:`~crowdlearn.aggregation.DawidSkene`.
    """

    def __init__(
        self,
        max_iter: int = 100,
        tol: float = 1e-7,
        prior_alpha: float = 1.0,
        starts: Any = STARTS,
        backend: str = "auto",
        random_state: int | None = 0,
        n_jobs: int | None = None,
    ) -> None:
        self.max_iter = max_iter
        self.tol = tol
        self.prior_alpha = prior_alpha
        self.starts = starts
        self.backend = backend
        self.random_state = random_state
        self.n_jobs = n_jobs

    # DawidSkene's fixed pseudo-counts are replaced by the learned ones (class constants, not
    # parameters: ``_pseudo_counts`` then holds only a ``confusion_prior`` given to ``fit``)
    alpha = 0.0
    diag_alpha = 0.0

    def partial_fit(self, labels: Any, **kwargs: Any):
        raise NotImplementedError(
            "hds learns its population prior from all answers at once; for online updates use "
            "'ds' (DawidSkene.partial_fit)"
        )

    def _fit(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None) -> np.ndarray:
        starts = [("init", init)] if init is not None else self._starts(data)
        runnable = sum(not isinstance(start, str) for _, start in starts)
        screen = min(self.max_iter, SCREEN_ITER) if runnable > 1 else self.max_iter
        rows, best = {}, None
        for name, start in starts:
            if isinstance(start, str):  # a start that could not be computed: its reason
                rows[name] = (-np.inf, 0, start)
                continue
            self.history_, self.n_iter_ = [], 0
            self._alpha = np.ones((data.n_classes, data.n_classes))
            post = super()._fit(data, gold, clamp_to_gold(np.array(start, dtype=float), gold), max_iter=screen)
            early = self._evidence(post, self._counts(data, post))
            if best is not None and early < best[4] - EVIDENCE_MARGIN:
                why = f"abandoned: behind the {best[1]!r} start after {self.n_iter_} EM iteration(s)"
                rows[name] = (early, self.n_iter_, why)
                continue
            if not self.converged_ and self.n_iter_ < self.max_iter:
                # on from the last E-step: the same fit as one uninterrupted run
                post = super()._fit(data, gold, post, max_iter=self.max_iter - self.n_iter_, resume=True)
            evidence = self._evidence(post, self._counts(data, post))
            rows[name] = (evidence, self.n_iter_, "")
            if best is None or evidence > best[0] + EVIDENCE_MARGIN:
                best = (evidence, name, post, self._snapshot(), early)
        if best is None:  # pragma: no cover - "mv" always runs
            raise RuntimeError("no EM start could run")
        self.starts_ = pd.DataFrame.from_dict(rows, orient="index", columns=["evidence", "n_iter", "error"])
        evidence, self.init_, post, state, _ = best
        self.__dict__.update(state)
        self.evidence_ = float(evidence)
        self.alpha_ = self._alpha
        self.population_ = pd.DataFrame(
            self._alpha / self._alpha.sum(axis=1, keepdims=True), index=data.classes, columns=data.classes
        )
        self.strength_ = pd.Series(self._alpha.sum(axis=1), index=data.classes, name="strength")
        del self._alpha
        return post

    def _snapshot(self) -> dict:
        keys = ("_alpha", "_log_table", "_log_prior", "confusions_", "priors_", "skills_", "history_", "n_iter_", "converged_")
        return {k: getattr(self, k) for k in keys}

    def _starts(self, data: CrowdLabels) -> list:
        names = [self.starts] if isinstance(self.starts, str) else list(self.starts)
        if not names:
            raise ValueError("starts is empty")
        out = []
        for name in names:
            if name == "mv":
                out.append((name, vote_fractions(data)))
            elif name in ("spectral", "onecoin"):
                out.append((name, _start_posteriors(name, data, self.random_state)))
            else:
                raise ValueError(f"unknown start {name!r}; use 'mv', 'spectral' or 'onecoin'")
        return out

    def _m_step(self, data, post, pseudo, backend, work=None, threads=1):
        k, m = data.n_classes, data.n_workers
        buf = None if work is None else work["counts"]
        counts, class_counts = kernels.mstep(data, post, backend, out=buf, n_threads=threads)
        if work is not None:
            work["counts"] = counts
        # a few warm-started fixed-point steps per M-step: each raises the Dirichlet-multinomial
        # likelihood (Minka's update maximises a lower bound), so EM and empirical Bayes climb
        # together (a generalised EM) instead of solving the inner problem to the end each time
        self._alpha = diagonal_floor(
            fit_dirichlet_rows(counts.reshape(m, k, k).transpose(0, 2, 1), self._alpha, max_iter=EB_STEPS_PER_ITER,
                               backend=backend)
        )
        log_table = self._table_from_counts(counts, self._alpha + pseudo, backend)
        class_counts = class_counts + self.prior_alpha
        log_prior = np.log(np.maximum(class_counts / class_counts.sum(), 1e-300))
        return log_table, log_prior

    @staticmethod
    def _counts(data: CrowdLabels, post: np.ndarray) -> np.ndarray:
        k, m = data.n_classes, data.n_workers
        counts, _ = kernels.mstep(data, post, "numpy")
        return counts.reshape(m, k, k).transpose(0, 2, 1)

    def _evidence(self, post: np.ndarray, counts: np.ndarray) -> float:
        q = np.clip(post, 1e-300, 1.0)
        task_terms = float((post * (self._log_prior[None, :] - np.log(q))).sum())
        return task_terms + dirichlet_multinomial_loglik(counts, self._alpha)


def _start_posteriors(name: str, data: CrowdLabels, random_state) -> np.ndarray | str:
    """Posteriors of a non-vote start, or the reason it cannot run on ``data``."""
    if name == "onecoin":
        from .dawid_skene import OneCoinDawidSkene

        est = OneCoinDawidSkene(random_state=random_state)
    else:
        from .spectral_ds import SpectralDawidSkene

        est = SpectralDawidSkene(n_em_iter=0, compare_with_mv=False, random_state=random_state)
    try:
        est.fit(data)
    except ValueError as exc:  # e.g. too many classes for a dense table
        return f"{type(exc).__name__}: {exc}"
    if getattr(est, "fallback_", None) is not None:
        return f"moment step undefined: {est.fallback_}"
    return est.probas_.to_numpy()
