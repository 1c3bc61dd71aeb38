"""CrowdFlower / Figure Eight (Appen) "full" report CSV: one row per judgment.

Columns: ``_unit_id`` (the row of the job's data), ``_id`` (the judgment), ``_worker_id``,
``_golden`` (``true`` on test-question units), ``_tainted`` (``true`` when the contributor
was later found untrusted), ``_trust``, ``_missed``, times and places (``_created_at``,
``_country``, ...), then one column per question (its CML ``name``), ``<question>_gold``
(the accepted answers of test questions, several separated by new lines),
``<question>_gold_reason``, and the job's input columns.

Mapping
-------
- task: ``_unit_id``.
- worker: ``_worker_id``.
- question: the column chosen by ``question=``; by default the only question that has a
  ``<question>_gold`` column.  A job without test questions has no such column: name the
  question then (the error lists the candidate columns).
- label: the question's cell; an empty cell (a question left unanswered, or hidden by a
  CML ``only-if``) is not an answer and is dropped.
- gold: ``<question>_gold`` on ``_golden`` units.  Workers' judgments on test questions are
  kept as answers.  A test question that accepts several answers gives no gold (truth here
  is one class).
- status: tainted judgments (``_tainted`` true) are dropped by default, as CrowdFlower drops
  them from its own aggregates; the kept statuses are ``"trusted"`` by default; pass
  ``statuses=("trusted", "tainted")`` to keep all.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from .common import ExportFrame, choose_question, collect_columns, fail, read_delimited, status_set

__all__ = ["read", "looks_like", "DEFAULT_STATUSES"]

DEFAULT_STATUSES = ("trusted",)

_TRUE = {"true", "1", "yes", "t"}


def looks_like(header: Iterable[str]) -> bool:
    """A CrowdFlower full report header: ``_unit_id`` and ``_worker_id``."""
    header = set(header)
    return "_unit_id" in header and "_worker_id" in header


def read(
    path: str | Path | pd.DataFrame,
    *,
    question: str | None = None,
    statuses: Iterable[str] | None = None,
    encoding: str | None = None,
) -> ExportFrame:
    """Read a CrowdFlower full report CSV (see the module docstring for the mapping)."""
    table = read_delimited(path, sep=None, encoding=encoding)
    path = table.name  # what messages name: the file, or "DataFrame"
    header, cols = table.header, table.columns
    for need in ("_unit_id", "_worker_id"):
        if need not in cols:
            fail(path, "line 1", need, f"missing from the header; the file has columns {header}")
    with_gold = [h[: -len("_gold")] for h in header if h.endswith("_gold") and h[: -len("_gold")] in cols]
    # any column of the job's own (not CrowdFlower's _fields, not gold) can be a question
    candidates = [h for h in header if not h.startswith("_") and not h.endswith(("_gold", "_gold_reason"))]
    if question is None and not with_gold:
        raise ValueError(
            f"{path}: no <question>_gold column tells which column is the question; choose one "
            f"with question=NAME among {', '.join(repr(c) for c in candidates) or 'none'}"
        )
    q = choose_question(path, candidates if question is not None else with_gold, question)
    gold_col = f"{q}_gold" if f"{q}_gold" in cols else None
    keep = status_set(path, statuses, DEFAULT_STATUSES, "crowdflower")
    n = len(table)
    tainted = (
        _flag(cols["_tainted"]) if "_tainted" in cols else np.zeros(n, dtype=bool)
    )
    mask = np.where(tainted, "tainted" in keep, "trusted" in keep)
    dropped = int((~mask).sum())
    gold = None
    if gold_col is not None:
        accepted = pd.Series(cols[gold_col], dtype=object).str.strip()
        # a test question accepting several answers (one per line) gives no gold
        accepted = accepted.where(~accepted.str.contains("\n", regex=False), "")
        if "_golden" in cols:
            accepted = accepted.where(_flag(cols["_golden"]), "")
        gold = accepted.tolist()
    return collect_columns(
        path, "crowdflower", q, table.where,
        task=cols["_unit_id"], worker=cols["_worker_id"], label=cols[q], keep=mask, gold=gold,
        fields=("_unit_id", "_worker_id", gold_col or ""),
        dropped=f"{dropped} tainted judgments dropped" if dropped else "",
    )


def _flag(values) -> np.ndarray:
    """CrowdFlower's true/false cells as booleans."""
    return pd.Series(values, dtype=object).str.strip().str.lower().isin(_TRUE).to_numpy()
