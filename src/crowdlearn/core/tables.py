"""Readers and writers for tables of crowd answers (CSV, TSV, Parquet, JSON Lines).

Generic table I/O used by :class:`~crowdlearn.core.data.CrowdLabels` constructors and by
:mod:`crowdlearn.core.io` (dataset folders); it knows nothing of crowd labels.

Every reader error is a ``ValueError`` (or ``FileNotFoundError``) with the file name and what
is wrong, so the CLI can print one line instead of a traceback.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from .quotes import last_line_span, one_row_per_line, unclosed_quote_at, unclosed_quote_line

__all__ = ["read_table", "write_table", "check_writable", "detect_format", "first_record_line",
           "require_columns", "column_hint", "ROLE_ALIASES", "naming_file", "unclosed_quote_error"]

_FORMATS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".txt": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
}

#: uncompressed CSV/TSV names: the only files the pyarrow fast paths touch (pandas infers
#: compression from the rest of the name)
_PLAIN_DELIMITED = tuple(ext for ext, fmt in _FORMATS.items() if fmt in ("csv", "tsv"))


def detect_format(path: str | Path) -> str:
    """File format from the extension (``.gz``/``.bz2``/``.zst`` compression is skipped)."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    while suffixes and suffixes[-1] in (".gz", ".bz2", ".zst", ".xz", ".zip"):
        suffixes.pop()
    fmt = _FORMATS.get(suffixes[-1] if suffixes else "")
    if fmt is None:
        raise ValueError(
            f"{path}: unknown file type; use .csv, .tsv, .parquet or .jsonl "
            "(optionally compressed)"
        )
    return fmt


#: the file line of a table's first record, by format: below the header of a CSV/TSV, on
#: the first line of JSON Lines (no header); Parquet has no lines (rows are named by position)
_FIRST_RECORD_LINE = {"csv": 2, "tsv": 2, "jsonl": 1}


def first_record_line(path: str | Path, fmt: str | None = None) -> int | None:
    """The file line of the first record of a table read by :func:`read_table`.

    What the readers pass as ``first_line`` to the ``from_frame`` constructors, so that an
    error names the line a user sees in an editor (header = line 1), whatever the format.

    Parameters
    ----------
    path : path-like
        The file; its extension gives the format unless ``fmt`` does.
    fmt : {"csv", "tsv", "parquet", "jsonl"}, optional
        The format it was read as.

    Returns
    -------
    int or None
        2 for CSV/TSV, 1 for JSON Lines, None for Parquet (errors then name 0-based row
        positions).
    """
    return _FIRST_RECORD_LINE.get(fmt or detect_format(path))


def require_columns(df: pd.DataFrame, columns: Sequence[str], path) -> None:
    """``ValueError`` naming the file and the missing ones unless ``df`` has ``columns``."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(
            f"{path}: missing column(s) {missing}; the file has columns {list(df.columns)}"
            + column_hint(missing, df.columns, path)
        )


def column_hint(missing, present, path=None) -> str:
    """Why the columns look missing, when the names say: spaces around a name, another
    capitalisation, or (for a file ``path``) another separator than the one the file name
    implies.  An empty string when nothing explains it."""
    names = [str(c) for c in present]
    spaced = [c for c in names if c != c.strip() and c.strip() in missing]
    if spaced:
        return f" (the name {spaced[0]!r} has spaces around it; remove them from the header)"
    lowered = {str(m).lower(): m for m in missing}
    cased = [c for c in names if c.strip().lower() in lowered]
    if cased:
        wanted = lowered[cased[0].strip().lower()]
        return (f" (column names are case-sensitive: {cased[0]!r} is not {wanted!r}; rename the "
                "column or give its name as written)")
    aliases = _alias_columns(missing, names)
    if aliases:
        found = ", ".join(f"{role} -> {col!r}" for role, col in aliases.items())
        flags = " ".join(f"--{role}-col {col}" for role, col in aliases.items())
        return (f" (the file seems to name them as another tool does: {found}; pass those "
                f"column names to the reader, or on the command line {flags})")
    if path is not None and len(names) == 1:
        for sep, word in ((";", "semicolons"), ("\t", "tabs"), (",", "commas"), ("|", "bars")):
            if sep in names[0]:
                ext = {"\t": ".tsv", ",": ".csv"}.get(sep)
                fix = f"name it {Path(path).stem}{ext}" if ext else "convert it to commas or tabs"
                return f" (the header looks separated by {word}; {fix})"
    return ""


#: column names other tools and platforms give the three roles of an answer (NetEaseCrowd's
#: ``taskId, workerId, answer``, crowd-kit before 1.0's ``performer``, spark-crowd's
#: ``example, annotator, value``, cleanlab's ``annotator``, ...), compared case-insensitively
ROLE_ALIASES = {
    "task": ("taskid", "task_id", "item", "item_id", "example", "question", "question_id",
             "object", "sample", "sample_id", "image", "image_id", "hitid"),
    "worker": ("workerid", "worker_id", "performer", "annotator", "annotator_id", "user",
               "user_id", "rater", "rater_id", "labeler", "labeller", "judge", "judge_id"),
    "label": ("answer", "value", "response", "annotation", "choice", "rating", "output"),
}


def _alias_columns(missing, names) -> dict:
    """``{role: column}`` for missing default role names (task, worker, label) that one
    column of ``names`` answers to under another tool's name; empty unless every missing
    name finds exactly one such column (a guess that leaves one open helps nobody)."""
    if not missing or any(m not in ROLE_ALIASES for m in missing):
        return {}
    found = {}
    for role in missing:
        hits = [c for c in names if c.strip().lower() in ROLE_ALIASES[role]]
        if len(hits) != 1:
            return {}
        found[role] = hits[0]
    return found


@contextmanager
def naming_file(path, gold=None) -> Iterator[None]:
    """Errors about rows, raised while the answers read from ``path`` become a table, start
    with the file's name (those about gold values with ``gold``'s), as the readers' own do."""
    try:
        yield
    except ValueError as exc:
        where = gold if gold and str(exc).startswith("gold") else path
        if str(exc).startswith(str(where)):
            raise
        raise ValueError(f"{where}: {exc}") from None


def read_table(
    path: str | Path,
    columns: Sequence[str] | None = None,
    fmt: str | None = None,
) -> pd.DataFrame:
    """Read a table of answers; ids are kept as strings so ``007`` stays ``007``.

    Parameters
    ----------
    path : path-like
    columns : sequence of str, optional
        Columns that must be present (a missing one raises ``ValueError`` naming it).
    fmt : {"csv", "tsv", "parquet", "jsonl"}, optional
        Overrides the extension.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if path.is_dir():
        raise ValueError(f"{path}: is a directory, expected a file of answers")
    fmt = fmt or detect_format(path)
    if fmt in ("csv", "tsv", "jsonl"):
        _refuse_unnamed_compression(path)
    try:
        if fmt in ("csv", "tsv"):
            from ..io.common import sniff_utf16

            sep = "," if fmt == "csv" else "\t"
            try:
                # UTF-16 without a byte-order mark is valid UTF-8 (NUL bytes): told first
                if sniff_utf16(path):
                    raise UnicodeError
                df = _read_delimited(path, sep=sep)
            except UnicodeError:
                # not UTF-8: decoded as the platform exports are (UTF-16 with or without a
                # byte-order mark, else cp1252, what Excel writes on Windows, else latin-1)
                df = _read_delimited(path, sep=sep, text=_decoded(path))
        elif fmt == "parquet":
            try:
                df = pd.read_parquet(path)
            except ImportError as exc:
                raise ValueError(
                    f"{path}: reading Parquet needs pyarrow (pip install 'crowdlearn[parquet]')"
                ) from exc
        elif fmt == "jsonl":
            df = _read_json(path)
        else:
            raise ValueError(f"unknown format {fmt!r}")
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: the file is empty") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, ValueError) and str(exc).startswith(str(path)):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{path}: cannot parse as {fmt}: {first}") from None
    if columns is not None:
        require_columns(df, columns, path)
    if len(df) == 0:
        raise ValueError(f"{path}: no rows")
    return df


#: leading bytes of the compressed formats pandas can read, and the suffix each needs
_MAGIC = (
    (b"\x1f\x8b", "gzip", ".gz"),
    (b"BZh", "bzip2", ".bz2"),
    (b"\xfd7zXZ\x00", "xz", ".xz"),
    (b"\x28\xb5\x2f\xfd", "zstd", ".zst"),
    (b"PK\x03\x04", "zip", ".zip"),
)


def _refuse_unnamed_compression(path: Path) -> None:
    """A compressed file whose name does not say so would fail as bad UTF-8: say what it is.

    The compression of a text file is taken from its name (as pandas does); this sniffs the
    first bytes of a file whose name has no compression suffix and raises ``ValueError``
    naming the format and the suffix to add.
    """
    suffix = path.suffix.lower()
    if any(suffix == ext for _, _, ext in _MAGIC):
        return
    try:
        with open(path, "rb") as fh:
            head = fh.read(6)
    except OSError:
        return
    for magic, name, ext in _MAGIC:
        if head.startswith(magic):
            raise ValueError(
                f"{path}: looks compressed ({name}) but its name does not say so; "
                f"rename it to {path.name}{ext} or decompress it"
            )


def _decoded(path: Path) -> io.StringIO:
    """The text of a file that is not UTF-8, decoded by
    :func:`crowdlearn.io.common.read_text` (byte-order mark, UTF-16, cp1252, latin-1;
    decompressed), for pandas to parse from memory."""
    from ..io.common import read_text

    return io.StringIO(read_text(path))


def _read_json(path: Path) -> pd.DataFrame:
    """JSON Lines, one record a line, or a JSON array of records (what many tools write as
    ``.json``).

    Numbers are read as the text they are written as, as in CSV and TSV: labels ``1``,
    ``1.0`` and ``1e0`` are one class named ``1`` (not the float 1.0), and ids keep every
    digit (``9007199254740993`` and ``9007199254740992`` were one float64 id when another
    value of their column was not an integer).  Strings, ``true``/``false``, ``null`` (a
    missing value), lists and objects are read as JSON reads them.  The file is decompressed
    as pandas would (by its name) and decoded as CSV files are (a byte-order mark, UTF-8,
    UTF-16, cp1252).  A line that is not a JSON object raises ``ValueError`` naming it.
    """
    import json

    from pandas.io.common import get_handle

    from ..io.common import decode_text

    with get_handle(path, "rb", compression="infer", is_text=False) as handle:
        text = decode_text(path, handle.handle.read())
    # numbers as their text; NaN and Infinity too (CSV reads those words as text)
    options = dict(parse_int=str, parse_float=str, parse_constant=str)
    if text.lstrip(" \t\r\n").startswith("["):
        try:
            records = json.loads(text, **options)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: line {exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno})") from None
        return _records_frame(records, path, lambda i: f"record {i} (0-based) of the array")
    # one call of the C decoder on the lines joined as an array, not one call per line;
    # the lines are parsed one by one only to name the line of an error, or when the
    # joined text did not give one value per line (a line holding two values, say)
    numbers, lines = [], []
    for number, line in enumerate(text.split("\n"), start=1):  # "\n" only, as JSON Lines
        if line.strip():
            numbers.append(number)
            lines.append(line)
    if not lines:
        raise pd.errors.EmptyDataError  # (read_table's "the file is empty")
    try:
        records = json.loads("[" + ",".join(lines) + "]", **options)
    except json.JSONDecodeError:
        records = None
    if records is None or len(records) != len(lines):
        records = []
        for number, line in zip(numbers, lines):
            try:
                records.append(json.loads(line, **options))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: line {number}: not valid JSON: {exc.msg} (column {exc.colno})") from None
    return _records_frame(records, path, lambda i: f"line {numbers[i]}")


def _records_frame(records, path: Path, where) -> pd.DataFrame:
    """The table of JSON ``records`` (a list of objects, one row each, a column per key);
    ``where(i)`` names record i in the ``ValueError`` of one that is not an object."""
    if not isinstance(records, list):
        raise ValueError(f"{path}: expected JSON Lines or an array of objects, found one {type(records).__name__}")
    odd = next((i for i, record in enumerate(records) if type(record) is not dict), None)
    if odd is not None:
        raise ValueError(f"{path}: {where(odd)}: not a JSON object ({{\"task\": ..., ...}}) but "
                         f"{_json_kind(records[odd])}")
    if not records:
        raise ValueError(f"{path}: no rows")
    return pd.DataFrame.from_records(records)


def _json_kind(value) -> str:
    """How a JSON value is named in messages (``an array``, ``a string``, ...)."""
    kinds = {list: "an array", str: "a string or number", bool: "true or false", type(None): "null"}
    return kinds.get(type(value), "an object")


def _read_delimited(path: Path, sep: str, text: io.StringIO | None = None) -> pd.DataFrame:
    """All cells as strings, only empty cells missing ("NA", "null", "007" stay text).

    ``text``, when given, is the file's content already decoded (:func:`_decoded`), read
    instead of ``path``.  A name given to two columns of the header raises ``ValueError``
    (pandas would rename the second ``name.1`` and a reader of ``name`` would silently take
    the first).
    """
    source = path if text is None else text
    try:
        header = pd.read_csv(source, sep=sep, header=None, nrows=1, dtype=str, keep_default_na=False)
        names = [name for name in header.iloc[0] if name.strip()]  # unnamed columns are no role's
        twice = next((name for i, name in enumerate(names) if name in names[:i]), None)
        if twice is not None:
            raise ValueError(f"{path}: line 1: column {twice!r} appears twice in the header")
        options = dict(sep=sep, dtype=str, keep_default_na=False, na_values=[""])
        if text is not None:
            text.seek(0)  # read again from the start, the header included
            return pd.read_csv(text, **options)
        fast = _read_delimited_arrow(path, sep)
        return fast if fast is not None else pd.read_csv(path, **options)
    except pd.errors.ParserError as exc:
        # pandas names the record ("row 99", blank lines and multi-line values counted
        # otherwise than in an editor) and not the file: name the file line instead
        located = unclosed_quote_error(exc, path, sep, None if text is None else [text.getvalue()])
        if located is None:
            raise
        raise located from None


def _read_delimited_arrow(path: Path, sep: str) -> pd.DataFrame | None:
    """pyarrow's multi-threaded parser with every column typed as text; None to use pandas.

    Much faster than pandas' C parser on large files, for the same frame.  pyarrow is called
    directly, not through ``pd.read_csv(engine="pyarrow")``: on pandas < 3.1 that engine
    infers types before applying ``dtype=str``, so ``007`` came back as ``7``.  Only for
    uncompressed files whose header has at least two distinct, non-empty names (pandas
    renames duplicates and blanks; in a one-column file a line of spaces is a blank line
    to pandas but a value to pyarrow).  Anything pyarrow rejects — a ragged row, bad UTF-8,
    quoting it cannot parse — returns None, so pandas reads the file and its messages apply.

    pyarrow also accepts a quote that is never closed, without an error: the file is
    returned only when :func:`_may_hold_an_open_quote` finds no room for one.
    """
    if path.suffix.lower() not in _PLAIN_DELIMITED:
        return None
    try:
        import pyarrow as pa
        import pyarrow.csv as pacsv
    except ImportError:
        return None
    import csv

    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            header = next(csv.reader(fh, delimiter=sep), None)
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    if not header or len(header) < 2 or len(set(header)) != len(header) or any(not h.strip() for h in header):
        return None
    try:
        table = pacsv.read_csv(
            path,
            parse_options=pacsv.ParseOptions(delimiter=sep),
            convert_options=pacsv.ConvertOptions(
                column_types={name: pa.string() for name in header},
                null_values=[""], strings_can_be_null=True, quoted_strings_can_be_null=True,
            ),
        )
    except (pa.ArrowException, OSError, ValueError):
        return None
    if table.column_names != header or _may_hold_an_open_quote(table, path, sep):
        return None
    columns = {}
    for name in header:
        col = table.column(name).to_pandas()
        if col.dtype == object:  # pandas without a default string dtype: NaN for missing, as C
            col = col.where(col.notna(), np.nan)
        columns[name] = col
    return pd.DataFrame(columns)


#: a blank line (its line break, followed by the next): pyarrow and pandas skip them
_BLANK_LINE = re.compile(rb"\n(?=\r?\n)")


def _may_hold_an_open_quote(table, path: Path, sep: str) -> bool:
    """Whether pyarrow's ``table`` of the file ``path`` may have read past a quote that is
    never closed, or lost rows to one.

    pyarrow reads an open quote's value to the end of its block without an error: the
    lines after it become part of one value, or are dropped with it (the rows of the next
    blocks are kept).  Each line but the header and blank ones is one row, unless a row spans
    lines; so a file is trusted when it has that many rows and its last line holds no quote
    (a value opened there ends at the end of the file having taken no line).  Everything
    else, quoted values with line breaks included, is read again by pandas, which refuses
    an open quote.  Blank lines are counted within 16 MB blocks (one across two blocks is
    missed, and that file too is read by pandas).  ``sep`` is the field separator.
    """
    breaks = 0
    tail = b""
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 24), b""):
            breaks += block.count(b"\n")
            tail = tail[-(1 << 16):] + block
    if breaks == 0:
        return True  # CR line ends (old Mac files), or a header alone
    if not one_row_per_line(table.num_rows, breaks, tail.endswith(b"\n"), lambda: _blank_lines(path)):
        return True
    start, end = last_line_span(tail)
    if start == 0:
        return True  # a last line of over 64 KB
    # the last line starts outside any value (no earlier one spans lines): read it alone
    return unclosed_quote_line([tail[start:end].decode("utf-8", errors="replace")], sep) is not None


def _blank_lines(path: Path) -> int:
    """The number of blank lines of a file, those across two 16 MB blocks not counted."""
    with open(path, "rb") as fh:
        return sum(sum(1 for _ in _BLANK_LINE.finditer(block)) for block in iter(lambda: fh.read(1 << 24), b""))


def unclosed_quote_error(exc: Exception, path, sep: str, chunks: Iterable[str] | None = None) -> ValueError | None:
    """The one-line error of a delimited file with a quoted value that never ends.

    Parameters
    ----------
    exc : Exception
        What the parser raised (pandas' ``ParserError``: "EOF inside string starting at row
        N", N a record number that is not the file line once a value spans lines).
    path : path-like
        The file, named in the message and read (decompressed as pandas reads it) unless
        ``chunks`` give its text.
    sep : str
        The field separator.
    chunks : iterable of str, optional
        The file's text (already decoded).

    Returns
    -------
    ValueError or None
        ``"<path>: line N: unterminated quote: ..."`` naming the line of the quote that
        opens the value, or None when ``exc`` is about something else (or the file cannot
        be read again to find the line).
    """
    if "EOF inside string" not in str(exc):
        return None
    try:
        if chunks is None:
            from pandas.io.common import get_handle

            with get_handle(path, "r", encoding="utf-8", errors="replace", compression="infer") as handle:
                line = unclosed_quote_line(iter(lambda: handle.handle.read(1 << 22), ""), sep)
        else:
            line = unclosed_quote_line(chunks, sep)
    except (OSError, ValueError, ImportError, EOFError):
        return None
    return None if line is None else unclosed_quote_at(path, line)


def check_writable(path: str | Path, table: bool = True) -> None:
    """Raise the ``ValueError`` that :func:`write_table` would raise for ``path``, now.

    For callers that write only after long work (the CLI reads and fits first): an unknown
    extension, Parquet without pyarrow or a missing folder is reported before any of it.
    ``table=False``: a file of another kind (an HTML page), whose folder only is checked.
    """
    path = Path(path)
    fmt = detect_format(path) if table else None
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401  (imported by the write anyway)
        except ImportError:
            raise ValueError(f"{path}: writing Parquet needs pyarrow (pip install pyarrow)") from None
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"{path}: the folder {parent} does not exist")
    if path.is_dir():
        raise ValueError(f"{path}: is a directory, expected a file name to write")


def write_table(df: pd.DataFrame, path: str | Path) -> None:
    """Write CSV/TSV/Parquet/JSON Lines chosen by the extension."""
    path = Path(path)
    fmt = detect_format(path)
    if fmt in ("csv", "tsv"):
        sep = "," if fmt == "csv" else "\t"
        if not _write_delimited_arrow(df, path, sep):
            df.to_csv(path, index=False, sep=sep)
    elif fmt == "parquet":
        try:
            df.to_parquet(path, index=False)
        except ImportError as exc:
            raise ValueError(
                f"{path}: writing Parquet needs pyarrow (pip install 'crowdlearn[parquet]')"
            ) from exc
    else:
        df.to_json(path, orient="records", lines=True, force_ascii=False)


def _write_delimited_arrow(df: pd.DataFrame, path: Path, sep: str) -> bool:
    """Write ``df`` with pyarrow's CSV writer; False when this frame should go to pandas.

    pandas formats floats in Python, one value at a time, which dominates writing a large
    per-task table; pyarrow's writer does it in compiled code.  The header and text
    and integer cells are what pandas writes; float cells are the same numbers in pyarrow's
    shortest round-trip spelling (``1`` for 1.0, ``0.00001`` for 1e-05), so this path is
    taken only when float columns hold non-integral values (integral floats such as float
    ids would read back as different strings).  Everything unusual goes to pandas: fewer
    than two columns (a lone missing value would be an empty line), duplicate or non-string
    column names, booleans, bytes, mixed-type ids, values that need quoting, compressed file
    names, or no pyarrow.
    """
    if path.suffix.lower() not in _PLAIN_DELIMITED or df.shape[1] < 2:
        return False
    if not df.columns.is_unique or not all(
        isinstance(c, str) and not any(ch in c for ch in (sep, '"', "\n", "\r")) for c in df.columns
    ):
        return False
    for col in df.columns:
        values = df[col]
        if pd.api.types.is_float_dtype(values.dtype):
            finite = values.to_numpy(dtype=float, na_value=np.nan)
            finite = finite[np.isfinite(finite)]
            if finite.size and np.all(finite == np.round(finite)):
                return False  # e.g. float ids or an all-0/1 column: pandas keeps "1.0"
        elif pd.api.types.is_integer_dtype(values.dtype) and not pd.api.types.is_extension_array_dtype(values.dtype):
            continue
        elif pd.api.types.infer_dtype(values, skipna=True) != "string":
            return False  # booleans, bytes, mixed types, nullable ints, ...
    try:
        import pyarrow as pa
        import pyarrow.csv as pacsv
    except ImportError:
        return False
    try:
        table = pa.Table.from_pandas(df, preserve_index=False)
    except Exception:  # noqa: BLE001 - any conversion problem: let pandas write it
        return False
    # quoting "none" refuses values with separators, quotes or newlines; pandas then writes
    # the file again from the start
    options = pacsv.WriteOptions(include_header=False, delimiter=sep, quoting_style="none")
    try:
        with open(path, "wb") as fh:
            fh.write((sep.join(df.columns) + "\n").encode("utf-8"))
            pacsv.write_csv(table, fh, write_options=options)
    except pa.ArrowInvalid:
        return False
    return True
