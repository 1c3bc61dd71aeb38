"""What every platform reader shares: decoding, delimited and JSON records, error messages.

A reader turns one export file into an :class:`ExportFrame`: a long table of text
(``task, worker, label``, one row per kept answer) plus gold labels where the export has
them.  :func:`crowdlearn.io.read_export` then builds the answer table from it.

Errors are one ``ValueError`` whose message starts with the file, then the record (``line
N`` for delimited files and JSON Lines, ``record N`` for the N-th element of a JSON array,
0-based), then the field, then what is wrong, so the CLI prints one line.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import lzma
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

import pandas as pd

__all__ = [
    "ExportFrame",
    "Collector",
    "Delimited",
    "fail",
    "read_text",
    "read_delimited",
    "read_json",
    "choose_question",
    "status_set",
    "join_inputs",
    "id_text",
]


class ExportFrame(NamedTuple):
    """One export read as text: the answers kept, gold where known, and what was read."""

    #: one row per kept answer: ``task``, ``worker``, ``label`` (all text)
    answers: pd.DataFrame
    #: task -> gold label (text), or None when the export carries no gold
    truth: pd.Series | None
    #: the platform format name (``"toloka"``, ``"mturk"``, ...)
    format: str
    #: the question read (an export's output field), None for one-question formats
    question: str | None


def fail(path: str | Path, record: str | None, field: str | None, message: str) -> NoReturn:
    """Raise the readers' one-line ``ValueError``: file, record, field, what is wrong."""
    parts = [str(path)]
    if record:
        parts.append(record)
    if field is not None:
        parts.append(f"field {field!r}")
    raise ValueError(": ".join(parts) + ": " + message)


# ------------------------------------------------------------------ decoding
_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def read_text(path: str | Path, encoding: str | None = None) -> str:
    """The whole file as text, its encoding detected unless given.

    Order of guesses: a byte-order mark (UTF-8, UTF-16), then strict UTF-8, then cp1252
    (Windows "ANSI", what Excel and MTurk's older batch files are written in), then
    latin-1, which decodes any byte.  ``.gz``, ``.bz2`` and ``.xz`` files are decompressed.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if path.is_dir():
        raise ValueError(f"{path}: is a directory, expected an export file")
    opener = _OPENERS.get(path.suffix.lower(), open)
    try:
        with opener(path, "rb") as fh:
            data = fh.read()
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise ValueError(f"{path}: cannot read: {exc}") from None
    if encoding is not None:
        try:
            return data.decode(encoding)
        except (UnicodeDecodeError, LookupError) as exc:
            raise ValueError(f"{path}: cannot decode as {encoding}: {exc}") from None
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", errors="strict")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16")
    for guess in ("utf-8", "cp1252"):
        try:
            return data.decode(guess)
        except UnicodeDecodeError:
            continue
    return data.decode("latin-1")


def _stem_suffix(path: Path) -> str:
    """The format suffix below any compression suffix (``a.tsv.gz`` -> ``.tsv``)."""
    suffixes = [s.lower() for s in path.suffixes]
    while suffixes and suffixes[-1] in _OPENERS:
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


# ---------------------------------------------------------------- delimited
class Delimited(NamedTuple):
    """A delimited file as columns of text: ``columns[name][i]`` is row i's cell."""

    header: list[str]
    columns: dict[str, list[str]]
    #: file line on which each row starts (header = line 1)
    lines: list[int]

    def __len__(self) -> int:
        return len(self.lines)


def sniff_separator(path: Path, first_line: str) -> str:
    """Tab for ``.tsv``/``.tab``, comma for ``.csv``, else whichever the header has more of."""
    suffix = _stem_suffix(path)
    if suffix in (".tsv", ".tab"):
        return "\t"
    if suffix == ".csv":
        return ","
    return "\t" if first_line.count("\t") > first_line.count(",") else ","


def read_delimited(path: str | Path, sep: str | None = None, encoding: str | None = None) -> Delimited:
    """Read a CSV/TSV export: header, text columns, and each row's first file line.

    Empty cells are ``""``.  Blank lines (Toloka can put one between task suites) are
    skipped; a row with a different number of fields than the header raises ``ValueError``
    naming its line.
    """
    path = Path(path)
    text = read_text(path, encoding)
    first = text.split("\n", 1)[0]
    sep = sep or sniff_separator(path, first)
    reader = csv.reader(io.StringIO(text), delimiter=sep)
    try:
        header = next(reader)
    except StopIteration:
        raise ValueError(f"{path}: the file is empty") from None
    header = [h.strip() for h in header]
    seen = set()
    for name in header:
        if name in seen:
            fail(path, "line 1", name, "appears twice in the header")
        seen.add(name)
    rows: list[list[str]] = []
    lines: list[int] = []
    prev = reader.line_num
    try:
        for row in reader:
            start = prev + 1
            prev = reader.line_num
            if not row or not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                fail(path, f"line {start}", None,
                     f"has {len(row)} fields, the header has {len(header)}")
            rows.append(row)
            lines.append(start)
    except csv.Error as exc:
        fail(path, f"line {reader.line_num}", None, f"cannot parse: {exc}")
    cols = list(zip(*rows)) if rows else [()] * len(header)
    columns = {name: list(col) for name, col in zip(header, cols)}
    return Delimited(header, columns, lines)


# --------------------------------------------------------------------- JSON
def read_json(path: str | Path, encoding: str | None = None) -> tuple[Any, list[str] | None]:
    """A JSON document or a JSON Lines file.

    Returns ``(document, None)`` for one JSON value, or ``(list_of_records, where)`` for
    JSON Lines, where ``where[i]`` names record i's line (``"line 7"``).  Blank lines are
    skipped.  A syntax error raises ``ValueError`` naming the line.
    """
    path = Path(path)
    text = read_text(path)
    if not text.strip():
        raise ValueError(f"{path}: the file is empty")
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        whole_error = exc
    # JSON Lines: one value per line (a single-document error at line 1 means bad JSON)
    records, where = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if number == 1 and whole_error.lineno > 1:
                break  # a multi-line document with an error further down: report that
            fail(path, f"line {number}", None, f"not valid JSON: {exc.msg} (column {exc.colno})")
        where.append(f"line {number}")
    else:
        return records, where
    fail(path, f"line {whole_error.lineno}", None,
         f"not valid JSON: {whole_error.msg} (column {whole_error.colno})")


def record_places(records: Sequence[Any], where: list[str] | None) -> list[str]:
    """How errors name each record: its JSON Lines line, else its index in the array."""
    if where is not None:
        return where
    return [f"record {i}" for i in range(len(records))]


# -------------------------------------------------------------- questions
def choose_question(
    path: str | Path,
    questions: Sequence[str],
    question: str | None,
    *,
    prefix: str = "",
    what: str = "question",
) -> str:
    """The question to read: the one given (with or without ``prefix``), or the only one.

    Raises ``ValueError`` listing the export's questions when the choice is missing,
    unknown or ambiguous.
    """
    listed = ", ".join(repr(q) for q in questions) or "none"
    if question is not None:
        name = question[len(prefix):] if prefix and question.startswith(prefix) else question
        if name in questions:
            return name
        raise ValueError(f"{path}: no {what} {question!r}; the export's {what}s are {listed}")
    if len(questions) == 1:
        return questions[0]
    if not questions:
        raise ValueError(f"{path}: no {what} with answers found in the export")
    raise ValueError(
        f"{path}: the export has several {what}s ({listed}); choose one with question=NAME "
        "(crowdlearn aggregate --question NAME)"
    )


def status_set(
    path: str | Path, statuses: Iterable[str] | str | None, default: Sequence[str], fmt: str
) -> frozenset[str]:
    """The statuses kept, lower-cased: the given ones, else the platform's ``default``."""
    if statuses is None:
        chosen = default
    elif isinstance(statuses, str):
        chosen = [statuses]
    else:
        chosen = list(statuses)
    if not chosen:
        raise ValueError(f"{path}: statuses is empty: no {fmt} answer would be kept")
    return frozenset(str(s).strip().lower() for s in chosen)


def join_inputs(values: Sequence[Any]) -> str:
    """A task id from an answer's input fields, for exports without a task id.

    One field: its text.  Several: a compact JSON array of their texts in the export's
    order (column order, or key order in a JSON object), e.g. ``["a.jpg","left"]``, so
    that distinct inputs never give the same id.
    """
    texts = [id_text(v) for v in values]
    if len(texts) == 1:
        return texts[0]
    return json.dumps(texts, ensure_ascii=False, separators=(",", ":"))


def id_text(value: Any) -> str:
    """An id or label as text, as the file spells it (JSON ``3`` -> ``"3"``, ``3.0`` ->
    ``"3"``, ``true`` -> ``"true"``); ``None`` -> ``""``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return str(value).strip()


# -------------------------------------------------------------- collecting
class Collector:
    """Accumulates kept answers and gold, then hands back an :class:`ExportFrame`."""

    def __init__(self, path: str | Path, fmt: str, question: str | None = None) -> None:
        self.path = path
        self.fmt = fmt
        self.question = question
        self.tasks: list[str] = []
        self.workers: list[str] = []
        self.labels: list[str] = []
        self.gold: dict[str, str] = {}
        self.seen = 0

    def need(self, record: str, field: str, value: Any) -> str:
        """``value`` as text; a missing or empty value raises naming record and field."""
        text = id_text(value)
        if not text:
            fail(self.path, record, field, "missing or empty")
        return text

    def add(self, task: str, worker: str, label: str) -> None:
        self.tasks.append(task)
        self.workers.append(worker)
        self.labels.append(label)

    def add_gold(self, record: str, field: str, task: str, value: str) -> None:
        """Gold for ``task``; a second, different gold value for it is an error."""
        old = self.gold.setdefault(task, value)
        if old != value:
            fail(self.path, record, field,
                 f"gold {value!r} for task {task!r} contradicts the gold {old!r} given earlier")

    def frame(self, dropped: str = "") -> ExportFrame:
        if not self.tasks:
            why = f" ({dropped})" if dropped else ""
            raise ValueError(f"{self.path}: no {self.fmt} answers left to read{why}")
        answers = pd.DataFrame({"task": self.tasks, "worker": self.workers, "label": self.labels})
        # gold only for tasks with answers: a gold-only task would add a class nobody chose
        answered = set(self.tasks)
        gold = {t: g for t, g in self.gold.items() if t in answered}
        truth = pd.Series(gold, name="truth", dtype=object) if gold else None
        return ExportFrame(answers, truth, self.fmt, self.question)
