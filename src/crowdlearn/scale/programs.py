"""Each EM-type method written as rounds of "map over partitions, then sum the statistics".

A method whose E-step is local to a task and whose M-step needs only sums over answers can
run on any engine that can (1) apply a function to every partition of the answers, all
answers of a task being in one partition, and (2) add up what the partitions return.  A
:class:`Program` is that method's fit written once for all engines, as a generator:

* it yields a :class:`Round` — a module-level function ``step(block, state, params) ->
  (state, statistics)`` and the parameters to broadcast;
* the engine runs ``step`` on every partition (``block`` the partition's answers as a
  :class:`~crowdlearn.CrowdLabels` with local task codes and global worker/class codes,
  ``state`` what the previous step left there), adds up the statistics (:func:`combine`) and
  sends the sum back into the generator;
* the generator's client-side code is the M-step (and the convergence test); at the end it
  sets the estimator's worker model, and :meth:`Program.output` is the step that turns each
  partition into its posteriors.

The arithmetic of every step is the in-memory method's own (the same kernels and helper
functions), so an engine's fit differs from the in-memory one only in the order the
partitions' statistics are summed: posteriors agree to rounding and labels are the same
(ties are broken by task id, :func:`~crowdlearn.core.stats.argmax_random_ties`).

Supported: ``mv`` and ``wawa`` (two passes); ``zbs`` (a pass per iteration); ``wmv`` (one round per refinement of the
weights, the posteriors kept in the partitions); ``ds``, ``onecoin``, ``ccds`` (one program:
the M-step is the estimator's own ``_table_from_counts``); and ``glad`` (its abilities take
Newton steps on summed per-worker gradients; its task easiness is local to the partition and
lives in the partition's state); ``mace`` (each random restart's rounds in turn, the best
kept).
"""

from __future__ import annotations

from typing import Any, Callable, Generator, NamedTuple

import numpy as np
import pandas as pd

from ..core import kernels
from ..core.data import CrowdLabels
from ..core.stats import confusions_from_log_table, expected_skills, split_ties, vote_fractions, weighted_votes

__all__ = ["Round", "Program", "combine", "program_for", "supported_methods"]

_TINY = 1e-300


class Round(NamedTuple):
    """One map over the partitions: ``step(block, state, params) -> (state, statistics)``.

    ``statistics`` is a dict of arrays; the engine adds them up over the partitions (keys
    starting with ``max_`` take the maximum instead, :func:`combine`).
    """

    step: Callable[[CrowdLabels, Any, Any], tuple[Any, dict]]
    params: Any = None


def combine(a: dict, b: dict) -> dict:
    """Sum of two partitions' statistics (element-wise; ``max_*`` keys: maximum)."""
    out = {}
    for key, value in a.items():
        other = b[key]
        out[key] = np.maximum(value, other) if key.startswith("max_") else value + other
    return out


def combine_all(parts: list[dict]) -> dict:
    """Pairwise tree sum of a list of statistics (the order an engine's tree reduction uses)."""
    parts = [p for p in parts if p is not None]
    if not parts:
        raise ValueError("no partition holds any answer")
    while len(parts) > 1:
        parts = [combine(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    return parts[0]


class Program:
    """A method's fit as rounds (see the module docstring).

    Parameters
    ----------
    estimator : the (unfitted) estimator whose parameters the fit uses and whose worker
        model attributes it sets.
    workers, classes : Index
        The global codes (:class:`~crowdlearn.scale.coding.Coding`).
    threads : int
        Threads the kernels may use inside one partition.
    """

    #: whether the steps keep per-partition state between rounds (engines then keep it)
    stateful = False

    def __init__(self, estimator, workers: pd.Index, classes: pd.Index, threads: int = 1) -> None:
        self.est = estimator
        self.workers = workers
        self.classes = classes
        self.threads = threads

    @property
    def n_workers(self) -> int:
        return len(self.workers)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def rounds(self) -> Generator[Round, dict, None]:
        raise NotImplementedError

    def output(self) -> Round:
        """The step whose "statistics" are the partition's ``(posteriors, extra columns)``."""
        raise NotImplementedError

    def collect(self, extras: dict[str, pd.Series]) -> None:
        """Per-task attributes from the extra output columns (when results are collected)."""


# ---------------------------------------------------------------------- votes
def _vote_agreement(block: CrowdLabels, state: Any, weights: np.ndarray | None) -> tuple[Any, dict]:
    """Per worker: answers, and answers agreeing with the (weighted) vote's consensus."""
    consensus = split_ties(vote_fractions(block, weights))
    hits = np.bincount(block.worker, weights=consensus[block.task, block.label], minlength=block.n_workers)
    n = np.bincount(block.worker, minlength=block.n_workers).astype(np.float64)
    return state, {"hits": hits, "n": n}


def _vote_output(block: CrowdLabels, state: Any, weights: np.ndarray | None):
    return state, (vote_fractions(block, weights), {})


def _agreement(stats: dict) -> np.ndarray:
    """``agreement_with``'s share, from summed hits and counts (0.5 for a worker without answers)."""
    n = stats["n"]
    return np.divide(stats["hits"], n, out=np.full(n.shape, 0.5), where=n > 0)


class MajorityVoteProgram(Program):
    """``mv``: one pass for the workers' agreement with the majority, one for the votes."""

    weighted = False

    def rounds(self):
        stats = yield Round(_vote_agreement)
        self.skills = _agreement(stats)
        self.est.skills_ = pd.Series(self.skills, index=self.workers, name="skill")

    def output(self) -> Round:
        return Round(_vote_output, self.skills if self.weighted else None)


class WawaProgram(MajorityVoteProgram):
    """``wawa``: the vote weighted by each worker's agreement with the majority."""

    weighted = True


class ZeroBasedSkillProgram(Program):
    """``zbs``: :meth:`ZeroBasedSkill._fit` with the answers partitioned: one round per
    iteration (every worker's agreement with the vote weighted by the current skills)."""

    def rounds(self):
        est = self.est
        skills = np.zeros(self.n_workers)
        lr = est.lr_init
        est.converged_ = False
        for it in range(est.n_iter):
            stats = yield Round(_vote_agreement, skills if it else None)
            new = skills + lr * (_agreement(stats) - skills)
            delta = np.abs(new - skills).max(initial=0.0)
            skills = new
            est.n_iter_ = it + 1
            if (it + 1) % est.lr_steps_to_reduce == 0:
                lr *= est.lr_reduce_factor
            if delta < est.eps:
                est.converged_ = True
                break
        self.skills = skills
        est.skills_ = pd.Series(skills, index=self.workers, name="skill")

    def output(self) -> Round:
        return Round(_vote_output, self.skills)


# ------------------------------------------------------- weighted majority vote
def _wmv_start(block: CrowdLabels, state: Any, params: Any) -> tuple[dict, dict]:
    proba = vote_fractions(block)
    n = np.bincount(block.worker, minlength=block.n_workers).astype(np.float64)
    return {"proba": proba}, {"n": n, **_consensus_hits(block, proba)}


def _consensus_hits(block: CrowdLabels, proba: np.ndarray) -> dict:
    consensus = split_ties(proba)
    return {"hits": np.bincount(block.worker, weights=consensus[block.task, block.label], minlength=block.n_workers)}


def _wmv_update(block: CrowdLabels, state: dict, weights: np.ndarray) -> tuple[dict, dict]:
    """The weighted vote's posteriors, whether any moved (``np.allclose`` as in memory), and
    the next round's agreement counts."""
    from scipy.special import softmax

    new = softmax(weighted_votes(block, weights), axis=1)
    moved = float(not np.allclose(new, state["proba"], atol=1e-10))
    return {"proba": new}, {"max_moved": np.array([moved]), **_consensus_hits(block, new)}


def _wmv_output(block: CrowdLabels, state: dict, params: Any):
    if params is not None:  # fixed weights
        return state, (vote_fractions(block, params), {})
    return state, (state["proba"], {})


class WeightedMajorityVoteProgram(Program):
    """``wmv``: :meth:`WeightedMajorityVote._fit` with the answers partitioned (learned
    log-odds weights: one round per refinement; fixed weights: the weighted vote)."""

    stateful = True

    def rounds(self):
        est, k = self.est, self.n_classes
        self.fixed = None
        if est.weights is not None:
            w = pd.Series(est.weights, dtype=float).reindex(self.workers).fillna(est.default_weight)
            if np.any(w.to_numpy() < 0) or not np.all(np.isfinite(w.to_numpy())):
                raise ValueError("weights must be finite and non-negative")
            self.fixed = w.to_numpy()
            est.weights_ = w.rename("weight")
            est.skills_ = est.weights_.rename("skill")
            return
        stats = yield Round(_wmv_start)
        n = stats["n"]
        w = np.ones(self.n_workers)
        p = np.full(self.n_workers, 0.5)
        for it in range(est.n_iter):
            p = np.clip((stats["hits"] + 1.0) / (n + 2.0), 1e-3, 1 - 1e-3)
            w = np.log(max(k - 1, 1) * p / (1 - p)) if k > 1 else np.zeros_like(p)
            stats = yield Round(_wmv_update, w)
            est.n_iter_ = it + 1
            if not stats["max_moved"][0]:
                break
        est.weights_ = pd.Series(w, index=self.workers, name="weight")
        est.skills_ = pd.Series(p, index=self.workers, name="skill")

    def output(self) -> Round:
        return Round(_wmv_output, self.fixed)


# ---------------------------------------------------------------- Dawid-Skene
def _ds_init(block: CrowdLabels, state: Any, params: Any) -> tuple[Any, dict]:
    post = vote_fractions(block)
    counts, totals = kernels.mstep(block, post, kernels.resolve_backend(params, block.n_labels))
    return state, {"counts": counts, "totals": totals, "n_answers": np.array([float(block.n_labels)])}


def _ds_iteration(block: CrowdLabels, state: Any, params: tuple) -> tuple[Any, dict]:
    log_table, log_prior, backend, threads = params
    post, ll = kernels.estep(block, log_table, log_prior, backend, n_threads=threads)
    counts, totals = kernels.mstep(block, post, backend, n_threads=threads)
    return state, {"counts": counts, "totals": totals, "ll": np.array([ll])}


def _ds_output(block: CrowdLabels, state: Any, params: tuple | None):
    if params is None:  # max_iter=0: the posteriors are the starting vote shares
        return state, (vote_fractions(block), {})
    log_table, log_prior, backend, threads = params
    post, _ = kernels.estep(block, log_table, log_prior, backend, n_threads=threads)
    return state, (post, {})


class DawidSkeneProgram(Program):
    """``ds``, ``onecoin``, ``ccds``: :meth:`DawidSkene._fit` with the answers partitioned.

    Per iteration one round: the partition's E-step under the broadcast tables, then its
    soft counts (``W*K x K``) and class totals, summed over partitions; the M-step is the
    estimator's own ``_table_from_counts`` on the client.  The final posteriors are
    recomputed by the output step from the final tables, exactly as the last E-step did.
    """

    def rounds(self):
        from ..aggregation.dawid_skene import check_table_size

        est, k, m = self.est, self.n_classes, self.n_workers
        if est.max_iter < 0:
            raise ValueError(f"max_iter must be >= 0, got {est.max_iter}")
        check_table_size(type(est).__name__, m, k)
        pseudo = est._pseudo_counts(k, m)
        stats = yield Round(_ds_init, est.backend)
        n_answers = int(stats["n_answers"][0])
        backend = kernels.resolve_backend(est.backend, n_answers)
        est.converged_ = False
        ll_prev = -np.inf
        tables = self._tables(stats, pseudo, backend)
        self.final = None
        for it in range(est.max_iter):
            if it:
                tables = self._tables(stats, pseudo, backend)
            self.final = (*tables, backend, self.threads)
            stats = yield Round(_ds_iteration, self.final)
            ll = float(stats["ll"][0])
            if est._record_iteration(ll, ll_prev, max(n_answers, 1)):
                break
            ll_prev = ll
        log_table, log_prior = tables
        est._log_table, est._log_prior = log_table, log_prior
        est.confusions_ = confusions_from_log_table(log_table, m)
        prior = np.exp(log_prior)
        est.priors_ = pd.Series(prior, index=self.classes, name="prior")
        est.skills_ = pd.Series(expected_skills(est.confusions_, prior), index=self.workers, name="skill")

    def _tables(self, stats: dict, pseudo: np.ndarray, backend: str) -> tuple[np.ndarray, np.ndarray]:
        """The M-step of ``DawidSkene._m_step`` from summed counts."""
        log_table = self.est._table_from_counts(stats["counts"], pseudo, backend)
        class_counts = stats["totals"] + self.est.prior_alpha
        return log_table, np.log(np.maximum(class_counts / class_counts.sum(), _TINY))

    def output(self) -> Round:
        return Round(_ds_output, self.final)


# ---------------------------------------------------------------------- MACE
def _mace_counts(block: CrowdLabels, state: Any, params: Any) -> tuple[Any, dict]:
    wl = block.worker.astype(np.intp) * block.n_classes + block.label
    return state, {"n_wl": np.bincount(wl, minlength=block.n_workers * block.n_classes).astype(np.float64)}


def _mace_estep(block: CrowdLabels, state: Any, tables: tuple) -> tuple[Any, dict]:
    from ..aggregation.mace import MACE, AnswerKeys

    _, ll, (know_wl, classes) = MACE._e_step(AnswerKeys(block, None), tables)
    return state, {"know_wl": know_wl, "classes": classes, "ll": np.array([ll])}


def _mace_output(block: CrowdLabels, state: Any, tables: tuple):
    from ..aggregation.mace import MACE, AnswerKeys

    post, _, _ = MACE._e_step(AnswerKeys(block, None), tables)
    return state, (post, {})


class MACEProgram(Program):
    """``mace``: :meth:`MACE._fit` with the answers partitioned: every restart's E-steps as
    rounds (the expected "knows" counts per worker and answer, and class totals, summed),
    its M-step (EM or variational) on the client from the global answer counts."""

    def rounds(self):
        from types import SimpleNamespace

        from ..core.base import resolve_random_state

        est, k, m = self.est, self.n_classes, self.n_workers
        est._check_params()
        est._smoothing = 0.01 / k if est.smoothing is None else float(est.smoothing)
        counts = yield Round(_mace_counts)
        n_wl = counts["n_wl"]
        # what MACE's M-step reads of its AnswerKeys, for the whole crowd
        # (the numpy M-step: its per-worker arrays are small beside the partitions' E-steps)
        ctx = SimpleNamespace(k=k, m=m, n_wl=n_wl, n_w=n_wl.reshape(m, k).sum(axis=1),
                              log_prior=np.full(k, -np.log(k)), kern=None)
        rng = resolve_random_state(est.random_state)
        best = None
        est.restart_objectives_ = []
        n_answers = None
        for restart in range(int(est.n_restarts)):
            tables = est._random_tables(rng, m, k)
            stats = yield Round(_mace_estep, tables)
            n_answers = n_answers or max(int(n_wl.sum()), 1)
            fitted, history, converged, obj = None, [], False, float(stats["ll"][0])
            for it in range(int(est.max_iter)):
                tables, penalty = est._m_step(ctx, (stats["know_wl"], stats["classes"]))
                fitted = stats
                stats = yield Round(_mace_estep, tables)
                obj = float(stats["ll"][0]) + penalty
                history.append(obj)
                est._progress_step(obj)
                if est.tol > 0 and it > 0 and abs(history[-1] - history[-2]) / n_answers < est.tol:
                    converged = True
                    break
            est.restart_objectives_.append(obj)
            if best is None or obj > best["obj"]:
                best = dict(obj=obj, tables=tables, stats=fitted, history=history, converged=converged,
                            restart=restart)
        est.history_ = best["history"]
        est.n_iter_ = len(best["history"])
        est.converged_ = best["converged"] or k == 1
        est.best_restart_ = best["restart"]
        est._tables = self.tables = best["tables"]
        fitted = None if best["stats"] is None else (best["stats"]["know_wl"], best["stats"]["classes"])
        theta, xi, prior = est._point_estimates(ctx, fitted, best["tables"])
        est.skills_ = pd.Series(theta, index=self.workers, name="skill")
        est.spam_probabilities_ = pd.Series(1.0 - theta, index=self.workers, name="spam_probability")
        est.strategies_ = pd.DataFrame(xi, index=self.workers, columns=pd.Index(self.classes, name="answered"))
        est.priors_ = pd.Series(prior, index=self.classes, name="prior")

    def output(self) -> Round:
        return Round(_mace_output, self.tables)


# ---------------------------------------------------------------------- GLAD
def _glad_x(block: CrowdLabels, alpha: np.ndarray, beta_t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from ..aggregation.glad import softplus

    x = alpha[block.worker] * beta_t
    return x, softplus(x)


def _glad_init(block: CrowdLabels, state: Any, params: tuple) -> tuple[dict, dict]:
    from ..aggregation.glad import LOG_BETA_BOUND

    alpha, mu_b = params
    log_beta = np.clip(np.full(block.n_tasks, mu_b), -LOG_BETA_BOUND, LOG_BETA_BOUND)
    post = vote_fractions(block)
    state = {"log_beta": log_beta, "post": post, "beta_t": np.exp(log_beta)[block.task]}
    state["x"], state["sp"] = _glad_x(block, alpha, state["beta_t"])
    return state, {"post_sum": post.sum(axis=0), "n_answers": np.array([float(block.n_labels)])}


def _glad_alpha_gradient(block: CrowdLabels, state: dict, params: tuple) -> tuple[dict, dict]:
    """Per-worker sums of ``newton_block`` for the abilities at the current ``x``."""
    new_iteration, = params
    state = dict(state)  # steps never change the state they are given (an engine may retry them)
    if new_iteration:  # p_i = q_{task_i}(label_i), fixed during the M-step
        k = block.n_classes
        state["p_right"] = state["post"].ravel()[block.task.astype(np.intp) * k + block.label]
    p, x, sp, dx = state["p_right"], state["x"], state["sp"], state["beta_t"]
    s = np.exp(x - sp)
    m = block.n_workers
    f = np.bincount(block.worker, weights=p * x - sp, minlength=m)
    grad = np.bincount(block.worker, weights=(p - s) * dx, minlength=m)
    curv = np.bincount(block.worker, weights=s * (1.0 - s) * dx * dx, minlength=m)
    return state, {"f": f, "grad": grad, "curv": curv}


def _glad_alpha_trial(block: CrowdLabels, state: dict, alpha: np.ndarray) -> tuple[dict, dict]:
    x, sp = _glad_x(block, alpha, state["beta_t"])
    return state, {"f": np.bincount(block.worker, weights=state["p_right"] * x - sp, minlength=block.n_workers)}


def _glad_beta(block: CrowdLabels, state: dict, params: tuple) -> tuple[dict, dict]:
    """The easiness step of ``GLAD._ability_step``: separable per task, so wholly local."""
    from ..aggregation.glad import LOG_BETA_BOUND, newton_block

    alpha, mu_b, var_b = params
    x, sp = _glad_x(block, alpha, state["beta_t"])
    a_t = alpha[block.worker]
    task = block.task.astype(np.intp)
    log_beta, moved, x, sp = newton_block(
        state["log_beta"], task, block.n_tasks, state["p_right"], x, sp, x,
        lambda u: a_t * np.exp(u)[task], mu_b, var_b, -LOG_BETA_BOUND, LOG_BETA_BOUND,
    )
    state = dict(state, log_beta=log_beta, x=x, sp=sp, beta_t=np.exp(log_beta)[task])
    return state, {"max_moved": np.array([moved])}


def _glad_estep(block: CrowdLabels, state: dict, params: tuple) -> tuple[dict, dict]:
    from ..aggregation.glad import GLAD

    log_prior, mu_b = params
    k = block.n_classes
    task = block.task.astype(np.intp)
    post, ll = GLAD._estep(task, task * k + block.label, block.n_tasks, k, state["x"], state["sp"], log_prior, None)
    state = dict(state, post=post)
    dev = state["log_beta"] - mu_b
    return state, {"ll": np.array([ll]), "post_sum": post.sum(axis=0), "beta_dev2": np.array([float(np.sum(dev * dev))])}


def _glad_output(block: CrowdLabels, state: dict, params: Any):
    if block.n_classes == 1:
        return state, (np.ones((block.n_tasks, 1)), {"beta": np.exp(state["log_beta"])})
    return state, (state["post"], {"beta": np.exp(state["log_beta"])})


class GLADProgram(Program):
    """``glad``: :meth:`GLAD._fit` with the answers partitioned.

    Rounds per EM iteration: for each of ``m_step_max_iter`` M-step rounds, one for the
    abilities' Newton step (per-worker objective, gradient and curvature summed over
    partitions), one per step-halving trial (per-worker objective at the trial point), one
    for the easiness step (local to each partition's tasks; the largest move comes back);
    then one for the E-step.
    """

    stateful = True

    def rounds(self):
        from ..aggregation.glad import newton_block  # noqa: F401 (the arithmetic mirrored below)

        est, k, m = self.est, self.n_classes, self.n_workers
        est._check_params()
        mu_a, var_a = float(est.alpha_prior_mean), float(est.alpha_prior_var)
        mu_b, var_b = float(est.log_beta_prior_mean), float(est.log_beta_prior_var)
        alpha = np.full(m, mu_a)
        log_prior = np.full(k, -np.log(k))
        stats = yield Round(_glad_init, (alpha, mu_b))
        n_answers = max(int(stats["n_answers"][0]), 1)
        if k > 1:
            est.converged_ = False
            obj_prev = -np.inf
            for _ in range(est.max_iter):
                log_prior = est._prior_step(stats["post_sum"][None, :])
                for r in range(int(est.m_step_max_iter)):
                    grads = yield Round(_glad_alpha_gradient, (r == 0,))
                    alpha, moved_a = yield from self._alpha_step(alpha, grads, mu_a, var_a)
                    moved = yield Round(_glad_beta, (alpha, mu_b, var_b))
                    if max(moved_a, float(moved["max_moved"][0])) < 1e-6:
                        break
                stats = yield Round(_glad_estep, (log_prior, mu_b))
                obj = float(stats["ll"][0])
                obj += -0.5 * float(np.sum((alpha - mu_a) ** 2)) / var_a - 0.5 * float(stats["beta_dev2"][0]) / var_b
                if est.fit_priors:
                    obj += est.prior_alpha * float(log_prior.sum())
                if est._record_iteration(obj, obj_prev, n_answers):
                    break
                obj_prev = obj
        est._alpha = alpha
        est._log_prior = log_prior
        est.skills_ = pd.Series(alpha, index=self.workers, name="skill")
        est.priors_ = pd.Series(np.exp(log_prior), index=self.classes, name="prior")

    @staticmethod
    def _alpha_step(alpha: np.ndarray, grads: dict, mu: float, var: float, max_halvings: int = 30):
        """``newton_block`` on the abilities, its per-worker sums coming from the partitions."""
        dev = alpha - mu
        f_old = grads["f"] - 0.5 * dev * dev / var
        grad = grads["grad"] - dev / var
        curv = grads["curv"] + 1.0 / var
        new = alpha + grad / curv
        step = new - alpha
        for _ in range(max_halvings):
            trial = yield Round(_glad_alpha_trial, new)
            dev = new - mu
            f_new = trial["f"] - 0.5 * dev * dev / var
            bad = ~(f_new >= f_old - 1e-12 * (1.0 + np.abs(f_old)))
            if not bad.any():
                break
            step = np.where(bad, 0.5 * step, step)
            new = alpha + step
        else:
            new = np.where(bad, alpha, new)
        return new, float(np.max(np.abs(new - alpha), initial=0.0))

    def output(self) -> Round:
        return Round(_glad_output)

    def collect(self, extras: dict[str, pd.Series]) -> None:
        beta = extras["beta"]
        self.est.difficulties_ = beta.rename("beta")
        self.est._log_beta = np.log(beta.to_numpy())


def _programs() -> dict[type, type[Program]]:
    from ..aggregation.dawid_skene import ClassConditionalDawidSkene, DawidSkene, OneCoinDawidSkene
    from ..aggregation.glad import GLAD
    from ..aggregation.mace import MACE
    from ..aggregation.majority_vote import MajorityVote, WeightedMajorityVote
    from ..aggregation.wawa import Wawa
    from ..aggregation.zero_based_skill import ZeroBasedSkill

    return {MajorityVote: MajorityVoteProgram, WeightedMajorityVote: WeightedMajorityVoteProgram,
            Wawa: WawaProgram, DawidSkene: DawidSkeneProgram,
            OneCoinDawidSkene: DawidSkeneProgram, ClassConditionalDawidSkene: DawidSkeneProgram,
            GLAD: GLADProgram, MACE: MACEProgram, ZeroBasedSkill: ZeroBasedSkillProgram}


def supported_methods() -> list[str]:
    """Registered names of the methods that run on the partitioned engines."""
    from ..registry import methods

    kinds = set(_programs())
    return sorted(name for name, cls in methods(kind="classification").items() if cls in kinds)


def program_for(estimator, workers: pd.Index, classes: pd.Index, threads: int = 1) -> Program:
    """The :class:`Program` of ``estimator`` (exact class: a subclass may fit differently)."""
    cls = _programs().get(type(estimator))
    if cls is None:
        raise ValueError(
            f"{type(estimator).__name__} has no partitioned (Dask / streaming) fit; "
            f"use one of: {', '.join(supported_methods())}"
        )
    return cls(estimator, workers, classes, threads)
