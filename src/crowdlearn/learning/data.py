"""Aligning features with crowd labels, and the per-task answer tensors used in training.

Conventions: ``X`` has one row per task of ``labels`` in the order of ``labels.tasks`` (task
code n <-> row n).  :func:`align_features` accepts

* ``X=None``: the features attached to ``labels`` (``labels.with_features``);
* a DataFrame: rows looked up by task id (``X.loc[labels.tasks]``; ids compared by value when
  their types differ, so a table read with pandas finds the tasks of answers read as text);
* an array with exactly ``labels.n_tasks`` rows: row n is task code n;
* an array with more rows plus ``task_index`` (the ids of X's rows): rows looked up by id, or,
  without ``task_index``, when ``labels.tasks`` are integers from 0 (task 0 among them) below
  ``len(X)``, they index rows; other ids need ``task_index`` (1-based ids, or ids whose task 0
  has no answer, could not be told from 0-based ones).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core.data import CrowdLabels
from ..core.ids import positions_by_value
from .torch_utils import torch

__all__ = ["align_features", "check_features", "TaskAnswers", "annotation_matrix", "iterate_minibatches",
           "DENSE_LIMIT"]

#: largest ``n_tasks * n_workers`` for which :func:`annotation_matrix` returns the dense form
DENSE_LIMIT = 5_000_000


def check_features(X, what: str = "X", rows=None) -> np.ndarray:
    """2-D finite float array, or one ``ValueError`` naming the problem.

    A NaN or infinite value is named by its first row and column (``rows``: the ids of the
    rows, e.g. task ids, to name the row by; default its position), so that it can be found
    in the file it came from.
    """
    try:
        X = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a numeric array (n_samples, n_features)") from None
    if X.ndim < 2:
        raise ValueError(f"{what} must be 2-D (n_samples, n_features), got shape {X.shape}")
    X = X.reshape(len(X), -1)
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{what} is empty (shape {X.shape})")
    finite = np.isfinite(X)
    if not finite.all():
        bad_rows = np.flatnonzero(~finite.all(axis=1))
        i = int(bad_rows[0])
        j = int(np.flatnonzero(~finite[i])[0])
        where = f"the row of task {rows[i]!r}" if rows is not None and len(rows) == len(X) else f"row {i}"
        raise ValueError(f"{what} contains NaN or infinite values: {X[i, j]} in {where}, column {j} "
                         f"({len(bad_rows)} row(s) of {len(X)} hold one)")
    return X


def align_features(X, labels: CrowdLabels, task_index=None) -> np.ndarray:
    """Rows of ``X`` in the order of ``labels.tasks`` (see the module docstring)."""
    if not isinstance(labels, CrowdLabels):
        raise ValueError(f"labels must be a CrowdLabels, got {type(labels).__name__}")
    if X is None:
        if labels.features is None:
            raise ValueError("no features: pass X or attach them with labels.with_features(X)")
        X = labels.features
    if isinstance(X, pd.DataFrame):
        task_index, X = X.index, X.to_numpy()
    rows = None
    if task_index is not None:
        rows = pd.Index(task_index)
    elif X is not None and len(X) == labels.n_tasks:
        rows = labels.tasks  # row n is task code n
    X = check_features(X, rows=rows)
    if task_index is not None:
        task_index = pd.Index(task_index)
        if len(task_index) != len(X):
            raise ValueError(f"task_index has {len(task_index)} entries but X has {len(X)} rows")
        # by value: answers read from a text file name task "17", a feature table read with
        # pandas task 17; a repeated id is refused by name (pandas' get_indexer raised its
        # InvalidIndexError)
        pos = positions_by_value(task_index, labels.tasks, "the task ids of X's rows")
        if (pos < 0).any():
            missing = list(labels.tasks[pos < 0][:5])
            raise ValueError(f"X has no row for task(s) {missing}")
        return X[pos]
    if len(X) == labels.n_tasks:
        return X
    tasks = labels.tasks
    # integer ids index the rows only when they include 0: ids 1..n of a 1-based table whose
    # first task went unanswered would otherwise take every row one place off, silently
    if pd.api.types.is_integer_dtype(tasks) and len(tasks) and tasks.min() == 0 and tasks.max() < len(X):
        return X[np.asarray(tasks, dtype=np.int64)]
    raise ValueError(
        f"X must have one row per task of labels ({labels.n_tasks} rows), got {len(X)}; "
        "pass a DataFrame indexed by task or task_index (integer task ids index X's rows "
        "without them only when they start at 0)"
    )


@dataclass
class TaskAnswers:
    """Padded per-task answers: task n's answers are ``workers[n, :count[n]]`` / ``answers[n, :count[n]]``.

    ``mask[n, a]`` is True for a real answer; padding holds worker 0 / answer 0 and is masked.
    Padding to the largest number of answers of a task keeps a mini-batch one dense gather
    ((B, A) indices) instead of a ragged edge list.
    """

    workers: "torch.Tensor"  # (N, A) int64
    answers: "torch.Tensor"  # (N, A) int64
    mask: "torch.Tensor"  # (N, A) bool

    @classmethod
    def from_labels(cls, labels: CrowdLabels, device="cpu") -> "TaskAnswers":
        ptr = labels.task_ptr.astype(np.int64)
        counts = np.diff(ptr)
        a = max(int(counts.max(initial=0)), 1)
        n = labels.n_tasks
        slot = np.arange(labels.n_labels) - np.repeat(ptr[:-1], counts)  # position within its task
        w = np.zeros((n, a), np.int64)
        y = np.zeros((n, a), np.int64)
        m = np.zeros((n, a), bool)
        w[labels.task, slot] = labels.worker
        y[labels.task, slot] = labels.label
        m[labels.task, slot] = True
        dev = torch.device(device) if not isinstance(device, torch.device) else device
        return cls(torch.as_tensor(w, device=dev), torch.as_tensor(y, device=dev),
                   torch.as_tensor(m, device=dev))

    def __getitem__(self, idx) -> "TaskAnswers":
        return TaskAnswers(self.workers[idx], self.answers[idx], self.mask[idx])


def annotation_matrix(labels: CrowdLabels, limit: int = DENSE_LIMIT):
    """Dense (n_tasks, n_workers) answer matrix with -1 for missing, when ``N * W <= limit``.

    Larger problems get the long format instead: a tuple ``(task, worker, label)`` of int64
    arrays (the dense matrix of e.g. 50 000 tasks x 10 000 workers would not fit in memory).
    A worker answering a task twice keeps its last answer in the dense form.
    """
    n, w = labels.n_tasks, labels.n_workers
    if n * w <= limit:
        mat = np.full((n, w), -1, dtype=np.int64)
        mat[labels.task, labels.worker] = labels.label
        return mat
    return (labels.task.astype(np.int64), labels.worker.astype(np.int64), labels.label.astype(np.int64))


def iterate_minibatches(indices: np.ndarray, batch_size: int, rng: np.random.Generator,
                        shuffle: bool = True, drop_last: bool = False):
    """Yield arrays of task indices in batches, shuffled by ``rng`` (the only randomness)."""
    indices = np.asarray(indices)
    order = rng.permutation(indices) if shuffle else indices
    b = max(1, min(int(batch_size), len(order)))
    stop = len(order) - len(order) % b if drop_last and len(order) >= b else len(order)
    for s in range(0, stop, b):
        yield order[s : s + b]
