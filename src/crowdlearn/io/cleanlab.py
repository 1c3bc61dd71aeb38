"""cleanlab's multi-annotator matrix: tasks x annotators, one class per cell, NaN = no answer
(read and write).

``cleanlab.multiannotator.get_label_quality_multiannotator(labels_multiannotator, ...)``
takes a DataFrame or array of shape (n_examples, n_annotators) holding class indices
``0..K-1``, with NaN where an annotator did not label the example.  On disk (CSV, TSV or
Parquet) the first column holds the task ids when its header is empty, ``task`` or
``index``; otherwise every column is an annotator and tasks are the row positions
``0..N-1``.

Reading: cells are text; a numeric matrix written with NaN has float cells (``1.0``),
which are read as the integers they are (``"1"``).  A task whose row is all empty has no
answer and is not in the table.  Writing: :func:`to_matrix` / :func:`write` produce class
codes (what cleanlab needs; ``ids=True`` writes the class names instead), one answer per
(task, annotator).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..core.data import CrowdLabels
from .common import Collector, ExportFrame, fail, frame_table, read_delimited, source_name

__all__ = ["read", "write", "to_matrix", "INDEX_NAMES"]

#: first-column headers read as the task ids
INDEX_NAMES = ("", "task", "index", "Unnamed: 0")

_MISSING = {"", "nan", "NaN", "NA", "<NA>", "None", "null"}


def _as_int_text(values: list[str]) -> list[str]:
    """``["1.0", "", "2.0"]`` -> ``["1", "", "2"]`` when every number is integral."""
    try:
        nums = [float(v) for v in values if v]
    except ValueError:
        return values
    if not all(np.isfinite(n) and float(n).is_integer() for n in nums):
        return values
    return [str(int(float(v))) if v else "" for v in values]


def read(path: str | Path | pd.DataFrame, *, encoding: str | None = None) -> ExportFrame:
    """Read a tasks x annotators matrix (CSV/TSV or Parquet file, or a DataFrame as cleanlab
    takes it, whose index is the tasks) into task, worker, label text."""
    if isinstance(path, pd.DataFrame) or Path(path).suffix.lower() in (".parquet", ".pq"):
        name = source_name(path)
        if isinstance(path, pd.DataFrame):
            frame = path
        else:
            try:
                frame = pd.read_parquet(path)
            except ImportError as exc:
                raise ValueError(f"{path}: reading Parquet needs pyarrow") from exc
        if not len(frame.columns) or str(frame.columns[0]) not in INDEX_NAMES:
            frame = frame.rename_axis("task").reset_index()  # the index holds the tasks
        table = frame_table(frame, name)
    else:
        table = read_delimited(path, sep=None, encoding=encoding)
    path, header, columns = table.name, table.header, table.columns
    if header and header[0] in INDEX_NAMES:
        tasks, task_field = columns[header[0]], header[0]
        annotators = header[1:]
    else:
        tasks, task_field = [str(i) for i in range(len(table))], None
        annotators = header
    if not annotators:
        fail(path, "line 1", None, "no annotator columns")
    n = len(table)
    cells = [v if v not in _MISSING else "" for a in annotators for v in columns[a]]
    every = _as_int_text(cells)
    out = Collector(path, "cleanlab")
    for i in range(n):  # row by row: answers in file order, as a long table would list them
        for j, a in enumerate(annotators):
            cell = every[j * n + i]
            if cell:
                out.add(out.need(table.where(i), task_field or "task", tasks[i]), a, cell)
    return out.frame()


def to_matrix(labels: CrowdLabels, *, ids: bool = False) -> pd.DataFrame:
    """The tasks x annotators matrix cleanlab takes: float class codes with NaN (or, with
    ``ids``, the class names with None), index = tasks, columns = workers."""
    key = labels.task.astype(np.int64) * max(labels.n_workers, 1) + labels.worker
    if len(np.unique(key)) != labels.n_labels:
        raise ValueError(
            f"{labels.n_labels - len(np.unique(key))} repeated (task, worker) answer(s): the "
            "matrix holds one answer per annotator and task; keep one "
            "(CrowdLabels.from_frame(..., duplicates='last'))"
        )
    mat = np.full((labels.n_tasks, labels.n_workers), np.nan)
    mat[labels.task, labels.worker] = labels.label
    frame = pd.DataFrame(mat, index=labels.tasks.rename("task"), columns=labels.workers.rename(None))
    if ids:
        names = np.asarray(labels.classes, dtype=object)
        filled = np.where(np.isnan(mat), None, names[np.nan_to_num(mat).astype(np.int64)])
        frame = pd.DataFrame(filled, index=frame.index, columns=frame.columns)
    return frame


def write(labels: CrowdLabels, path: str | Path, *, ids: bool = False) -> pd.Index:
    """Write the matrix (CSV/TSV by extension, or Parquet) with a ``task`` first column;
    returns the classes in code order (code k is ``classes[k]``)."""
    path = Path(path)
    frame = to_matrix(labels, ids=ids)
    if not ids:
        frame = frame.astype("Int64")  # codes written as 0, 1, ... not 0.0, 1.0
    if path.suffix.lower() in (".parquet", ".pq"):
        frame.to_parquet(path)
    else:
        frame.to_csv(path, sep="\t" if path.suffix.lower() in (".tsv", ".tab") else ",")
    return labels.classes
