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

from ..core.base import resolve_random_state
from ..core.data import CrowdLabels, as_crowd_labels
from ..core.stats import argmax_random_ties, confusions_from_log_table, expected_skills, vote_fractions

__all__ = ["StepwiseEM"]


class StepwiseEM:
    """Mixin giving confusion-matrix aggregators ``partial_fit`` (see the module docstring).

    The host class provides ``_log_confusions(counts, pseudo)`` (W x K x K ``[true,
    answered]`` -> log confusions), ``_pseudo_counts(k, m)`` and ``prior_alpha``.
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
        ``predict_proba`` the current worker model.
        """
        st = self.__dict__.get("_online")
        if st is None:
            if not 0.5 < step_power <= 1.0:
                raise ValueError(f"step_power must lie in (0.5, 1], got {step_power!r}")
            if step_offset < 1.0:
                raise ValueError(f"step_offset must be >= 1, got {step_offset!r}")
            first = as_crowd_labels(labels) if classes is None else None
            cls = pd.Index(list(classes)) if classes is not None else first.classes
            k = len(cls)
            st = self._online = {
                "classes": cls, "workers": pd.Index([]), "tasks": pd.Index([]),
                "stat": np.zeros((0, k, k)), "prior_stat": np.full(k, 1.0 / k),
                "evidence": np.zeros((0, k)), "t": 0, "n_seen": 0,
                "power": float(step_power), "offset": float(step_offset),
            }
        k = len(st["classes"])
        batch = self._online_batch(labels, st["classes"])
        if batch.n_labels == 0:
            return self
        # global codes of the batch's workers and tasks (appended when new)
        st["workers"] = st["workers"].append(batch.workers.difference(st["workers"], sort=False))
        st["tasks"] = st["tasks"].append(batch.tasks.difference(st["tasks"], sort=False))
        m = len(st["workers"])
        st["stat"] = np.concatenate([st["stat"], np.zeros((m - len(st["stat"]), k, k))])
        st["evidence"] = np.concatenate([st["evidence"], np.zeros((len(st["tasks"]) - len(st["evidence"]), k))])
        w = st["workers"].get_indexer(batch.workers)[batch.worker]
        t_global = st["tasks"].get_indexer(batch.tasks)
        # a few EM rounds on the batch (incremental EM: each E-step uses the statistics the
        # batch itself has just updated), so a batch also informs its own posteriors; a
        # task's evidence from earlier batches enters its posterior
        eta = 1.0 if st["t"] == 0 else (st["t"] + st["offset"]) ** (-st["power"])
        cell = w.astype(np.int64) * k + batch.label
        log_conf, log_prior = self._online_parameters(st, st["stat"], st["prior_stat"])
        # workers without statistics yet have no confusion to score with (DS's pseudo-counts
        # alone would make them infallible): the first E-step leaves their answers out, and a
        # task left with no evidence at all starts from its vote shares, as batch EM does
        known = st["stat"].sum(axis=(1, 2)) > 0
        use = known[w]
        for it in range(max(1, int(inner_iter))):
            ans = log_conf[w, :, batch.label]  # (n, K)
            wt = use if it == 0 else np.ones(batch.n_labels, dtype=bool)
            batch_ev = np.column_stack([np.bincount(batch.task, weights=np.where(wt, ans[:, c], 0.0),
                                                    minlength=batch.n_tasks) for c in range(k)])
            logit = log_prior + st["evidence"][t_global] + batch_ev
            post = np.exp(logit - logit.max(axis=1, keepdims=True))
            post /= post.sum(axis=1, keepdims=True)
            if it == 0:
                blind = (np.bincount(batch.task, weights=wt, minlength=batch.n_tasks) == 0) & (
                    np.abs(st["evidence"][t_global]).sum(axis=1) == 0)
                post[blind] = vote_fractions(batch)[blind]
            counts = np.column_stack([np.bincount(cell, weights=post[batch.task, c], minlength=m * k)
                                      for c in range(k)])
            s_hat = counts.reshape(m, k, k).transpose(0, 2, 1) / batch.n_labels  # [w, true, answered]
            stat = (1.0 - eta) * st["stat"] + eta * s_hat
            prior_stat = (1.0 - eta) * st["prior_stat"] + eta * post.mean(axis=0)
            log_conf, log_prior = self._online_parameters(st, stat, prior_stat, st["n_seen"] + batch.n_labels)
        # the evidence stored per task is frozen once written, so it is scored with
        # Laplace-smoothed confusions (one more pseudo-count per cell): a cell the model of
        # the moment calls impossible must not veto a class for good
        n_now = st["n_seen"] + batch.n_labels
        frozen = self._log_confusions(np.ascontiguousarray(stat * n_now + 1.0), self._pseudo_counts(k, m))
        ans = frozen[w, :, batch.label]
        batch_ev = np.column_stack([np.bincount(batch.task, weights=ans[:, c], minlength=batch.n_tasks)
                                    for c in range(k)])
        st["stat"], st["prior_stat"] = stat, prior_stat
        st["evidence"][t_global] += batch_ev
        st["t"] += 1
        st["n_seen"] += batch.n_labels
        self._online_publish(st)
        return self

    # ---------------------------------------------------------------- helpers
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

    def _online_parameters(self, st: dict, stat: np.ndarray, prior_stat: np.ndarray,
                           n_seen: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """M-step of the batch method on the statistics scaled to ``n_seen`` answers."""
        k, m = len(st["classes"]), len(st["workers"])
        n_seen = st["n_seen"] if n_seen is None else n_seen
        counts = stat * n_seen
        log_conf = self._log_confusions(np.ascontiguousarray(counts), self._pseudo_counts(k, m))
        prior = prior_stat * max(n_seen, 1) + self.prior_alpha
        return log_conf, np.log(prior / prior.sum())

    def _online_publish(self, st: dict) -> None:
        k, m = len(st["classes"]), len(st["workers"])
        log_conf, log_prior = self._online_parameters(st, st["stat"], st["prior_stat"])
        self._log_table = np.ascontiguousarray(log_conf.transpose(0, 2, 1).reshape(m * k, k))
        self._log_prior = log_prior
        self.confusions_ = confusions_from_log_table(self._log_table, m)
        prior = np.exp(log_prior)
        self.priors_ = pd.Series(prior, index=st["classes"], name="prior")
        self.skills_ = pd.Series(expected_skills(self.confusions_, prior), index=st["workers"], name="skill")
        self.tasks_, self.workers_, self.classes_ = st["tasks"], st["workers"], st["classes"]
        logit = log_prior + st["evidence"]
        post = np.exp(logit - logit.max(axis=1, keepdims=True))
        post /= post.sum(axis=1, keepdims=True)
        codes = argmax_random_ties(post, resolve_random_state(getattr(self, "random_state", 0)), st["tasks"])
        self.label_codes_ = codes
        self.probas_ = pd.DataFrame(post, index=st["tasks"], columns=st["classes"])
        self.labels_ = pd.Series(st["classes"].take(codes), index=st["tasks"], name="label")
        self.history_, self.n_iter_, self.converged_ = [], st["t"], False
