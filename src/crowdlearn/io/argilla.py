"""Argilla records exported as JSON or JSON Lines (``FeedbackDataset`` records of Argilla 1.x,
``dataset.records.to_json`` / ``to_list(flatten=False)`` of Argilla 2.x).

A record holds ``fields`` (the input), ``external_id`` and/or ``id``, ``suggestions`` (a
model's proposals) and the annotators' ``responses``, in one of two shapes:

- 1.x: ``"responses": [{"user_id": U, "values": {QUESTION: {"value": V}}, "status": S}]``
- 2.x: ``"responses": {QUESTION: [{"value": V, "user_id": U, "status": S}]}``

- Hugging Face Hub (``FeedbackDataset.push_to_huggingface``, then e.g. ``to_json``): one
  key per question holding ``[{"user_id": U, "value": V, "status": S}]``.

A top-level object with a ``records`` list is read as that list.

Mapping
-------
- task: ``external_id``; else ``id``; else the ``fields`` values joined
  (:func:`crowdlearn.io.common.join_inputs`, in key order; in the Hub shape, the record's
  top-level text values other than ``metadata`` and suggestions).
- worker: the response's ``user_id``.
- question: a question name; several need ``question=``.  Label and rating questions are
  read (a rating as the class ``"4"`` for now, not as a number); multi-label and ranking
  values (lists) are refused for now.
- status: only ``submitted`` responses are kept by default; ``discarded`` and ``draft`` ones
  are not final answers (pass ``statuses=`` to keep them).  A response without a status
  is submitted, as Argilla takes it.
- gold: Argilla records carry none (``suggestions`` are a model's, not gold).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
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

DEFAULT_STATUSES = ("submitted",)


def looks_like(records: Any) -> bool:
    """A list of records with ``responses`` (or an object holding such a ``records`` list)."""
    if isinstance(records, dict) and isinstance(records.get("records"), list):
        records = records["records"]
    if not (isinstance(records, list) and records and isinstance(records[0], dict)):
        return False
    first = records[0]
    return ("responses" in first and "annotations" not in first) or bool(_hub_responses(first))


def _is_response_list(value: Any) -> bool:
    return (isinstance(value, list) and bool(value)
            and all(isinstance(r, dict) and "user_id" in r and "value" in r for r in value))


def _hub_responses(record: dict) -> dict[str, list]:
    """The Hugging Face Hub shape (``FeedbackDataset.push_to_huggingface``): one key per
    question holding its list of ``{"user_id", "value", "status"}``."""
    return {k: v for k, v in record.items() if _is_response_list(v)}


def _responses(path, where: str, record: dict) -> Iterator[tuple[str, str, Any, Any, Any]]:
    """(field path, question, value, user_id, status) for every response of a record.

    A response without a status is submitted (Argilla's default for a given response).
    """
    if "responses" in record:
        responses = record.get("responses") or []
        prefix = "responses."
    else:
        responses = _hub_responses(record)
        prefix = ""
    if isinstance(responses, dict):  # 2.x (and the Hub shape): question -> list of responses
        for name, items in responses.items():
            if not isinstance(items, list):
                fail(path, where, f"{prefix}{name}", "expected a list of responses")
            for k, item in enumerate(items):
                field = f"{prefix}{name}[{k}]"
                if not isinstance(item, dict):
                    fail(path, where, field, "expected a response object")
                yield (field, str(name), item.get("value"), item.get("user_id"),
                       item.get("status") or "submitted")
    elif isinstance(responses, list):  # 1.x: one response per user, values per question
        for k, item in enumerate(responses):
            field = f"responses[{k}]"
            if not isinstance(item, dict):
                fail(path, where, field, "expected a response object")
            values = item.get("values") or {}
            if not isinstance(values, dict):
                fail(path, where, f"{field}.values", "expected an object of question values")
            for name, value in values.items():
                if isinstance(value, dict):
                    value = value.get("value")
                yield (f"{field}.values.{name}", str(name), value, item.get("user_id"),
                       item.get("status") or "submitted")
    else:
        fail(path, where, "responses", f"expected a list or an object, got {type(responses).__name__}")


def read(
    path: str | Path,
    *,
    question: str | None = None,
    statuses: Iterable[str] | None = None,
    encoding: str | None = None,
) -> ExportFrame:
    """Read an Argilla records export (see the module docstring for the mapping)."""
    doc, lines = read_json(path, encoding)
    if isinstance(doc, dict) and isinstance(doc.get("records"), list):
        doc = doc["records"]
    records, places = as_records(doc, lines)
    questions: list[str] = []
    for rec, where in zip(records, places):
        if not isinstance(rec, dict):
            fail(path, where, None, f"expected a record object, got {type(rec).__name__}")
        for _, name, *_rest in _responses(path, where, rec):
            if name not in questions:
                questions.append(name)
    q = choose_question(path, questions, question)
    keep = status_set(path, statuses, DEFAULT_STATUSES, "argilla")
    out = Collector(path, "argilla", q)
    dropped = 0
    for rec, where in zip(records, places):
        key = next((k for k in ("external_id", "id") if id_text(rec.get(k))), None)
        if key is not None:
            task = out.need(where, key, rec[key])
        else:
            fields = rec.get("fields")
            if fields is None and "responses" not in rec:  # the Hub shape: fields are top-level text
                fields = {k: v for k, v in rec.items()
                          if isinstance(v, str) and k not in ("metadata", "vectors")
                          and not k.endswith(("-suggestion", "-suggestion-metadata"))}
            if not isinstance(fields, dict) or not fields:
                fail(path, where, "external_id", "missing, and the record has no fields to identify it by")
            task = join_inputs(list(fields.values()))
        for field, name, value, user, status in _responses(path, where, rec):
            if name != q:
                continue
            if id_text(status).lower() not in keep:
                dropped += 1
                continue
            if isinstance(value, (list, dict)):
                fail(path, where, field,
                     f"{value!r}: multi-label and ranking answers are not read yet; "
                     "only label and rating questions")
            label = id_text(value)
            if not label:
                continue
            out.add(task, out.need(where, field.rsplit(".values", 1)[0] + ".user_id", user), label)
    return out.frame(f"{dropped} responses dropped by status" if dropped else "")
