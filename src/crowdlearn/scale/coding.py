"""Integer codes shared by every partition, and the coded block of one partition.

A fit that never holds all the answers in one place still needs one worker model, so worker
ids and class labels get global codes: their distinct values (O(workers + classes), the size
of the worker model itself) are collected once and coded exactly as
:meth:`crowdlearn.CrowdLabels.from_frame` codes them in memory (sorted ids; ``1``, ``1.0``
and ``"1.0"`` one class).  Task ids are never coded globally: every engine first brings all
answers of a task into one partition (a hash shuffle in Dask, hash buckets on disk when
streaming), and each partition codes its own tasks.  A partition is then an ordinary
:class:`~crowdlearn.CrowdLabels` whose task index is local and whose worker and class indexes
are the global ones, so the in-memory kernels run on it unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import pandas as pd

from ..core.classes import class_codes
from ..core.data import CrowdLabels
from ..core.ids import factorize_ids, strip_frame

__all__ = ["Coding", "bucket_of", "Columns", "strip_columns"]


@dataclass(frozen=True)
class Columns:
    """Names of the task, worker and label columns of the answer tables."""

    task: str = "task"
    worker: str = "worker"
    label: str = "label"

    @property
    def names(self) -> list[str]:
        return [self.task, self.worker, self.label]


@dataclass(frozen=True)
class Coding:
    """Global codes of workers and classes.

    Attributes
    ----------
    workers : Index
        Worker ids in code order (sorted, as in memory; first-seen order for mixed types).
    classes : Index
        Classes in code order.
    label_values : Index
        Every distinct raw label value seen (before number spellings were merged).
    label_codes : ndarray
        The class code of each entry of ``label_values``.
    """

    workers: pd.Index
    classes: pd.Index
    label_values: pd.Index
    label_codes: np.ndarray

    @classmethod
    def from_values(cls, workers: Iterable[Any], labels: Iterable[Any],
                    classes: Iterable[Any] | None = None) -> "Coding":
        """Code the distinct worker ids and raw label values of all partitions.

        ``classes`` fixes the class set and order, as ``from_frame(classes=...)`` does.
        """
        workers = pd.Series(pd.unique(pd.Series(list(workers) if not hasattr(workers, "dtype") else workers)))
        raw = pd.Series(labels if hasattr(labels, "dtype") else list(labels))
        raw = raw.drop_duplicates().reset_index(drop=True)
        for what, values in (("worker", workers), ("label", raw)):
            if values.isna().any():
                raise ValueError(f"missing value in the {what} column")
        if classes is not None:
            # from_frame's own class matching (given order, number spellings)
            class_list = list(classes)
            try:
                probe = CrowdLabels.from_frame(
                    pd.DataFrame({"task": 0, "worker": np.arange(len(raw)), "label": raw}), classes=class_list)
            except ValueError as exc:  # the label is named; the probe table's row is not the user's
                raise ValueError(str(exc).split(" (row position")[0]) from None
            codes, class_index = probe.label[np.argsort(probe.worker)], probe.classes
        else:
            codes, class_index = class_codes(raw)
        _, worker_index = factorize_ids(workers, "worker")
        return cls(worker_index, pd.Index(class_index, name="class"), pd.Index(raw), np.asarray(codes, np.int32))

    @property
    def n_workers(self) -> int:
        return len(self.workers)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def codes(self, frame: pd.DataFrame, columns: Columns = Columns(), where: str = "a partition") -> tuple[np.ndarray, np.ndarray]:
        """Global worker and class codes of every row of ``frame``.

        A missing column or value, or a worker or label that the coding never saw, raises
        ``ValueError`` naming ``where``.
        """
        for col in columns.names:
            if col not in frame.columns:
                raise ValueError(f"{where}: no column {col!r}; it has {list(frame.columns)}")
            if frame[col].isna().any():
                raise ValueError(f"{where}: missing value in column {col!r}")
        worker = self.workers.get_indexer(frame[columns.worker])
        raw = self.label_values.get_indexer(frame[columns.label])
        for codes, what, col in ((worker, "worker", columns.worker), (raw, "label", columns.label)):
            if np.any(codes < 0):
                value = frame[col].to_numpy()[codes < 0][0]
                raise ValueError(f"{where}: {what} {value!r} was not seen when the ids were coded")
        return worker.astype(np.int32), self.label_codes[raw]

    def encode(self, frame: pd.DataFrame, columns: Columns = Columns(), where: str = "a partition") -> CrowdLabels | None:
        """The answers of ``frame`` as a block: local task codes, global worker and class
        codes (:meth:`codes`).  None for a frame without answers."""
        if len(frame) == 0:
            return None
        worker, label = self.codes(frame, columns, where)
        task, tasks = factorize_ids(frame[columns.task], "task")
        return CrowdLabels.from_codes(task, worker, label, tasks=tasks, workers=self.workers, classes=self.classes)


def strip_columns(frame: pd.DataFrame, columns: Columns = Columns()) -> pd.DataFrame:
    """``frame`` with the text of its task, worker and label columns stripped of surrounding
    whitespace, as :meth:`crowdlearn.CrowdLabels.from_frame` reads them in memory
    (:func:`~crowdlearn.core.ids.strip_text`; a blank becomes a missing value).  Applied to
    every chunk or partition as it is read, before the ids are hashed to buckets, so that
    ``"t1 "`` and ``"t1"`` are one task on every engine.  ``frame`` itself when nothing
    changes (:func:`~crowdlearn.core.ids.strip_frame`)."""
    return strip_frame(frame, columns.names)


def bucket_of(task_ids: pd.Series | pd.Index, n_buckets: int) -> np.ndarray:
    """The bucket (0..n_buckets-1) of every task id: a fixed 64-bit hash of the id modulo
    ``n_buckets``, so all answers of a task land in one bucket whichever file or chunk they
    come from."""
    h = pd.util.hash_pandas_object(pd.Series(np.asarray(task_ids)), index=False).to_numpy(np.uint64)
    return (h % np.uint64(n_buckets)).astype(np.int64)
