"""Label Studio JSON export (Export -> "JSON": a list of tasks with their annotations).

Each task: ``{"id": 7, "data": {...}, "annotations": [...], "predictions": [...]}``; each
annotation: ``completed_by`` (a user id, or ``{"id": ..., "email": ...}`` in some
versions), ``was_cancelled``, ``ground_truth``, and ``result``: a list of regions, each
``{"from_name": <control tag name>, "type": "choices", "value": {"choices": ["Cat"]}}``.
Exports from Label Studio 0.x name the list ``completions`` instead of ``annotations``.

Mapping
-------
- task: the task's ``id``; without it, the ``data`` values joined
  (:func:`crowdlearn.io.common.join_inputs`, in key order).
- worker: ``completed_by`` (its ``id`` when it is an object, else its ``email``).
- question: a result's ``from_name`` (the control tag's name); several control tags need
  ``question=``.  Read: ``choices`` (one choice; several choices per region are a
  multi-label answer, refused for now), and ``rating`` and ``number``, whose values are read
  as class labels for now (``"4"``), not as numbers.
- cancelled (skipped) annotations (``was_cancelled: true``) are dropped; pass
  ``statuses=("completed", "cancelled")`` to keep them when they hold a result.
- gold: annotations marked ``ground_truth: true`` give the task's gold label and are not
  counted as crowd answers (they are the reviewer's reference, and counting them would
  score the crowd against itself).
- ``predictions`` (a model's pre-annotations) are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .common import (
    Collector,
    ExportFrame,
    as_records,
    choose_question,
    fail,
    id_text,
    join_inputs,
    read_json,
    status_set,
)

__all__ = ["read", "looks_like", "DEFAULT_STATUSES"]

DEFAULT_STATUSES = ("completed",)

#: value keys read as a class label, in the order they are looked for
_VALUE_KEYS = ("choices", "rating", "number")


def looks_like(records: Any) -> bool:
    """A list of tasks with ``annotations`` (or ``completions``)."""
    return (
        isinstance(records, list)
        and bool(records)
        and isinstance(records[0], dict)
        and ("annotations" in records[0] or "completions" in records[0])
    )


def _annotations(task: dict) -> tuple[str, list]:
    key = "annotations" if "annotations" in task else "completions"
    return key, task.get(key) or []


def _label(path, where: str, field: str, value: Any) -> str | None:
    """The class label of one result's ``value``; None when it holds none we read."""
    if not isinstance(value, dict):
        fail(path, where, field, f"expected an object, got {type(value).__name__}")
    for key in _VALUE_KEYS:
        if key in value:
            got = value[key]
            if key == "choices":
                if not isinstance(got, list):
                    fail(path, where, f"{field}.choices", "expected a list of choices")
                if len(got) > 1:
                    fail(path, where, f"{field}.choices",
                         f"{len(got)} choices {got}: multi-label answers are not read yet; "
                         "only single-choice questions")
                if not got:
                    return None
                got = got[0]
            text = id_text(got)
            return text or None
    return None


def _worker(path, where: str, field: str, who: Any) -> str:
    if isinstance(who, dict):
        who = who.get("id", who.get("email"))
    text = id_text(who)
    if not text:
        fail(path, where, field, "missing: the annotation names no annotator")
    return text


def read(
    path: str | Path,
    *,
    question: str | None = None,
    statuses: Iterable[str] | None = None,
    encoding: str | None = None,
) -> ExportFrame:
    """Read a Label Studio JSON export (see the module docstring for the mapping)."""
    doc, lines = read_json(path, encoding)
    tasks, places = as_records(doc, lines)
    keep = status_set(path, statuses, DEFAULT_STATUSES, "labelstudio")
    # the questions: control tags (from_name) whose results hold a value we read
    questions: list[str] = []
    for task in tasks:
        for ann in _annotations(task)[1] if isinstance(task, dict) else ():
            for res in (ann.get("result") or ()) if isinstance(ann, dict) else ():
                if (isinstance(res, dict) and isinstance(res.get("value"), dict)
                        and any(k in res["value"] for k in _VALUE_KEYS)
                        and res.get("from_name") not in questions):
                    questions.append(res.get("from_name"))
    q = choose_question(path, [str(x) for x in questions], question, what="control tag (from_name)")
    out = Collector(path, "labelstudio", q)
    dropped = 0
    for task, where in zip(tasks, places):
        if not isinstance(task, dict):
            fail(path, where, None, f"expected a task object, got {type(task).__name__}")
        if task.get("id") is not None:
            task_id = out.need(where, "id", task["id"])
        else:
            data = task.get("data")
            if not isinstance(data, dict) or not data:
                fail(path, where, "id", "missing, and the task has no data to identify it by")
            task_id = join_inputs(list(data.values()))
        key, anns = _annotations(task)
        if not isinstance(anns, list):
            fail(path, where, key, "expected a list of annotations")
        for a, ann in enumerate(anns):
            field = f"{key}[{a}]"
            if not isinstance(ann, dict):
                fail(path, where, field, "expected an annotation object")
            cancelled = bool(ann.get("was_cancelled", False))
            gold = bool(ann.get("ground_truth", False))
            results = ann.get("result") or []
            if not isinstance(results, list):
                fail(path, where, f"{field}.result", "expected a list of results")
            label = None
            for r, res in enumerate(results):
                if isinstance(res, dict) and str(res.get("from_name")) == q:
                    label = _label(path, where, f"{field}.result[{r}].value", res.get("value"))
                    break
            if gold:
                if label is not None and not cancelled:
                    out.add_gold(where, f"{field}.result", task_id, label)
                continue
            if ("cancelled" if cancelled else "completed") not in keep:
                dropped += 1
                continue
            if label is None:
                continue
            out.add(task_id, _worker(path, where, f"{field}.completed_by", ann.get("completed_by")), label)
    return out.frame(f"{dropped} cancelled annotations dropped" if dropped else "")
