"""Running a :class:`~crowdlearn.scale.programs.Program` on an engine, and what every engine shares.

An engine holds the partitions (coded blocks) somewhere — in this process
(:class:`LocalEngine`), on a Dask cluster (:mod:`crowdlearn.scale.dask_engine`), on disk
(:mod:`crowdlearn.scale.stream`) — and offers two operations: ``map_reduce(round)``, the
summed statistics of one round, and ``outputs(round, random_state)``, each partition's
result table.  :func:`fit_program` drives the program's rounds through an engine with the
bookkeeping :meth:`BaseAggregator.fit <crowdlearn.aggregation.base.BaseAggregator.fit>` does
in memory (parameter checks, ``history_``, progress bar / callback).
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pandas as pd

from ..aggregation.base import normalize_rows
from ..core import progress
from ..core.base import resolve_random_state
from ..core.data import CrowdLabels
from ..core.params import check_params
from ..core.stats import argmax_random_ties
from .coding import Coding, Columns, bucket_of, strip_columns
from .programs import Program, Round, combine, combine_all, program_for

__all__ = ["fit_program", "LocalEngine", "posterior_frame", "apply_output", "collect_results"]


def posterior_frame(block: CrowdLabels, post: np.ndarray, extras: dict, random_state: Any) -> pd.DataFrame:
    """One partition's ``task, label, confidence, p_<class>...`` (the CLI's format), plus the
    program's extra per-task columns.  Rows are normalised and ties broken by task id, as
    :meth:`BaseAggregator.fit` does, so a task gets the label it gets in memory."""
    post = normalize_rows(post, block.n_classes)
    codes = argmax_random_ties(post, resolve_random_state(random_state), block.tasks)
    out = pd.DataFrame({"task": block.tasks.to_numpy(), "label": block.classes.take(codes).to_numpy(),
                        "confidence": post.max(axis=1) if post.size else np.zeros(block.n_tasks)})
    probs = pd.DataFrame(post, columns=[f"p_{c}" for c in block.classes])
    return pd.concat([out, probs, pd.DataFrame(extras)], axis=1)


def apply_output(block: CrowdLabels, state: Any, rnd: Round, random_state: Any) -> pd.DataFrame:
    """A program's output step on one partition, as its result table."""
    _, (post, extras) = rnd.step(block, state, rnd.params)
    return posterior_frame(block, post, extras, random_state)


def fit_program(estimator, engine, coding: Coding, threads: int = 1,
                verbose: bool | None = None, callback: Any = None) -> Program:
    """Fit ``estimator`` on the partitions of ``engine``; returns the finished program.

    Sets the estimator's worker model (``workers_``, ``classes_``, ``history_``,
    ``n_iter_``, ``converged_`` and the method's own attributes: ``confusions_``,
    ``skills_``, ...); the per-task results come from ``engine.outputs(program.output())``.
    """
    check_params(estimator)
    program = program_for(estimator, coding.workers, coding.classes, threads)
    estimator.history_ = []
    estimator.n_iter_ = 0
    estimator.converged_ = True
    with progress.start(getattr(estimator, "max_iter", None), type(estimator).__name__, verbose,
                        callback) as estimator._progress:
        try:
            rounds = program.rounds()
            stats = None
            while True:
                try:
                    rnd = rounds.send(stats)
                except StopIteration:
                    break
                stats = engine.map_reduce(rnd, stateful=program.stateful)
        finally:
            del estimator._progress
    estimator.workers_ = coding.workers
    estimator.classes_ = coding.classes
    return program


def collect_results(estimator, program: Program, frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Gather the partitions' tables into the estimator's ``labels_`` and ``probas_``.

    Tasks come out sorted by id (the in-memory order; first-seen order when ids of mixed
    types cannot be sorted).  Returns the whole result table in that order.
    """
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    try:
        frame = frame.sort_values("task", kind="stable", ignore_index=True)
    except TypeError:  # mixed, unorderable ids
        pass
    tasks = pd.Index(frame["task"].to_numpy(), name="task")
    if tasks.has_duplicates:  # an engine bug, never the user's: a task split across partitions
        raise RuntimeError(f"task {tasks[tasks.duplicated()][0]!r} came out of two partitions")
    classes = estimator.classes_
    p_cols = [f"p_{c}" for c in classes]
    proba = frame[p_cols].to_numpy()
    estimator.tasks_ = tasks
    estimator.probas_ = pd.DataFrame(proba, index=tasks, columns=classes)
    estimator.labels_ = pd.Series(frame["label"].to_numpy(), index=tasks, name="label")
    estimator.label_codes_ = classes.get_indexer(estimator.labels_)
    extra = [c for c in frame.columns if c not in {"task", "label", "confidence", *p_cols}]
    program.collect({c: pd.Series(frame[c].to_numpy(), index=tasks) for c in extra})
    return frame


class LocalEngine:
    """Partitions held in this process: the reference engine, and the one tests use to
    check that a program does not depend on how the answers are partitioned.

    Parameters
    ----------
    blocks : list of CrowdLabels
        Coded partitions (:meth:`Coding.encode`); every task's answers in one of them.
    """

    def __init__(self, blocks: list[CrowdLabels]) -> None:
        self.blocks = [b for b in blocks if b is not None]
        if not self.blocks:
            raise ValueError("no crowd answers to aggregate")
        self.states: list[Any] = [None] * len(self.blocks)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, n_partitions: int, columns: Columns = Columns(),
                   classes: Any = None) -> tuple["LocalEngine", Coding]:
        """Split an answer table into ``n_partitions`` by task hash; returns the engine and
        the coding."""
        frame = strip_columns(frame, columns)
        coding = Coding.from_values(frame[columns.worker], frame[columns.label], classes)
        part = bucket_of(frame[columns.task], n_partitions)
        blocks = [coding.encode(frame[part == i], columns, f"partition {i}") for i in range(n_partitions)]
        return cls(blocks), coding

    def map_reduce(self, rnd: Round, stateful: bool = False) -> dict:
        parts = []
        for i, block in enumerate(self.blocks):
            self.states[i], stats = rnd.step(block, self.states[i], rnd.params)
            parts.append(stats)
        return combine_all(parts)

    def outputs(self, rnd: Round, random_state: Any) -> Iterator[pd.DataFrame]:
        for block, state in zip(self.blocks, self.states):
            yield apply_output(block, state, rnd, random_state)


def running_sum(acc: dict | None, stats: dict) -> dict:
    """``combine`` with a start: the streaming engine's one-pass reduction."""
    return stats if acc is None else combine(acc, stats)
