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
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

import numpy as np
import pandas as pd

__all__ = [
    "ExportFrame",
    "Collector",
    "Delimited",
    "fail",
    "read_text",
    "decode_text",
    "utf16_without_bom",
    "sniff_utf16",
    "read_head",
    "read_delimited",
    "read_json",
    "as_records",
    "peek_json",
    "choose_question",
    "status_set",
    "join_inputs",
    "id_text",
    "collect_columns",
    "source_name",
    "frame_table",
    "status_mask",
    "joined_inputs",
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


def _read_bytes(path: Path, limit: int | None = None) -> bytes:
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if path.is_dir():
        raise ValueError(f"{path}: is a directory, expected an export file")
    opener = _OPENERS.get(path.suffix.lower(), open)
    try:
        with opener(path, "rb") as fh:
            return fh.read() if limit is None else fh.read(limit)
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise ValueError(f"{path}: cannot read: {exc}") from None


def _decode(path: Path, data: bytes, encoding: str | None, errors: str = "strict") -> str:
    if encoding is not None:
        try:
            return data.decode(encoding, errors=errors)
        except (UnicodeDecodeError, LookupError) as exc:
            raise ValueError(f"{path}: cannot decode as {encoding}: {exc}") from None
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", errors=errors)
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors=errors)
    codec = utf16_without_bom(data)
    if codec is not None:
        return data.decode(codec, errors=errors)
    for guess in ("utf-8", "cp1252"):
        try:
            return data.decode(guess)
        except UnicodeDecodeError:
            continue
    return data.decode("latin-1")


def utf16_without_bom(data: bytes) -> str | None:
    """``"utf-16-le"`` or ``"utf-16-be"`` when ``data``, the first bytes of a file, is UTF-16
    text without a byte-order mark; else None.

    Such text is valid UTF-8 (ASCII characters and NUL bytes), so it cannot be told by a
    decoding error: the header's names read as ``t\x00a\x00s\x00k\x00``.  It is told by its
    NUL bytes instead: in UTF-16 every ASCII character (the header's, the separators, line
    breaks, digits) has one, the second byte of the character in little-endian order and the
    first in big-endian, while UTF-8, cp1252 and latin-1 text holds none.  Hence: NUL bytes
    in at least a quarter of the characters, at least twice as many on one side as on the
    other (some other characters have one on the other side: U+4E00 is ``00 4E`` in
    little-endian order), and the first 4 KB decoding as that UTF-16.
    """
    sample = data[:4096]
    sample = sample[:len(sample) - len(sample) % 2]
    if len(sample) < 2 or 0 not in sample:
        return None
    low, high = sample[0::2].count(0), sample[1::2].count(0)  # NULs first / second in a pair
    if (low + high) * 4 < len(sample) // 2:
        return None
    if high > 2 * low:
        codec = "utf-16-le"
    elif low > 2 * high:
        codec = "utf-16-be"
    else:
        return None
    for cut in (sample, sample[:-2]):  # the 4 KB may end inside a surrogate pair
        try:
            cut.decode(codec)
        except UnicodeDecodeError:
            continue
        return codec
    return None


def sniff_utf16(path: str | Path) -> str | None:
    """:func:`utf16_without_bom` of a file's first bytes (decompressed by its name), None
    for one that cannot be read (the reader then says why)."""
    try:
        return utf16_without_bom(_read_bytes(Path(path), 4096))
    except (OSError, ValueError):
        return None


def decode_text(path: str | Path, data: bytes, encoding: str | None = None) -> str:
    """The bytes ``data`` read from ``path`` as text, decoded as :func:`read_text` decodes a
    file (``path`` names it in errors)."""
    return _decode(Path(path), data, encoding)


def read_text(path: str | Path, encoding: str | None = None) -> str:
    """The whole file as text, its encoding detected unless given.

    Order of guesses: a byte-order mark (UTF-8, UTF-16), then UTF-16 without one (told by
    its NUL bytes, :func:`utf16_without_bom`), then strict UTF-8, then cp1252 (Windows
    "ANSI", what Excel and MTurk's older batch files are written in), then latin-1, which
    decodes any byte.  ``.gz``, ``.bz2`` and ``.xz`` files are decompressed.
    """
    path = Path(path)
    return _decode(path, _read_bytes(path), encoding)


def read_head(path: str | Path, size: int = 1 << 16, encoding: str | None = None) -> str:
    """The first ``size`` bytes as text (enough to see a header), decoded as
    :func:`read_text` would; a character cut at the end is replaced, not an error."""
    path = Path(path)
    data = _read_bytes(path, size)
    try:
        # (replaced: a UTF-16 character cut at the end, which strict decoding refuses)
        return _decode(path, data, encoding, errors="replace")
    except ValueError:
        return data.decode(encoding or "utf-8", errors="replace")


def _stem_suffix(path: Path) -> str:
    """The format suffix below any compression suffix (``a.tsv.gz`` -> ``.tsv``)."""
    suffixes = [s.lower() for s in path.suffixes]
    while suffixes and suffixes[-1] in _OPENERS:
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


# ---------------------------------------------------------------- delimited
def _keep_row(row: list[str]) -> bool:
    """False for blank lines and rows of empty cells (Toloka can put one between suites)."""
    return bool(row) and (bool(row[0].strip()) or any(cell.strip() for cell in row))


class _Columns(Mapping):
    """Column name -> its cells without surrounding blanks (an object array), each column
    built on first use (exports are wide, and a reader needs a few of their columns)."""

    def __init__(self, header: list[str], build: Callable[[int], np.ndarray]) -> None:
        self._index = {name: j for j, name in enumerate(header)}
        self._build = build
        self._built: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        col = self._built.get(name)
        if col is None:
            col = self._built[name] = self._build(self._index[name])
        return col

    def __iter__(self):
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, name: object) -> bool:
        return name in self._index


class Delimited:
    """A delimited export: ``header``, ``columns[name]`` (the text cells of a column, stripped
    of surrounding blanks, as an object array) and the
    file line each row starts on (``line(i)``, header = line 1; worked out only when asked,
    for an error message or a reader that names every row)."""

    def __init__(self, header: list[str], n_rows: int, build: Callable[[int], np.ndarray],
                 text: str | None, sep: str, name: str) -> None:
        self.header = header
        self.columns = _Columns(header, build)
        self.name = name
        self._n = n_rows
        self._text = text
        self._sep = sep
        self._lines: list[int] | None = None

    def __len__(self) -> int:
        return self._n

    @property
    def lines(self) -> list[int]:
        if self._lines is None:
            reader = csv.reader(io.StringIO(self._text), delimiter=self._sep)
            next(reader)
            prev = reader.line_num
            starts = []
            for row in reader:
                start, prev = prev + 1, reader.line_num
                if _keep_row(row):
                    starts.append(start)
            self._lines = starts
        return self._lines

    def line(self, i: int) -> int:
        return self.lines[i]

    def where(self, i: int) -> str:
        """How messages name row i: its file line, or its position in a DataFrame."""
        return f"row position {i}" if self._text is None else f"line {self.line(i)}"


def sniff_separator(path: Path, first_line: str) -> str:
    """Tab for ``.tsv``/``.tab``, comma for ``.csv``, else whichever the header has more of."""
    suffix = _stem_suffix(path)
    if suffix in (".tsv", ".tab"):
        return "\t"
    if suffix == ".csv":
        return ","
    return "\t" if first_line.count("\t") > first_line.count(",") else ","


def source_name(source: Any) -> str:
    """How messages name what was read: the file, or ``DataFrame``."""
    return "DataFrame" if isinstance(source, pd.DataFrame) else str(source)


def frame_table(df: pd.DataFrame, name: str = "DataFrame") -> Delimited:
    """A DataFrame holding an export's columns (toloka-kit's ``get_assignments_df``, or a
    file read by hand) as a :class:`Delimited`; its rows are named by position."""
    header = [str(c).strip() for c in df.columns]
    if len(set(header)) != len(header):
        dup = next(h for h in header if header.count(h) > 1)
        fail(name, None, dup, "appears twice in the columns")

    def build(j: int) -> np.ndarray:
        col = df.iloc[:, j]
        return _objects(["" if pd.isna(v) else id_text(v) for v in col])

    return Delimited(header, len(df), build, None, "", name)


def read_delimited(path: str | Path, sep: str | None = None, encoding: str | None = None) -> Delimited:
    """Read a CSV/TSV export: header, text columns, and each row's first file line.

    Cells are stripped of surrounding blanks; empty cells are ``""``.  Blank lines and rows
    of empty cells are skipped; a row with a
    different number of fields than the header raises ``ValueError`` naming its line.
    pyarrow's parser reads the file when it is installed (several times faster); Python's
    ``csv`` reads it otherwise, and whenever pyarrow refuses it, so its messages apply.
    """
    if isinstance(path, pd.DataFrame):
        return frame_table(path)
    path = Path(path)
    text = read_text(path, encoding)
    first = text.split("\n", 1)[0]
    sep = sep or sniff_separator(path, first)
    reader = csv.reader(io.StringIO(text), delimiter=sep)
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise ValueError(f"{path}: the file is empty") from None
    except csv.Error as exc:
        fail(path, "line 1", None, f"cannot parse: {exc}")
    seen = set()
    for name in header:
        if name in seen:
            fail(path, "line 1", name, "appears twice in the header")
        seen.add(name)
    fast = _read_arrow(text, sep, header)
    if fast is not None:
        n_rows, build, parsed = fast
        _refuse_unclosed_quote(path, text, sep, parsed)
        return Delimited(header, n_rows, build, text, sep, str(path))
    _refuse_unclosed_quote(path, text, sep)
    try:
        # _keep_row inlined: a function call per row costs as much as parsing it
        rows = [row for row in reader if row and (row[0].strip() or any(c.strip() for c in row))]
    except csv.Error as exc:
        fail(path, f"line {reader.line_num}", None, f"cannot parse: {exc}")
    table = Delimited(header, len(rows), lambda j: _objects([row[j].strip() for row in rows]),
                      text, sep, str(path))
    width = len(header)
    ragged = next((i for i, row in enumerate(rows) if len(row) != width), None)
    if ragged is not None:
        fail(path, f"line {table.line(ragged)}", None,
             f"has {len(rows[ragged])} fields, the header has {width}")
    return table


#: a blank line (its line break, followed by the next): the parsers skip them
_BLANK_LINE = re.compile(r"\n(?=\r?\n)")


def _refuse_unclosed_quote(path: Path, text: str, sep: str, parsed: int | None = None) -> None:
    """``ValueError`` naming the line of a quote that opens a value and never closes it.

    Both parsers read such a value to the end of the file without an error (pyarrow, and
    ``csv`` unless strict, which would refuse values pandas reads): the rest of the file
    became one answer.  ``parsed``, the rows pyarrow read (blank lines skipped), spares
    reading the whole file again when it shows that no value spans lines: each line after
    the header was a row, and only the last line can hold an open quote.
    """
    if '"' not in text:
        return
    from ..core.quotes import last_line_span, one_row_per_line, unclosed_quote_at, unclosed_quote_line

    breaks = text.count("\n")
    if parsed is not None and breaks and one_row_per_line(parsed, breaks, text.endswith("\n"),
                                                          lambda: len(_BLANK_LINE.findall(text))):
        start, end = last_line_span(text)
        line = unclosed_quote_line([text[start:end]], sep)
        line = None if line is None else breaks - text.count("\n", start) + line
    else:
        line = unclosed_quote_line([text], sep)
    if line is not None:
        raise unclosed_quote_at(path, line)


def _read_arrow(text: str, sep: str, header: list[str]):
    """``(n_rows, column builder, rows parsed)`` by pyarrow, or None (no pyarrow, or a file
    it refuses: a ragged row, odd quoting -- the ``csv`` path then names the line).  Rows of
    empty cells are not among the ``n_rows``; they are among the rows parsed."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.csv as pacsv
    except ImportError:
        return None
    names = [f"c{j}" for j in range(len(header))]  # the header's own names may repeat blanks
    try:
        table = pacsv.read_csv(
            pa.py_buffer(text.encode("utf-8")),
            read_options=pacsv.ReadOptions(column_names=names, skip_rows=1, use_threads=False),
            parse_options=pacsv.ParseOptions(delimiter=sep, newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() for n in names}, null_values=[],
                strings_can_be_null=False, quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowException, ValueError):
        return None
    parsed = table.num_rows
    # rows of empty cells are skipped, as on the csv path (file lines are counted alike)
    first = pc.utf8_trim_whitespace(table.column(0))
    if table.num_rows and pc.any(pc.equal(pc.utf8_length(first), 0)).as_py():
        empty = None
        for name in names:
            blank = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(table.column(name))), 0)
            empty = blank if empty is None else pc.and_(empty, blank)
        table = table.filter(pc.invert(empty))
    return table.num_rows, lambda j: pc.utf8_trim_whitespace(table.column(j)).to_numpy(zero_copy_only=False), parsed


# --------------------------------------------------------------------- JSON
def read_json(path: str | Path, encoding: str | None = None) -> tuple[Any, list[str] | None]:
    """A JSON document or a JSON Lines file.

    Returns ``(document, None)`` for one JSON value, or ``(list_of_records, where)`` for
    JSON Lines, where ``where[i]`` names record i's line (``"line 7"``).  Blank lines are
    skipped.  A syntax error raises ``ValueError`` naming the line.
    """
    path = Path(path)
    text = read_text(path, encoding)
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


def peek_json(path: str | Path, encoding: str | None = None) -> Any:
    """Enough of a JSON export to tell its format: the first record of a JSON array or of
    JSON Lines (as a one-element list), or the whole document when it is one object."""
    path = Path(path)
    text = read_text(path, encoding)
    start = len(text) - len(text.lstrip())
    decoder = json.JSONDecoder()
    try:
        if text[start:start + 1] == "[":
            inner = start + 1
            while inner < len(text) and text[inner].isspace():
                inner += 1
            if text[inner:inner + 1] == "]":
                return []
            return [decoder.raw_decode(text, inner)[0]]
        first, end = decoder.raw_decode(text, start)
    except json.JSONDecodeError:
        return read_json(path, encoding)[0]  # raises, naming the line
    return [first] if text[end:].strip() else first


def as_records(doc: Any, where: list[str] | None) -> tuple[list[Any], list[str]]:
    """A JSON export's records and how errors name each: its JSON Lines line, else its
    index in the array (``record 3``); a file holding one object is one record (line 1)."""
    if not isinstance(doc, list):
        return [doc], where or ["line 1"]
    return doc, where if where is not None else [f"record {i}" for i in range(len(doc))]


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
    if type(value) is str:  # the common case first: this runs once per field of every record
        return value.strip()
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


def _first_row(path, where_of: Callable[[int], str], mask: np.ndarray, field: str, message: str) -> None:
    """Fail at the first flagged row, if any."""
    if mask.any():
        fail(path, where_of(int(np.argmax(mask))), field, message)


def collect_columns(
    path: str | Path,
    fmt: str,
    question: str | None,
    where_of: Callable[[int], str],
    *,
    task: Sequence[str],
    worker: Sequence[str],
    label: Sequence[str],
    fields: tuple[str, str, str],
    keep: np.ndarray | None = None,
    gold: Sequence[str] | None = None,
    dropped: str = "",
) -> ExportFrame:
    """The vectorised :class:`Collector` for delimited exports (one row per answer).

    ``where_of(i)`` names row i for errors (``Delimited.where``); ``task``, ``worker``, ``label`` and
    ``gold`` are text columns without surrounding blanks (as :class:`Delimited` gives them);
    ``keep``
    flags rows that pass the status filter; ``fields`` names the task, worker and gold
    columns for error messages.  Rows with an empty label are not answers.  Gold is taken
    from every row (kept or not) and must agree within a task.
    """
    task_field, worker_field, gold_field = fields
    task_s, worker_s, label_s = _objects(task), _objects(worker), _objects(label)
    truth = None
    if gold is not None:
        gold_s = _objects(gold)
        has = gold_s != ""
        _first_row(path, where_of, has & (task_s == ""), task_field, "missing or empty")
        pairs = pd.DataFrame({"task": task_s[has], "gold": gold_s[has]})
        first = pairs.groupby("task", sort=False)["gold"].transform("first")
        bad = (pairs["gold"] != first).to_numpy()
        if bad.any():
            at = int(np.argmax(bad))
            t = pairs["task"].iloc[at]
            fail(path, where_of(int(np.flatnonzero(has)[at])), gold_field,
                 f"gold {pairs['gold'].iloc[at]!r} for task {t!r} contradicts the gold "
                 f"{first.iloc[at]!r} given earlier")
        truth = pairs.drop_duplicates("task").set_index("task")["gold"].rename("truth")
    answered = label_s != ""
    if keep is not None:
        answered &= keep
    _first_row(path, where_of, answered & (task_s == ""), task_field, "missing or empty")
    _first_row(path, where_of, answered & (worker_s == ""), worker_field, "missing or empty")
    if not answered.any():
        why = f" ({dropped})" if dropped else ""
        raise ValueError(f"{path}: no {fmt} answers left to read{why}")
    answers = pd.DataFrame({"task": task_s[answered], "worker": worker_s[answered], "label": label_s[answered]})
    if truth is not None:
        truth = truth[truth.index.isin(answers["task"].unique())]
        truth = truth if len(truth) else None
    return ExportFrame(answers, truth, fmt, question)


def _objects(values: Sequence[str]) -> np.ndarray:
    """``values`` as an object array (comparisons with ``""`` are then vectorised)."""
    if isinstance(values, np.ndarray) and values.dtype == object:
        return values
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def status_mask(values: Sequence[str] | None, keep: frozenset[str]) -> np.ndarray | None:
    """Rows whose status (lower-cased) is kept; None when there is no status column."""
    if values is None:
        return None
    codes, uniques = pd.factorize(_objects(values))  # a handful of distinct statuses
    kept = np.array([str(u).strip().lower() in keep for u in uniques] + [False])
    return kept[codes]


def joined_inputs(columns: Sequence[Sequence[str]]) -> list[str]:
    """:func:`join_inputs` row by row over input columns (one column: stripped as is)."""
    if len(columns) == 1:
        return columns[0]
    return [join_inputs(row) for row in zip(*columns)]
