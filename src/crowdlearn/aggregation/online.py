"""Online (stepwise) EM for the Dawid-Skene family: ``partial_fit(batch)``.

Stepwise EM (Sato & Ishii, 2000; Cappé & Moulines, 2009, "Online expectation-maximization
algorithm for latent data models", JRSS B 71(3); Liang & Klein, 2009) keeps a running average
of the expected sufficient statistics per answer instead of the answers themselves::

    s_{t} = (1 - eta_t) s_{t-1} + eta_t * s_hat(batch_t),     eta_t = (t + t0)^(-alpha),  eta_0 = 1

where ``s_hat`` is the E-step statistic of batch ``t`` divided by its number of answers: the
soft counts ``c[w, true, answered]`` and the class mass per task.  The M-step is the batch
method's own (``_log_confusions`` of ``N_seen * s``, with its pseudo-counts), so
:class:`~crowdlearn.aggregation.DawidSkene`, the one-coin and the class-conditional models
get it alike.  ``alpha`` in (0.5, 1] makes ``sum eta = inf`` and ``sum eta^2 < inf``
(Robbins-Monro); ``alpha = 1`` with ``t0 = 1`` makes ``s`` the plain average of the batch
statistics, each computed with the parameters of its time.

Leave-one-out statistics (``leave_one_out=True``, the default).  In a shuffled stream most
answers arrive at tasks that have few other answers yet, so a task's posterior is mostly its
new answer's own vote, and plain stepwise statistics ``q_t ⊗ e_a`` let every worker vouch for
itself: after one pass spammers look as reliable as anyone (``benchmarks/online.py``).  Each
answer ``a`` of worker ``w`` on task ``t`` is therefore counted against its task's posterior
*without* that answer, ``r_a ∝ pi * exp(evidence_t + batch logits_t - log Pi_w[:, a])``.  Such
a posterior is independent of the answer given the truth, so ``E[r_a e_a^T] = E[r_a r_a^T]
Pi_w``: a worker's confusion is the linear regression of its answers on ``r``.  It is solved
per worker with a ridge toward the population's confusion (itself the same regression pooled
over workers, with a ridge toward a weakly diagonal matrix),

    Pi_w = (R_w + lambda I)^-1 (S_w + lambda Pi_pop),   R_w = sum_a r_a r_a^T,   S_w = sum_a r_a e_a^T,

rows clipped to the simplex; ``lambda`` (``anchor``, in answers) holds the directions the
answers do not inform -- an answer to a task with no other evidence has ``r_a`` equal to the
class prior and says nothing about the worker's confusion, only about how often it gives each
class.  ``R_w`` is one more ``K x K`` statistic per worker with the same stepwise average.
The corrected confusions, times each worker's class mass, are the soft counts handed to the
host's M-step.  ``leave_one_out=False`` is plain stepwise EM, which on one batch is batch EM.

State: ``O(workers x K^2)`` statistics plus ``O(tasks x K)`` accumulated log-evidence per
task (so that a task whose answers arrive in several batches has one posterior built from all
of them), never the answers: memory does not grow with the answers seen.

Relation to the batch fit: one pass is one stochastic approximation of EM's first
iterations; each task's stored posterior uses the worker parameters of the time its answers
arrived.  ``predict_proba(answers)`` re-scores any answers with the current parameters (the
E-step of a batch fit at those parameters); several passes over the same answers move the
parameters toward a fixed point of batch EM.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..core import kernels
from ..core.base import resolve_random_state
from ..core.data import CrowdLabels, as_crowd_labels
from ..core.ids import label_number, positions_by_value, show_value
from ..core.stats import argmax_random_ties, confusions_from_log_table, expected_skills, vote_fractions
from ..core.tables import column_hint

__all__ = ["StepwiseEM", "OnlineState", "IdCodes", "TASK_RESULTS", "grown_rows", "row_softmax"]


class OnlineState:
    """What every ``partial_fit`` shares: the stream's state, ids coded batch by batch, the
    per-task evidence, the shared decay of per-worker statistics, and fitted attributes
    computed on first read.

    The state (``self._online``) holds ``classes``, ``worker_ids`` and ``task_ids``
    (:class:`IdCodes`), ``raw`` per-worker statistics (row blocks of ``width`` rows per
    worker) with their shared ``scale``, ``evidence`` (tasks x K: the frozen log-likelihood
    of each task's answers), ``prior_stat``, ``t`` and ``n_seen``.  A host lists in
    ``_online_lazy`` which fitted attributes are computed on read, and by which method.
    """

    #: fitted attribute -> name of the method (taking the state) that sets it on read
    _online_lazy: dict[str, str] = {}

    def fit(self, labels: Any, **kwargs: Any):
        """A batch fit; it starts afresh after any ``partial_fit``.  ``partial_fit`` after it is
        a ``ValueError``: the batch fit keeps no stream state to continue from (only its
        results), and a new stream would silently drop the fit's tasks."""
        self.__dict__.pop("_online", None)
        return super().fit(labels, **kwargs)

    @staticmethod
    def _online_empty(labels: Any) -> bool:
        """Whether a batch holds no answer (a frame of the answer columns with no row).

        An empty batch changes nothing: not the model, not the step count, and on a first
        call not the class set either (the first batch with answers fixes it).
        """
        if isinstance(labels, CrowdLabels):
            return labels.n_labels == 0
        if isinstance(labels, pd.DataFrame):
            missing = [c for c in ("task", "worker", "label") if c not in labels.columns]
            if missing:
                raise ValueError(f"partial_fit: missing column(s) {missing}; the batch has columns "
                                 f"{list(labels.columns)}" + column_hint(missing, labels.columns))
            return len(labels) == 0
        return isinstance(labels, (list, tuple)) and len(labels) == 0

    def _online_start(self, labels: Any, classes: Any, step_power: float, step_offset: float) -> dict:
        """The state of this stream, created at the first call."""
        st = self.__dict__.get("_online")
        if st is not None:
            return st
        if "probas_" in self.__dict__:  # fitted by fit(), which keeps no stream state
            raise ValueError(
                f"partial_fit after fit: a batch fit keeps no stream state, so the stream would start "
                f"afresh and drop the {len(self.__dict__['probas_'])} task(s) of the fit; stream every "
                f"answer with partial_fit (the answers so far first), or start a new stream on "
                f"sklearn.base.clone(estimator)")
        if not 0.5 < step_power <= 1.0:
            raise ValueError(f"step_power must lie in (0.5, 1], got {step_power!r}")
        if step_offset < 1.0:
            raise ValueError(f"step_offset must be >= 1, got {step_offset!r}")
        cls = pd.Index(list(classes)) if classes is not None else as_crowd_labels(labels).classes
        k = len(cls)
        st = self._online = {
            "classes": cls, "worker_ids": IdCodes(), "task_ids": IdCodes(),
            "raw": None, "scale": 1.0, "prior_stat": np.full(k, 1.0 / k),
            "evidence": np.zeros((0, k)), "t": 0, "n_seen": 0,
            "power": float(step_power), "offset": float(step_offset),
        }
        return st

    def _online_codes(self, st: dict, batch: CrowdLabels, width: int, columns: int):
        """Global codes of the batch's workers and tasks (new ones appended, in work
        proportional to the batch up to a log factor, not to the tasks seen so far), with
        the state's arrays grown to hold them; and the step size of this batch."""
        rows = st["worker_ids"].codes(batch.workers)
        t_global = st["task_ids"].codes(batch.tasks)
        if st["raw"] is None:
            st["raw"] = np.zeros((0, columns))
        st["raw"] = grown_rows(st["raw"], len(st["worker_ids"]) * width)
        st["evidence"] = grown_rows(st["evidence"], len(st["task_ids"]))
        eta = 1.0 if st["t"] == 0 else (st["t"] + st["offset"]) ** (-st["power"])
        return rows, t_global, eta

    @staticmethod
    def _online_commit(st: dict, cells: np.ndarray, values: np.ndarray, eta: float,
                       more: dict[str, np.ndarray] | None = None,
                       totals: dict[str, np.ndarray] | None = None) -> None:
        """Every worker's statistics decay by ``1 - eta`` (the shared scale, so untouched
        rows are not rewritten); the rows ``cells`` take their new ``values``.

        ``more`` holds further per-worker statistics (state key -> new rows) sharing the
        scale; ``totals`` (state key -> ``K x K`` sum over all workers after this step, in
        statistic units) is stored as ``"sum_" + key`` in the same raw units.
        """
        arrays = {"raw": values, **(more or {})}
        scale = st["scale"] * (1.0 - eta)
        if scale < 1e-150:  # fold the scale into the rows before it underflows (eta = 1: all new)
            for key in arrays:
                st[key] *= scale
            scale = 1.0
        for key, new in arrays.items():
            st[key][cells] = new / scale
        for key, total in (totals or {}).items():
            st["sum_" + key] = total / scale
        st["scale"] = scale

    def _online_forget(self) -> None:
        """Drop the lazily computed attributes: the next read recomputes them."""
        for name in type(self)._online_lazy:
            self.__dict__.pop(name, None)

    def __getattr__(self, name: str):
        # only reached when normal lookup fails: an attribute of the last partial_fit
        builder = type(self)._online_lazy.get(name)
        if builder is not None:
            st = self.__dict__.get("_online")
            if st is not None:
                getattr(self, builder)(st)
                return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _online_task_results(self, st: dict) -> None:
        """``tasks_``, ``probas_``, ``labels_``, ``label_codes_`` from the accumulated evidence."""
        tasks = st["task_ids"].index().rename("task")
        post = row_softmax(self._log_prior + st["evidence"][:len(tasks)])
        codes = argmax_random_ties(post, resolve_random_state(getattr(self, "random_state", 0)), tasks)
        self.tasks_ = tasks
        self.label_codes_ = codes
        self.probas_ = pd.DataFrame(post, index=tasks, columns=st["classes"])
        self.labels_ = pd.Series(st["classes"].take(codes), index=tasks, name="label")

    @staticmethod
    def _online_batch(labels: Any, classes: pd.Index) -> CrowdLabels:
        data = as_crowd_labels(labels)
        # by value: a batch read from text ("1") and the classes given as numbers (1), or back
        unknown = data.classes[positions_by_value(classes, data.classes, "the classes of the stream") < 0]
        if len(unknown):
            raise ValueError(
                f"partial_fit: class {show_value(unknown[0])} is not among the classes fixed at the first call "
                f"({list(classes)}); pass classes= to the first partial_fit"
            )
        if not data.classes.equals(classes):  # recode onto the fixed class order
            frame = data.to_frame()
            data = CrowdLabels.from_frame(frame, classes=list(classes))
        return data


#: fitted attributes of a partial fit computed on first read, shared by every host
TASK_RESULTS = {name: "_online_task_results" for name in ("tasks_", "probas_", "labels_", "label_codes_")}


class StepwiseEM(OnlineState):
    """Mixin giving confusion-matrix aggregators ``partial_fit`` (see the module docstring).

    The host class provides ``_table_from_counts(counts, pseudo, backend)`` (soft counts in
    the kernels' ``[w*K + answered, true]`` layout -> log confusions in the same layout: its
    M-step), ``_pseudo_counts(k, m)``, ``prior_alpha`` and ``backend``.
    """

    def partial_fit(self, labels: Any, *, classes: Any = None, step_power: float = 0.8,
                    step_offset: float = 1.0, inner_iter: int = 2, leave_one_out: bool = True,
                    anchor: float = 5.0) -> "StepwiseEM":
        """Update the worker model with one batch of answers (new tasks and workers allowed).

        Parameters
        ----------
        labels : CrowdLabels or DataFrame (task, worker, label)
        classes : sequence, optional
            The class set, fixed at the first call (default: the first batch's classes); a
            later batch with a class outside it raises ValueError.
        step_power, step_offset : float
            ``alpha`` in (0.5, 1] and ``t0 >= 1`` of the step size ``(t + t0)^-alpha``, fixed
            at the first call.  Defaults chosen on the simulated crowds of
            ``benchmarks/tune_defaults.py`` (``benchmarks/online.py --tune``: accuracy after
            one pass in 10 batches, of the streamed posteriors and of the final parameters,
            over a grid of the statistics, alpha in {0.8, 1}, t0 in {1, 4} and ``inner_iter``
            in {2, 3, 5}; 2 rounds are within 0.05 points of 3 and 5 and the cheapest).
        inner_iter : int
            EM rounds on each batch (E-step, stepwise update, M-step); the batch's posteriors
            then reflect the parameters it has itself informed.
        leave_one_out : bool
            Count each answer against its task's posterior without it, corrected by
            regression (module docstring); fixed at the first call.  False: plain stepwise EM.
        anchor : float > 0
            Strength, in answers, of the ridge that pulls each worker's regression toward the
            population confusion (``leave_one_out`` only); fixed at the first call.
            ``leave_one_out`` and ``anchor`` (5, of {2, 5, 20}) were chosen with the step
            sizes, on the same grid.

        After each call ``probas_``/``labels_`` hold every task seen so far (from its
        accumulated evidence), and ``confusions_``, ``priors_``, ``skills_`` and
        ``predict_proba`` the current worker model.  A batch with no answer changes nothing
        (on a first call, not even the class set: the first batch with answers fixes it).
        """
        if self._online_empty(labels):
            return self
        st = self._online_start(labels, classes, step_power, step_offset)
        k = len(st["classes"])
        batch = self._online_batch(labels, st["classes"])
        rows, t_global, eta = self._online_codes(st, batch, width=k, columns=k)
        loo = self._online_loo_start(st, leave_one_out, anchor, k)
        # Statistics live in the kernels' layout, row ``w*K + answered``, column ``true``.
        # Everything below touches only the batch's workers: the statistics of the others
        # decay by (1 - eta) at every step, one shared factor ``scale`` (statistics = scale *
        # raw), so their rows are not rewritten and their confusions are computed only when
        # read (``confusions_``, ``predict_proba``).
        cells = (rows[:, None] * k + np.arange(k)).ravel()  # the batch workers' rows
        old = st["scale"] * st["raw"][cells]  # (batch workers * K, K)
        pseudo = self._online_pseudo(k, len(st["worker_ids"]), rows)
        backend = kernels.resolve_backend(getattr(self, "backend", "auto"), st["n_seen"] + batch.n_labels)
        if loo:
            # leave-one-out second moments: row ``w*K + true``, column ``true``
            old_r = st["scale"] * st["rraw"][cells]
            # the other workers' totals: the stored totals minus the batch workers' rows
            others = {key: st["scale"] * st["sum_" + key] - rows_now.reshape(-1, k, k).sum(axis=0)
                      for key, rows_now in (("raw", old), ("rraw", old_r))}
            # the first E-step scores with each worker's table as its last batch left it
            # (the population anchor has moved a little since; the rounds below refit it)
            log_table = st["table"][cells]
        else:
            log_table = self._table_from_counts(np.ascontiguousarray(old * st["n_seen"]), pseudo, backend)
        log_prior = self._online_log_prior(st["prior_stat"], st["n_seen"])
        inc = batch.incidence()  # (batch tasks, batch workers * K): logits = inc @ log_table
        # workers without statistics yet have no confusion to score with (DS's pseudo-counts
        # alone would make them infallible): the first E-step leaves their answers out, and a
        # task left with no evidence at all starts from its vote shares, as batch EM does
        known = np.repeat(old.reshape(batch.n_workers, k * k).sum(axis=1) > 0, k)
        past = st["evidence"][t_global]
        n_now = st["n_seen"] + batch.n_labels
        stat, stat_r, prior_stat = old, None, st["prior_stat"]
        answer_cell = batch.worker.astype(np.int64) * k + batch.label  # per answer: its row
        for it in range(max(1, int(inner_iter))):
            table = log_table if it else np.where(known[:, None], log_table, 0.0)
            logit = inc @ table
            logit += log_prior
            logit += past
            post = row_softmax(logit)
            if it == 0:
                blind = ((inc @ known.astype(np.float64)) == 0) & (np.abs(past).sum(axis=1) == 0)
                post[blind] = vote_fractions(batch)[blind]
            if loo:
                # each answer against its task's posterior without it (a blind task keeps
                # its vote shares: there is nothing else to hold the answer against)
                batch_stat, batch_r = loo_statistics(logit, table, batch, answer_cell,
                                                     blind[batch.task] if it == 0 else None, post, backend)
                stat_r = (1.0 - eta) * old_r + (eta / batch.n_labels) * batch_r
            else:
                batch_stat = inc.T @ post
            stat = (1.0 - eta) * old + (eta / batch.n_labels) * batch_stat
            prior_stat = (1.0 - eta) * st["prior_stat"] + eta * post.mean(axis=0)
            if loo:
                # the population: these rows plus the other workers' decayed totals (kept for
                # the commit below)
                pop_s, pop_r = loo_population(stat, stat_r, others, 1.0 - eta)
                counts = regressed_counts(stat * n_now, stat_r * n_now, pop_s * n_now, pop_r * n_now,
                                          st["anchor"], backend)
            else:
                counts = stat * n_now
            log_table = self._table_from_counts(np.ascontiguousarray(counts), pseudo, backend)
            log_prior = self._online_log_prior(prior_stat, n_now)
        # the evidence stored per task is frozen once written, so it is scored with
        # Laplace-smoothed confusions (one more pseudo-count per cell): a cell the model of
        # the moment calls impossible must not veto a class for good
        frozen = self._table_from_counts(np.ascontiguousarray(counts + 1.0), pseudo, backend)
        if loo:
            self._online_commit(st, cells, stat, eta, {"rraw": stat_r}, {"raw": pop_s, "rraw": pop_r})
        else:
            self._online_commit(st, cells, stat, eta)
        if loo:
            st["table"][cells] = log_table
        st["prior_stat"] = prior_stat
        st["evidence"][t_global] += inc @ frozen
        st["t"] += 1
        st["n_seen"] = n_now
        self._online_publish(st)
        return self

    # ---------------------------------------------------------------- helpers
    @staticmethod
    def _online_loo_start(st: dict, leave_one_out: bool, anchor: float, k: int) -> bool:
        """Fix ``leave_one_out`` and ``anchor`` at the first call; grow the second-moment
        rows with the workers."""
        if "leave_one_out" not in st:
            if not anchor > 0:
                raise ValueError(f"anchor must be > 0, got {anchor!r}")
            st["leave_one_out"], st["anchor"] = bool(leave_one_out), float(anchor)
            if st["leave_one_out"]:
                st["rraw"], st["table"] = np.zeros((0, k)), np.zeros((0, k))
                st["sum_raw"], st["sum_rraw"] = np.zeros((k, k)), np.zeros((k, k))
        if st["leave_one_out"]:
            st["rraw"] = grown_rows(st["rraw"], len(st["raw"]))
            st["table"] = grown_rows(st["table"], len(st["raw"]))
        return st["leave_one_out"]

    def _online_pseudo(self, k: int, m: int, rows: np.ndarray | None = None) -> np.ndarray:
        """The host's pseudo-counts, restricted to ``rows`` when they are per worker."""
        pseudo = self._pseudo_counts(k, m)
        return pseudo[rows] if pseudo.ndim == 3 and rows is not None else pseudo

    def _online_log_prior(self, prior_stat: np.ndarray, n_seen: int) -> np.ndarray:
        prior = prior_stat * max(n_seen, 1) + self.prior_alpha
        return np.log(prior / prior.sum())

    def _online_publish(self, st: dict) -> None:
        """The class prior as a fitted attribute; the worker model (``confusions_``,
        ``skills_``, ``workers_``) and the per-task results (``tasks_``, ``probas_``,
        ``labels_``, ``label_codes_``) are computed when first read (:meth:`__getattr__`), so
        a stream of batches pays per batch only for the batch's own workers and tasks."""
        self._log_prior = self._online_log_prior(st["prior_stat"], st["n_seen"])
        self.priors_ = pd.Series(np.exp(self._log_prior), index=st["classes"], name="prior")
        self.classes_ = st["classes"]
        self.history_, self.n_iter_, self.converged_ = [], st["t"], False
        self._online_forget()

    def _online_worker_model(self, st: dict) -> None:
        k, m = len(st["classes"]), len(st["worker_ids"])
        counts = st["scale"] * st["raw"][:m * k] * st["n_seen"]
        backend = kernels.resolve_backend(getattr(self, "backend", "auto"), st["n_seen"])
        if st.get("leave_one_out"):
            n = st["scale"] * st["n_seen"]
            counts = regressed_counts(counts, n * st["rraw"][:m * k], n * st["sum_raw"], n * st["sum_rraw"],
                                      st["anchor"], backend)
        self._log_table = self._table_from_counts(np.ascontiguousarray(counts), self._online_pseudo(k, m), backend)
        self.confusions_ = confusions_from_log_table(self._log_table, m)
        self.workers_ = st["worker_ids"].index().rename("worker")
        self.skills_ = pd.Series(expected_skills(self.confusions_, np.exp(self._log_prior)),
                                 index=self.workers_, name="skill")

    _online_lazy = {**TASK_RESULTS, **{name: "_online_worker_model" for name in
                                       ("confusions_", "skills_", "workers_", "_log_table")}}


class IdCodes:
    """Ids -> codes in order of first appearance, grown batch by batch.

    A Python dict costs a cache miss per lookup once it holds millions of ids (60 ms per
    10^5 lookups at 2 x 10^6 tasks); a pandas Index looks up 15x faster but is rebuilt from
    scratch when appended to.  So the ids are kept in segments, each a hashed Index holding
    a contiguous range of codes, merged like a binary counter (a segment is merged into the
    one before it once it is half as large, and the newest two whenever there are more than
    :attr:`MAX_SEGMENTS`): a handful of segments to look in, and each id re-hashed a few
    times over the whole stream.
    """

    #: segments to look in at most (the newest are merged first when there are more)
    MAX_SEGMENTS = 6

    def __init__(self) -> None:
        self.segments: list[tuple[pd.Index, int]] = []  # (ids, code of the first)
        self.size = 0
        self.kind: str | None = None  # inferred type of the first ids (pandas' infer_dtype)

    def __len__(self) -> int:
        return self.size

    def like_first(self, ids: pd.Index) -> pd.Index:
        """``ids`` as the type of the first ids seen: numbers as text when those were text,
        text spelling a whole number as that number when those were whole numbers.

        A stream read from Parquet parts (numbers) and then CSV parts (text) names one task
        ``11573`` and then ``"11573"``; without this they would be two tasks.  In one table
        the two are refused (:func:`crowdlearn.core.ids.factorize_ids`), but across
        batches the first type is the one the outputs already use.
        """
        if not len(ids):
            return ids
        kind = pd.api.types.infer_dtype(ids, skipna=True)
        if self.kind is None:
            self.kind = kind
        if kind == self.kind or self.kind not in ("string", "integer"):
            return ids
        if self.kind == "string":
            return pd.Index([str(v) for v in ids], dtype=object, name=ids.name)
        numbers = [label_number(v) for v in ids]
        return pd.Index([int(n) if n is not None and n == n.to_integral_value() else v
                         for n, v in zip(numbers, ids)], name=ids.name)

    def index(self) -> pd.Index:
        if not self.segments:
            return pd.Index([])
        return self.segments[0][0].append([seg for seg, _ in self.segments[1:]])

    def codes(self, ids: pd.Index) -> np.ndarray:
        """Codes of the distinct ``ids``, new ones appended (see :meth:`like_first`)."""
        ids = self.like_first(ids)
        found = np.full(len(ids), -1, dtype=np.int64)
        for seg, start in self.segments:
            pos = seg.get_indexer(ids)
            hit = pos >= 0
            found[hit] = start + pos[hit]
        new = np.flatnonzero(found < 0)
        if new.size:
            found[new] = np.arange(self.size, self.size + new.size)
            self.segments.append((ids[new], self.size))
            self.size += new.size
            while len(self.segments) > 1 and (len(self.segments) > self.MAX_SEGMENTS or
                                              len(self.segments[-2][0]) <= 2 * len(self.segments[-1][0])):
                (a, start), (b, _) = self.segments[-2], self.segments[-1]
                self.segments[-2:] = [(a.append(b), start)]
        return found


def loo_population(stat: np.ndarray, stat_r: np.ndarray, others: dict, decay: float):
    """Population first and second moments (``K x K`` each): the batch workers' rows plus
    ``decay`` times the other workers' totals ``others`` (keys ``raw``, ``rraw``)."""
    k = stat.shape[1]
    return (decay * others["raw"] + stat.reshape(-1, k, k).sum(axis=0),
            decay * others["rraw"] + stat_r.reshape(-1, k, k).sum(axis=0))


def loo_statistics(logit: np.ndarray, table: np.ndarray, batch: CrowdLabels, answer_cell: np.ndarray,
                   fixed: np.ndarray | None, fixed_rows: np.ndarray, backend: str) -> tuple[np.ndarray, np.ndarray]:
    """Per worker of the batch, from each answer's posterior without it
    ``r_a = softmax(logit[task_a] - table[cell_a])`` (or ``fixed_rows[task_a]`` where
    ``fixed[a]``): the first moments ``sum r_a`` in the rows ``w*K + answered`` and the
    second moments ``sum r_a r_a^T`` in the rows ``w*K + true``, both (n_workers * K, K)."""
    k = logit.shape[1]
    rows = batch.n_workers * k
    compiled = kernels.load_compiled("crowdlearn.aggregation.online_compiled") if backend == "numba" else None
    if compiled is not None:
        first, second = np.zeros((rows, k)), np.zeros((rows, k))
        no_fixed = np.zeros(batch.n_labels, dtype=np.bool_) if fixed is None else fixed
        # in worker order, a worker's table row and moment rows are read and written once
        # for all its answers, and only the task's logits are a random read
        order = batch.worker_order()
        compiled.loo_moments(np.ascontiguousarray(logit), np.ascontiguousarray(table), batch.task[order],
                             answer_cell[order], batch.worker[order], no_fixed[order], fixed_rows, first, second)
        return first, second
    held = row_softmax(logit[batch.task] - table[answer_cell])
    if fixed is not None:
        held[fixed] = fixed_rows[batch.task[fixed]]
    n = batch.n_labels
    outer = (held[:, :, None] * held[:, None, :]).reshape(n, k * k)
    first = np.zeros((rows, k))
    np.add.at(first, answer_cell, held)
    second = np.zeros((batch.n_workers, k * k))
    np.add.at(second, batch.worker, outer)
    return first, second.reshape(rows, k)


def regressed_counts(s_counts: np.ndarray, r_counts: np.ndarray, pop_s: np.ndarray, pop_r: np.ndarray,
                     anchor: float, backend: str = "numpy") -> np.ndarray:
    """Soft counts from leave-one-out moments (the regression of the module docstring).

    ``s_counts`` (W*K, K): rows ``w*K + answered``, columns ``true``; ``r_counts`` (W*K, K):
    rows ``w*K + true``; ``pop_s``, ``pop_r`` (K, K): their sums over workers.  The
    population confusion ``(R + a I)^-1 (S^T + a A)`` with ``A`` weakly diagonal (0.7 on the
    diagonal, the rest shared), then each worker's ``(R_w + a I)^-1 (S_w^T + a Pi_pop)``,
    rows clipped to the simplex and scaled by the worker's class mass; returned in the
    layout of ``s_counts``.
    """
    k = s_counts.shape[1]
    m = s_counts.shape[0] // k
    eye = np.eye(k)
    prior = np.full((k, k), 0.3 / max(k - 1, 1))
    np.fill_diagonal(prior, 0.7)
    pop = _rows_to_simplex(np.linalg.solve(pop_r + anchor * eye, pop_s.T + anchor * prior))
    compiled = kernels.load_compiled("crowdlearn.aggregation.online_compiled") if backend == "numba" else None
    if compiled is not None:
        out = np.empty_like(s_counts)
        compiled.worker_regressions(np.ascontiguousarray(s_counts), np.ascontiguousarray(r_counts), pop,
                                    float(anchor), out)
        return out
    s = s_counts.reshape(m, k, k).transpose(0, 2, 1)  # [w, true, answered]
    conf = _rows_to_simplex(np.linalg.solve(r_counts.reshape(m, k, k) + anchor * eye, s + anchor * pop))
    out = s.sum(axis=2)[:, :, None] * conf  # each worker's class mass times its confusion
    return np.ascontiguousarray(out.transpose(0, 2, 1).reshape(m * k, k))


def _rows_to_simplex(x: np.ndarray) -> np.ndarray:
    """Rows (last axis) clipped at a small positive floor and renormalised: a regression
    can step outside the simplex where the data are thin."""
    x = np.clip(x, 1e-6, None)
    return x / x.sum(axis=-1, keepdims=True)


def row_softmax(logit: np.ndarray) -> np.ndarray:
    """Row-wise softmax of a (n, K) array, reducing column by column: numpy's ``axis=1``
    reductions over a handful of classes are twice as slow as K whole-column passes."""
    top = logit[:, 0].copy()
    for c in range(1, logit.shape[1]):
        np.maximum(top, logit[:, c], out=top)
    post = np.exp(logit - top[:, None])
    total = post[:, 0].copy()
    for c in range(1, logit.shape[1]):
        total += post[:, c]
    post /= total[:, None]
    return post


def grown_rows(rows: np.ndarray, n: int) -> np.ndarray:
    """``rows`` with at least ``n`` rows, new ones zero; capacity doubles (amortised O(1))."""
    if n <= len(rows):
        return rows
    out = np.zeros((max(n, 2 * len(rows)),) + rows.shape[1:])
    out[:len(rows)] = rows
    return out
