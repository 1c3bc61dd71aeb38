"""Amazon Mechanical Turk batch results CSV ("Download CSV" on a batch's results page).

Columns: ``HITId``, ``AssignmentId``, ``WorkerId``, ``AssignmentStatus``, times, then
``Input.<field>`` (the HIT's input row) and ``Answer.<field>`` (the worker's form fields).
One row per assignment.  Older files are in cp1252 (Windows "ANSI"); the encoding is
detected (:func:`crowdlearn.io.common.read_text`) unless ``encoding=`` is given.

Mapping
-------
- worker: ``WorkerId``.
- task: ``HITId``; without it, the ``Input.*`` values joined
  (:func:`crowdlearn.io.common.join_inputs`).
- label: ``Answer.<question>``; several answer fields (a free-text comment beside the
  choice, say) need ``question=``.  Radio buttons that MTurk writes as one true/false column
  per option (``Answer.<question>.<option>``, two or more of them) form the question
  ``<question>``, whose answer is the option marked true.  An empty answer is not an answer
  and is dropped.
- gold: MTurk batch files carry none.
- status: ``AssignmentStatus``; kept by default: ``Submitted`` and ``Approved``;
  ``Rejected`` assignments are dropped (pass ``statuses=`` to change it).  A file without
  the column keeps every row.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from .common import (
    ExportFrame,
    choose_question,
    collect_columns,
    fail,
    joined_inputs,
    read_delimited,
    status_mask,
    status_set,
)

__all__ = ["read", "looks_like", "DEFAULT_STATUSES"]

DEFAULT_STATUSES = ("Submitted", "Approved")

_BOOL = {"true", "false", ""}


def looks_like(header: Iterable[str]) -> bool:
    """An MTurk batch header: ``WorkerId`` and ``Answer.*`` columns."""
    header = list(header)
    return "WorkerId" in header and any(h.startswith("Answer.") for h in header)


def _questions(header: list[str], cols: dict[str, list[str]]) -> dict[str, list[str]]:
    """Question name -> its answer columns (one column, or the true/false option columns)."""
    answers = [h for h in header if h.startswith("Answer.")]
    groups: dict[str, list[str]] = {}
    for h in answers:
        name = h[len("Answer."):]
        if "." in name and all(v.strip().lower() in _BOOL for v in cols[h]):
            groups.setdefault(name.rsplit(".", 1)[0], []).append(h)
    questions: dict[str, list[str]] = {}
    grouped = set()
    for q, members in groups.items():
        if len(members) >= 2:
            questions[q] = members
            grouped.update(members)
    for h in answers:
        if h not in grouped:
            questions[h[len("Answer."):]] = [h]
    return questions


def read(
    path: str | Path | pd.DataFrame,
    *,
    question: str | None = None,
    statuses: Iterable[str] | None = None,
    encoding: str | None = None,
) -> ExportFrame:
    """Read an MTurk batch results CSV (see the module docstring for the mapping)."""
    table = read_delimited(path, sep=None, encoding=encoding)
    path = table.name  # what messages name: the file, or "DataFrame"
    header, cols = table.header, table.columns
    if "WorkerId" not in cols:
        fail(path, "line 1", "WorkerId", f"missing from the header; the file has columns {header}")
    questions = _questions(header, cols)
    q = choose_question(path, list(questions), question, prefix="Answer.", what="answer field")
    answer_cols = questions[q]
    inputs = [h for h in header if h.startswith("Input.")]
    if "HITId" not in cols and not inputs:
        fail(path, "line 1", "HITId", "missing, and there are no Input. columns to identify tasks by")
    keep = status_set(path, statuses, DEFAULT_STATUSES, "mturk")
    mask = status_mask(cols.get("AssignmentStatus"), keep)
    dropped = int((~mask).sum()) if mask is not None else 0
    if len(answer_cols) == 1:
        label = cols[answer_cols[0]]
    else:  # one true/false column per option: the answer is the option marked true
        marked = np.column_stack([
            pd.Series(cols[c], dtype=object).str.strip().str.lower().eq("true").to_numpy()
            for c in answer_cols
        ])
        several = marked.sum(axis=1) > 1
        if several.any():
            i = int(np.argmax(several))
            chosen = [c for c, m in zip(answer_cols, marked[i]) if m]
            fail(path, table.where(i), f"Answer.{q}", f"several options marked true: {chosen}")
        options = np.array([c.rsplit(".", 1)[1] for c in answer_cols] + [""], dtype=object)
        pick = np.where(marked.any(axis=1), marked.argmax(axis=1), len(answer_cols))
        label = options[pick].tolist()
    task = cols["HITId"] if "HITId" in cols else joined_inputs([cols[c] for c in inputs])
    return collect_columns(
        path, "mturk", q, table.where,
        task=task, worker=cols["WorkerId"], label=label, keep=mask,
        fields=("HITId" if "HITId" in cols else ", ".join(inputs), "WorkerId", ""),
        dropped=f"{dropped} assignments dropped by status" if dropped else "",
    )
