"""Readers and writers for tables of crowd answers (CSV, TSV, Parquet, JSON Lines).

Generic table I/O used by :class:`~crowdlearn.core.data.CrowdLabels` constructors and by
:mod:`crowdlearn.core.io` (dataset folders); it knows nothing of crowd labels.

Every reader error is a ``ValueError`` (or ``FileNotFoundError``) with the file name and what
is wrong, so the CLI can print one line instead of a traceback.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["read_table", "write_table", "check_writable", "detect_format", "first_record_line",
           "require_columns", "column_hint", "naming_file"]

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
    if path is not None and len(names) == 1:
        for sep, word in ((";", "semicolons"), ("\t", "tabs"), (",", "commas"), ("|", "bars")):
            if sep in names[0]:
                ext = {"\t": ".tsv", ",": ".csv"}.get(sep)
                fix = f"name it {Path(path).stem}{ext}" if ext else "convert it to commas or tabs"
                return f" (the header looks separated by {word}; {fix})"
    return ""


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
            try:
                df = _read_delimited(path, sep="," if fmt == "csv" else "\t")
            except UnicodeDecodeError:
                # not UTF-8: decoded as the platform exports are (a UTF-16 byte-order mark,
                # else cp1252, what Excel writes on Windows, else latin-1), not refused
                df = _read_delimited(path, sep="," if fmt == "csv" else "\t", text=_decoded(path))
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
    :func:`crowdlearn.io.common.read_text` (byte-order mark, cp1252, latin-1; decompressed),
    for pandas to parse from memory."""
    from ..io.common import read_text

    return io.StringIO(read_text(path))


def _read_json(path: Path) -> pd.DataFrame:
    """JSON Lines, one record a line, or a JSON array of records (what many tools write as
    ``.json``, and which JSON Lines parsing reads as one column named ``0``)."""
    from ..io.common import read_head

    if read_head(path, 4096).lstrip("\ufeff \t\r\n").startswith("["):
        return pd.read_json(_decoded(path), orient="records", dtype=False)
    try:
        # utf-8-sig: a byte-order mark (Windows tools write one) is skipped, as in CSV/TSV
        return pd.read_json(path, lines=True, dtype=False, encoding="utf-8-sig")
    except UnicodeDecodeError:  # as CSV: the encodings of the platform exports
        return pd.read_json(_decoded(path), lines=True, dtype=False)


def _read_delimited(path: Path, sep: str, text: io.StringIO | None = None) -> pd.DataFrame:
    """All cells as strings, only empty cells missing ("NA", "null", "007" stay text).

    ``text``, when given, is the file's content already decoded (:func:`_decoded`), read
    instead of ``path``.  A name given to two columns of the header raises ``ValueError``
    (pandas would rename the second ``name.1`` and a reader of ``name`` would silently take
    the first).
    """
    source = path if text is None else text
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


def _read_delimited_arrow(path: Path, sep: str) -> pd.DataFrame | None:
    """pyarrow's multi-threaded parser with every column typed as text; None to use pandas.

    Much faster than pandas' C parser on large files, for the same frame.  pyarrow is called
    directly, not through ``pd.read_csv(engine="pyarrow")``: on pandas < 3.1 that engine
    infers types before applying ``dtype=str``, so ``007`` came back as ``7``.  Only for
    uncompressed files whose header has at least two distinct, non-empty names (pandas
    renames duplicates and blanks; in a one-column file a line of spaces is a blank line
    to pandas but a value to pyarrow).  Anything pyarrow rejects — a ragged row, bad UTF-8,
    quoting it cannot parse — returns None, so pandas reads the file and its messages apply.
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
    if table.column_names != header:
        return None
    columns = {}
    for name in header:
        col = table.column(name).to_pandas()
        if col.dtype == object:  # pandas without a default string dtype: NaN for missing, as C
            col = col.where(col.notna(), np.nan)
        columns[name] = col
    return pd.DataFrame(columns)


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
