"""Prodigy annotations as JSON Lines (``prodigy db-out DATASET > file.jsonl``).

One annotated example per line: the input (``text``, ``image``, ...), Prodigy's hashes
``_input_hash`` (the input) and ``_task_hash`` (input + question), the annotator
``_annotator_id`` (``<dataset>-<session>`` with named sessions) and ``_session_id``, and
``answer``: ``"accept"``, ``"reject"`` or ``"ignore"``.  Two kinds of example carry a class:

- binary: a ``label`` the annotator accepted or rejected ("is this text SPORTS?");
- choice: ``options`` (``[{"id": ..., "text": ...}]``) and ``accept``, the list of chosen
  option ids.

Mapping
-------
- task: ``_input_hash``; without it ``_task_hash``; without both, the input fields
  (``text``, ``html``, ``image``, ``audio``, ``video``, ``url`` present) joined
  (:func:`crowdlearn.io.common.join_inputs`).
- worker: ``_annotator_id``, else ``_session_id``.
- question: each binary ``label`` is its own question (accepting SPORTS and accepting
  POLITICS are different questions about the same input); all choice examples form the
  question ``"choice"``.  A file with several needs ``question=``.
- label: binary -> the answer, ``"accept"`` or ``"reject"``; choice -> the one chosen
  option id (several chosen ids are a multi-label answer, refused for now).  A rejected
  choice example, or one accepted with nothing chosen, says no option fits and carries no
  class: it is dropped.
- status: ``answer``; kept by default: ``accept`` and ``reject``; ``ignore`` (the
  annotator skipped the example) is dropped.
- gold: Prodigy datasets carry none.
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

__all__ = ["read", "looks_like", "DEFAULT_STATUSES", "CHOICE"]

DEFAULT_STATUSES = ("accept", "reject")

#: the question name of choice examples
CHOICE = "choice"

_INPUTS = ("text", "html", "image", "audio", "video", "url")
_MARKERS = ("_input_hash", "_task_hash", "_annotator_id", "_session_id")


def looks_like(records: Any) -> bool:
    """A list of examples with Prodigy's hashes or annotator fields."""
    return (
        isinstance(records, list)
        and bool(records)
        and isinstance(records[0], dict)
        and any(k in records[0] for k in _MARKERS)
    )


def _is_choice(example: dict) -> bool:
    return isinstance(example.get("options"), list) and "accept" in example


def _question(example: dict) -> str:
    return CHOICE if _is_choice(example) else id_text(example.get("label"))


def read(
    path: str | Path,
    *,
    question: str | None = None,
    statuses: Iterable[str] | None = None,
    encoding: str | None = None,
) -> ExportFrame:
    """Read a Prodigy JSONL export (see the module docstring for the mapping)."""
    doc, lines = read_json(path, encoding)
    examples, places = as_records(doc, lines)
    for ex, where in zip(examples, places):
        if not isinstance(ex, dict):
            fail(path, where, None, f"expected an example object, got {type(ex).__name__}")
    asked = [_question(ex) for ex in examples]
    questions = [name for name in dict.fromkeys(asked) if name]
    q = choose_question(path, questions, question, what="label")
    keep = status_set(path, statuses, DEFAULT_STATUSES, "prodigy")
    out = Collector(path, "prodigy", q)
    dropped = 0
    for ex, where, name in zip(examples, places, asked):
        if name != q:
            continue
        answer = id_text(ex.get("answer")).lower()
        if answer not in ("accept", "reject", "ignore"):
            fail(path, where, "answer", f"{ex.get('answer')!r} is not accept, reject or ignore")
        if answer not in keep:
            dropped += 1
            continue
        if q == CHOICE:
            chosen = ex.get("accept")
            if not isinstance(chosen, list):
                fail(path, where, "accept", "expected the list of chosen option ids")
            if len(chosen) > 1:
                fail(path, where, "accept",
                     f"{len(chosen)} options chosen {chosen}: multi-label answers are not read "
                     "yet; only single-choice examples")
            if answer != "accept" or not chosen:
                continue
            label = out.need(where, "accept", chosen[0])
        else:
            label = answer
        task_key = next((k for k in ("_input_hash", "_task_hash") if ex.get(k) is not None), None)
        if task_key is not None:
            task = out.need(where, task_key, ex[task_key])
        else:
            present = [k for k in _INPUTS if ex.get(k) is not None]
            if not present:
                fail(path, where, "_input_hash", "missing, and the example has no input "
                     f"({', '.join(_INPUTS)}) to identify it by")
            task = join_inputs([ex[k] for k in present])
        who = "_session_id" if ex.get("_annotator_id") is None and ex.get("_session_id") is not None else "_annotator_id"
        out.add(task, out.need(where, who, ex.get(who)), label)
    return out.frame(f"{dropped} examples dropped by answer" if dropped else "")
