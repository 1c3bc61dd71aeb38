"""Crowd answers in and out of the formats people already hold.

>>> from crowdlearn.io import read_export
>>> labels = read_export("results.tsv")                       # doctest: +SKIP
>>> labels = read_export("batch.csv", "mturk", question="radio")  # doctest: +SKIP

:func:`read_export` reads a platform's export into :class:`~crowdlearn.core.data.CrowdLabels`
(gold attached as ``truth`` where the export has it); the format is detected from the
content when not given.  One module per format documents its mapping (which column or key
is the task, the worker, the answer and the gold; which statuses are kept):

============  ==============================================================================
format        what it reads
============  ==============================================================================
toloka        :mod:`~crowdlearn.io.toloka` Toloka results TSV (``INPUT:``, ``OUTPUT:``, ...)
mturk         :mod:`~crowdlearn.io.mturk` Amazon Mechanical Turk batch results CSV
labelstudio   :mod:`~crowdlearn.io.labelstudio` Label Studio JSON export
prodigy       :mod:`~crowdlearn.io.prodigy` Prodigy ``db-out`` JSON Lines
argilla       :mod:`~crowdlearn.io.argilla` Argilla records (1.x and 2.x shapes)
crowdflower   :mod:`~crowdlearn.io.crowdflower` CrowdFlower / Figure Eight full report CSV
peerannot     :mod:`~crowdlearn.io.peerannot` peerannot ``answers.json`` (read and write)
cleanlab      :mod:`~crowdlearn.io.cleanlab` cleanlab's tasks x annotators matrix (read and
              write)
============  ==============================================================================

Rules shared by all readers:

- ids and labels are text, as the file spells them (JSON numbers too: ``7`` -> ``"7"``),
  the same as :meth:`CrowdLabels.from_csv` and the ``crowdlearn`` command read files.
- the task is the export's task or item id; an export without one identifies a task by
  its input fields (:func:`~crowdlearn.io.common.join_inputs`: one field is the id itself;
  several become a JSON array of their values, in the export's order).
- an export with several questions needs ``question=``; the error lists them.
- an empty answer is not an answer; tasks with no kept answer are not in the table.
- a bad or partial file raises one ``ValueError`` naming the file, the record (``line N``,
  or ``record N`` for the N-th element of a JSON array, 0-based) and the field.
- the tabular formats (toloka, mturk, crowdflower, cleanlab) are read from a DataFrame too
  (toloka-kit's ``get_assignments_df``, cleanlab's matrix); messages then name rows by
  position (``row position 3``).
- exports holding numbers (ratings, scores) give ``ContinuousAnswers`` with
  ``kind="continuous"``; other kinds (pairs of A/B choices, multi-label tags) build their
  tables from :func:`read_export_frame`'s text frame.

The table readers of :mod:`crowdlearn.core.io` (``load_folder``, ``read_table``,
``write_table``, ``detect_format``) are available here too.
"""

from __future__ import annotations

import csv
import io as _stdio
from collections.abc import Iterable
from importlib import import_module
from pathlib import Path
from typing import Any

import pandas as pd

from ..core.data import CrowdLabels
from ..core.io import detect_format, load_folder, read_table, write_table
from .common import ExportFrame, peek_json, read_head

__all__ = [
    "FORMATS",
    "read_export",
    "read_export_frame",
    "detect_export_format",
    "write_export",
    "ExportFrame",
    "load_folder",
    "read_table",
    "write_table",
    "detect_format",
]

#: the export formats, in the order detection tries them
FORMATS = ("toloka", "mturk", "crowdflower", "labelstudio", "prodigy", "argilla", "peerannot", "cleanlab")

#: formats that are tables (a DataFrame holding their columns is read too)
_TABULAR = ("toloka", "mturk", "crowdflower", "cleanlab")
#: formats with one question and no statuses
_PLAIN = ("peerannot", "cleanlab")
#: formats :func:`write_export` writes
WRITABLE = ("peerannot", "cleanlab")

#: answer kinds whose table is CrowdLabels, which the readers produce
_LABEL_KINDS = ("classification", "ordinal", "learning")

_HEAD_BYTES = 1 << 16


def _module(fmt: str):
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return import_module(f".{fmt}", __name__)


def _unknown(path: Path | str, seen: str) -> ValueError:
    return ValueError(
        f"{path}: cannot tell the export format from its content ({seen}); pass format= "
        f"(crowdlearn aggregate --format NAME), one of {', '.join(FORMATS)}.  A long "
        "task,worker,label table needs no format: CrowdLabels.from_csv reads it"
    )


def detect_export_format(path: str | Path | pd.DataFrame, encoding: str | None = None) -> str:
    """The export format of a file, from its content (columns or keys), else ``ValueError``.

    Delimited files are told apart by their header: ``OUTPUT:``/``ASSIGNMENT:`` columns
    (toloka), ``WorkerId`` with ``Answer.*`` (mturk), ``_unit_id`` with ``_worker_id``
    (crowdflower), a first column named ``""``, ``task`` or ``index`` without ``worker`` and
    ``label`` columns (cleanlab's matrix).  JSON by its records' keys: ``annotations``
    (labelstudio), ``_input_hash``/``_task_hash``/``_annotator_id``/``_session_id``
    (prodigy), ``responses`` (argilla), an object of objects (peerannot).  Parquet files
    can only be a matrix (cleanlab).
    """
    if isinstance(path, pd.DataFrame):
        header = [str(c).strip() for c in path.columns]
        for fmt in _TABULAR[:-1]:
            if _module(fmt).looks_like(header):
                return fmt
        if {"worker", "label"} & set(header):
            raise _unknown("DataFrame", f"columns {header[:10]}")
        return "cleanlab"
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        return "cleanlab"
    head = read_head(path, _HEAD_BYTES, encoding)
    start = head.lstrip()[:1]
    if start in ("[", "{"):
        doc = peek_json(path, encoding)
        for fmt in ("labelstudio", "prodigy", "argilla", "peerannot"):
            if _module(fmt).looks_like(doc):
                return fmt
        if isinstance(doc, dict):  # a file of one record
            for fmt in ("labelstudio", "prodigy", "argilla"):
                if _module(fmt).looks_like([doc]):
                    return fmt
        first = doc[0] if isinstance(doc, list) and doc else doc
        keys = sorted(first)[:10] if isinstance(first, dict) else type(first).__name__
        raise _unknown(path, f"JSON records with keys {keys}")
    first_line = head.split("\n", 1)[0]
    sep = "\t" if first_line.count("\t") > first_line.count(",") else ","
    header = next(csv.reader(_stdio.StringIO(first_line), delimiter=sep), [])
    header = [h.strip() for h in header]
    for fmt in ("toloka", "mturk", "crowdflower"):
        if _module(fmt).looks_like(header):
            return fmt
    from .cleanlab import INDEX_NAMES

    if len(header) >= 2 and header[0] in INDEX_NAMES and not {"worker", "label"} & set(header):
        return "cleanlab"
    raise _unknown(path, f"columns {header[:10]}")


def read_export_frame(
    path: str | Path | pd.DataFrame,
    format: str | None = None,
    *,
    question: str | None = None,
    statuses: Iterable[str] | str | None = None,
    encoding: str | None = None,
    **options: Any,
) -> ExportFrame:
    """An export as text: ``(answers, truth, format, question)`` before any answer table.

    ``answers`` has the columns ``task, worker, label``; ``truth`` maps task -> gold label
    (None without gold).  :func:`read_export` builds ``CrowdLabels`` from it; other answer
    kinds can build their tables from the same frame.  Parameters as :func:`read_export`.
    """
    fmt = format.lower() if format else detect_export_format(path, encoding)
    module = _module(fmt)
    if isinstance(path, pd.DataFrame) and fmt not in _TABULAR:
        raise ValueError(
            f"DataFrame: a {fmt} export is JSON; pass its file.  A DataFrame can hold the "
            f"tabular formats: {', '.join(_TABULAR)}"
        )
    if fmt in _PLAIN:
        for name, value in (("question", question), ("statuses", statuses)):
            if value is not None:
                raise ValueError(f"{path}: {fmt} files have no {name}s; leave {name}= unset")
        return module.read(path, encoding=encoding, **options)
    return module.read(path, question=question, statuses=statuses, encoding=encoding, **options)


def read_export(
    path: str | Path | pd.DataFrame,
    format: str | None = None,
    *,
    question: str | None = None,
    kind: str = "classification",
    statuses: Iterable[str] | str | None = None,
    classes: Iterable[Any] | None = None,
    encoding: str | None = None,
    **options: Any,
) -> CrowdLabels:
    """Read a crowdsourcing platform's export into :class:`CrowdLabels`.

    Parameters
    ----------
    path : path-like or DataFrame
        The export file (``.gz``, ``.bz2`` and ``.xz`` are decompressed), or a DataFrame
        holding a tabular export's columns (toloka-kit's ``get_assignments_df``, an MTurk
        or CrowdFlower file read by hand, cleanlab's matrix with the tasks as index); its
        rows are then named by position in messages.
    format : str, optional
        One of :data:`FORMATS`; detected from the content when None
        (:func:`detect_export_format`).
    question : str, optional
        The question (output field, control tag, label ...) to read when the export holds
        several; the error lists them.
    kind : str
        The answer kind wanted: class labels (``"classification"``; ``"ordinal"`` and
        ``"learning"`` use the same table), or ``"continuous"`` for exports whose answers are
        numbers (ratings, scores; a non-number names its row).
    statuses : iterable of str, optional
        The answer statuses kept (case-insensitive); default: the platform's, in each
        module's ``DEFAULT_STATUSES`` (rejected, cancelled, discarded, ignored or tainted
        answers are dropped).
    classes : iterable, optional
        The class set and order, as in :meth:`CrowdLabels.from_frame`.
    encoding : str, optional
        The file's text encoding; detected when None (BOM, UTF-8, cp1252, latin-1).
    **options
        Passed to the format's ``read``.

    Returns
    -------
    CrowdLabels, or ContinuousAnswers for ``kind="continuous"``
        With ``truth`` holding the export's gold (control tasks, test questions,
        ground-truth annotations) where it has them.
    """
    if kind not in (*_LABEL_KINDS, "continuous"):
        raise ValueError(
            f"kind={kind!r}: the export readers produce class labels or numbers "
            f"(kind one of {', '.join(_LABEL_KINDS)}, continuous); read_export_frame gives the "
            "answers as text for other kinds' tables"
        )
    frame = read_export_frame(path, format, question=question, statuses=statuses,
                              encoding=encoding, **options)
    if kind == "continuous":
        from ..continuous.data import ContinuousAnswers

        if classes is not None:
            raise ValueError("classes= does not apply to continuous answers")
        return ContinuousAnswers.from_frame(frame.answers, truth=frame.truth)
    return CrowdLabels.from_frame(frame.answers, classes=classes, truth=frame.truth)


def write_export(labels: CrowdLabels, path: str | Path, format: str, **options: Any):
    """Write ``labels`` in a format other tools read: ``"peerannot"`` (answers.json) or
    ``"cleanlab"`` (the tasks x annotators matrix).  Returns the maps from the codes
    written back to the ids (see each module's ``write``)."""
    if format not in WRITABLE:
        raise ValueError(f"cannot write {format!r}; writable formats: {', '.join(WRITABLE)}")
    return _module(format).write(labels, path, **options)
