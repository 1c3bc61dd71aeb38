"""Toloka results TSV (the pool's "Download results" file, or toloka-kit's
``get_assignments_df``).

Columns: ``INPUT:<field>`` (the task's input), ``OUTPUT:<field>`` (the Toloker's answer per
output field), ``GOLDEN:<field>`` (the known answer of control tasks), ``HINT:*``, and
``ASSIGNMENT:*`` (``worker_id``, ``status``, ``assignment_id``, optionally ``task_id``,
``task_suite_id``, ...).  One row per (task, assignment).

Mapping
-------
- worker: ``ASSIGNMENT:worker_id``.
- task: ``ASSIGNMENT:task_id`` when the file has it (it is not among Toloka's default
  download fields); else the ``INPUT:*`` values joined
  (:func:`crowdlearn.io.common.join_inputs`): one input field is the id itself, several
  become a JSON array of their values in column order.
- label: ``OUTPUT:<question>``; several output fields need ``question=``.  An empty
  output cell (a skipped or optional field) is not an answer and is dropped.
- gold: ``GOLDEN:<question>`` where not empty (control tasks).  Workers' answers on control
  tasks are kept: they are real answers and tell about the workers.
- status: ``ASSIGNMENT:status``; kept by default: ``SUBMITTED``, ``APPROVED`` and
  ``ACCEPTED`` (the API's name for approved).  ``REJECTED`` assignments (and ``SKIPPED``,
  ``EXPIRED``, ``ACTIVE``, which carry no answer) are dropped: the requester rejected them
  as bad work.  Pass ``statuses=`` to change it, e.g. ``statuses=("SUBMITTED", "APPROVED",
  "REJECTED")`` to study rejected work too.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

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

#: assignment statuses kept unless ``statuses=`` says otherwise
DEFAULT_STATUSES = ("SUBMITTED", "APPROVED", "ACCEPTED")

WORKER = "ASSIGNMENT:worker_id"
TASK = "ASSIGNMENT:task_id"
STATUS = "ASSIGNMENT:status"


def looks_like(header: Iterable[str]) -> bool:
    """A Toloka results header: ``OUTPUT:`` or ``ASSIGNMENT:`` columns."""
    return any(h.startswith(("OUTPUT:", "ASSIGNMENT:")) for h in header)


def read(
    path: str | Path | pd.DataFrame,
    *,
    question: str | None = None,
    statuses: Iterable[str] | None = None,
    encoding: str | None = None,
) -> ExportFrame:
    """Read a Toloka results TSV (see the module docstring for the mapping)."""
    table = read_delimited(path, sep=None, encoding=encoding)
    path = table.name  # what messages name: the file, or "DataFrame"
    header, cols = table.header, table.columns
    if WORKER not in cols:
        fail(path, "line 1", WORKER, f"missing from the header; the file has columns {header}")
    outputs = [h[len("OUTPUT:"):] for h in header if h.startswith("OUTPUT:")]
    q = choose_question(path, outputs, question, prefix="OUTPUT:", what="output field")
    out_col = f"OUTPUT:{q}"
    gold_col = f"GOLDEN:{q}" if f"GOLDEN:{q}" in cols else None
    inputs = [h for h in header if h.startswith("INPUT:")]
    if TASK not in cols and not inputs:
        fail(path, "line 1", TASK, "missing, and there are no INPUT: columns to identify tasks by")
    keep = status_set(path, statuses, DEFAULT_STATUSES, "toloka")
    mask = status_mask(cols.get(STATUS), keep)
    dropped = int((~mask).sum()) if mask is not None else 0
    task = cols[TASK] if TASK in cols else joined_inputs([cols[c] for c in inputs])
    return collect_columns(
        path, "toloka", q, table.where,
        task=task, worker=cols[WORKER], label=cols[out_col],
        gold=cols[gold_col] if gold_col is not None else None,
        keep=mask, fields=(TASK if TASK in cols else ", ".join(inputs), WORKER, gold_col or ""),
        dropped=f"{dropped} assignments dropped by status" if dropped else "",
    )
