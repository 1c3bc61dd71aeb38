"""peerannot's ``answers.json``: ``{task: {worker: label}}`` (read and write).

peerannot (Lefort, Charlier, Joly and Salmon, 2024) stores a dataset's crowd answers as one
JSON object: task key -> (worker key -> label).  Its strategies index arrays with the keys
and labels, so the file it reads has tasks ``0..N-1``, workers ``0..M-1`` and labels
``0..K-1``.  The file carries no gold (peerannot keeps it apart).

Reading: keys and labels become text (``3`` -> ``"3"``), as files are read everywhere in
crowdlearn.  Writing: :func:`write` writes these integer codes by default (what peerannot
needs) and returns the maps back to the ids; ``ids=True`` writes the ids themselves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core.data import CrowdLabels
from .common import Collector, ExportFrame, fail, id_text, read_json

__all__ = ["read", "write", "looks_like"]


def looks_like(doc: Any) -> bool:
    """An object whose values are all objects of scalar answers."""
    if not isinstance(doc, dict) or not doc:
        return False
    first = next(iter(doc.values()))
    return all(isinstance(v, dict) for v in doc.values()) and all(
        not isinstance(x, (dict, list)) for x in first.values()
    )


def read(path: str | Path, *, encoding: str | None = None) -> ExportFrame:
    """Read a peerannot ``answers.json`` into task, worker, label text."""
    doc, lines = read_json(path, encoding)
    if lines is not None or not isinstance(doc, dict):
        fail(path, None, None, "expected one JSON object {task: {worker: label}}")
    out = Collector(path, "peerannot")
    for task, answers in doc.items():
        where = f"task {task!r}"
        if not isinstance(answers, dict):
            fail(path, where, None, f"expected an object {{worker: label}}, got {type(answers).__name__}")
        for worker, label in answers.items():
            if isinstance(label, (dict, list)):
                fail(path, where, str(worker), f"expected one label, got {label!r}")
            text = id_text(label)
            if text:  # null: no answer
                out.add(str(task), str(worker), text)
    return out.frame()


def answers_dict(labels: CrowdLabels, *, ids: bool = False) -> dict[str, dict[str, Any]]:
    """``{task: {worker: label}}``: codes (int labels, str keys) or, with ``ids``, the ids.

    Raises ``ValueError`` when a worker answered a task twice (an object holds one answer
    per worker).
    """
    key = labels.task.astype(np.int64) * max(labels.n_workers, 1) + labels.worker
    if len(np.unique(key)) != labels.n_labels:
        dup = int(labels.n_labels - len(np.unique(key)))
        raise ValueError(
            f"{dup} repeated (task, worker) answer(s): answers.json holds one answer per "
            "worker and task; keep one (CrowdLabels.from_frame(..., duplicates='last'))"
        )
    out: dict[str, dict[str, Any]] = {}
    if ids:
        tasks = [id_text(t) for t in labels.tasks]
        workers = [id_text(w) for w in labels.workers]
        classes = [id_text(c) for c in labels.classes]
    for t, w, c in zip(labels.task.tolist(), labels.worker.tolist(), labels.label.tolist()):
        if ids:
            out.setdefault(tasks[t], {})[workers[w]] = classes[c]
        else:
            out.setdefault(str(t), {})[str(w)] = c
    return out


def write(labels: CrowdLabels, path: str | Path, *, ids: bool = False) -> dict[str, pd.Index]:
    """Write ``answers.json`` for peerannot; returns the maps ``{"tasks", "workers",
    "classes"}`` from the codes written back to the ids (code i is ``maps[...][i]``)."""
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(answers_dict(labels, ids=ids), fh, ensure_ascii=False)
    return {"tasks": labels.tasks, "workers": labels.workers, "classes": labels.classes}
