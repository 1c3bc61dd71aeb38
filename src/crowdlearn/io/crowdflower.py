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

from .common import Collector, ExportFrame, choose_question, fail, read_delimited, status_set

__all__ = ["read", "looks_like", "DEFAULT_STATUSES"]

DEFAULT_STATUSES = ("trusted",)

_TRUE = {"true", "1", "yes", "t"}


def looks_like(header: Iterable[str]) -> bool:
    """A CrowdFlower full report header: ``_unit_id`` and ``_worker_id``."""
    header = set(header)
    return "_unit_id" in header and "_worker_id" in header


def read(
    path: str | Path,
    *,
    question: str | None = None,
    statuses: Iterable[str] | None = None,
    encoding: str | None = None,
) -> ExportFrame:
    """Read a CrowdFlower full report CSV (see the module docstring for the mapping)."""
    table = read_delimited(path, sep=None, encoding=encoding)
    header, cols = table.header, table.columns
    for need in ("_unit_id", "_worker_id"):
        if need not in cols:
            fail(path, "line 1", need, f"missing from the header; the file has columns {header}")
    with_gold = [h[: -len("_gold")] for h in header if h.endswith("_gold") and h[: -len("_gold")] in cols]
    if question is None and not with_gold:
        candidates = [h for h in header if not h.startswith("_") and not h.endswith(("_gold", "_gold_reason"))]
        raise ValueError(
            f"{path}: no <question>_gold column tells which column is the question; choose one "
            f"with question=NAME among {', '.join(repr(c) for c in candidates) or 'none'}"
        )
    if question is not None and question not in with_gold:
        q = question if question in cols and not question.startswith("_") else None
        if q is None:
            choose_question(path, with_gold, question)  # raises, listing the questions
    else:
        q = choose_question(path, with_gold, question)
    gold_col = f"{q}_gold" if f"{q}_gold" in cols else None
    keep = status_set(path, statuses, DEFAULT_STATUSES, "crowdflower")
    tainted = cols.get("_tainted")
    golden = cols.get("_golden")
    out = Collector(path, "crowdflower", q)
    dropped = 0
    for i, line in enumerate(table.lines):
        where = f"line {line}"
        task = out.need(where, "_unit_id", cols["_unit_id"][i])
        if gold_col is not None and (golden is None or golden[i].strip().lower() in _TRUE):
            accepted = [g.strip() for g in cols[gold_col][i].splitlines() if g.strip()]
            if len(accepted) == 1:
                out.add_gold(where, gold_col, task, accepted[0])
        state = "tainted" if tainted is not None and tainted[i].strip().lower() in _TRUE else "trusted"
        if state not in keep:
            dropped += 1
            continue
        label = cols[q][i].strip()
        if label:
            out.add(task, out.need(where, "_worker_id", cols["_worker_id"][i]), label)
    return out.frame(f"{dropped} tainted judgments dropped" if dropped else "")
