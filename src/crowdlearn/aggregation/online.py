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
from ..core.stats import argmax_random_ties, confusions_from_log_table, expected_skills, vote_fractions

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
                                 f"{list(labels.columns)}")
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
    def _online_commit(st: dict, cells: np.ndarray, values: np.ndarray, eta: float) -> None:
        """Every worker's statistics decay by ``1 - eta`` (the shared scale, so untouched
        rows are not rewritten); the rows ``cells`` take their new ``values``."""
        scale = st["scale"] * (1.0 - eta)
        if scale < 1e-150:  # fold the scale into the rows before it underflows (eta = 1: all new)
            st["raw"] *= scale
            scale = 1.0
        st["raw"][cells] = values / scale
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
        unknown = data.classes.difference(classes)
        if len(unknown):
            raise ValueError(
                f"partial_fit: class {unknown[0]!r} is not among the classes fixed at the first call "
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

    def partial_fit(self, labels: Any, *, classes: Any = None, step_power: float = 1.0,
                    step_offset: float = 4.0, inner_iter: int = 5) -> "StepwiseEM":
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
            ``benchmarks/tune_defaults.py`` (``benchmarks/online.py --tune``: mean accuracy
            after one pass in 10 batches over a grid of alpha in {0.6, 0.8, 1}, t0 in {1, 4},
            ``inner_iter`` in {2, 5}).
        inner_iter : int
            EM rounds on each batch (E-step, stepwise update, M-step); the batch's posteriors
            then reflect the parameters it has itself informed.

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
        # Statistics live in the kernels' layout, row ``w*K + answered``, column ``true``.
        # Everything below touches only the batch's workers: the statistics of the others
        # decay by (1 - eta) at every step, one shared factor ``scale`` (statistics = scale *
        # raw), so their rows are not rewritten and their confusions are computed only when
        # read (``confusions_``, ``predict_proba``).
        cells = (rows[:, None] * k + np.arange(k)).ravel()  # the batch workers' rows
        old = st["scale"] * st["raw"][cells]  # (batch workers * K, K)
        pseudo = self._online_pseudo(k, len(st["worker_ids"]), rows)
        backend = kernels.resolve_backend(getattr(self, "backend", "auto"), st["n_seen"] + batch.n_labels)
        log_table = self._table_from_counts(np.ascontiguousarray(old * st["n_seen"]), pseudo, backend)
        log_prior = self._online_log_prior(st["prior_stat"], st["n_seen"])
        inc = batch.incidence()  # (batch tasks, batch workers * K): logits = inc @ log_table
        # workers without statistics yet have no confusion to score with (DS's pseudo-counts
        # alone would make them infallible): the first E-step leaves their answers out, and a
        # task left with no evidence at all starts from its vote shares, as batch EM does
        known = np.repeat(old.reshape(batch.n_workers, k * k).sum(axis=1) > 0, k)
        past = st["evidence"][t_global]
        n_now = st["n_seen"] + batch.n_labels
        stat, prior_stat = old, st["prior_stat"]
        for it in range(max(1, int(inner_iter))):
            logit = inc @ (log_table if it else np.where(known[:, None], log_table, 0.0))
            logit += log_prior
            logit += past
            post = row_softmax(logit)
            if it == 0:
                blind = ((inc @ known.astype(np.float64)) == 0) & (np.abs(past).sum(axis=1) == 0)
                post[blind] = vote_fractions(batch)[blind]
            stat = (1.0 - eta) * old + (eta / batch.n_labels) * (inc.T @ post)
            prior_stat = (1.0 - eta) * st["prior_stat"] + eta * post.mean(axis=0)
            log_table = self._table_from_counts(np.ascontiguousarray(stat * n_now), pseudo, backend)
            log_prior = self._online_log_prior(prior_stat, n_now)
        # the evidence stored per task is frozen once written, so it is scored with
        # Laplace-smoothed confusions (one more pseudo-count per cell): a cell the model of
        # the moment calls impossible must not veto a class for good
        frozen = self._table_from_counts(np.ascontiguousarray(stat * n_now + 1.0), pseudo, backend)
        self._online_commit(st, cells, stat, eta)
        st["prior_stat"] = prior_stat
        st["evidence"][t_global] += inc @ frozen
        st["t"] += 1
        st["n_seen"] = n_now
        self._online_publish(st)
        return self

    # ---------------------------------------------------------------- helpers
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

    def __len__(self) -> int:
        return self.size

    def index(self) -> pd.Index:
        if not self.segments:
            return pd.Index([])
        return self.segments[0][0].append([seg for seg, _ in self.segments[1:]])

    def codes(self, ids: pd.Index) -> np.ndarray:
        """Codes of the distinct ``ids``, new ones appended."""
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
