"""The rules for ids and values that every answer table follows.

Every kind of answer (class labels, continuous scores, tags, comparisons, similarities) reads
its ids and values through these functions, so that a file means the same on every kind:

- factorising ids into codes (:func:`factorize_ids`: sorted uniques; ``1`` and ``"1"`` in
  one column refused);
- stripping text of surrounding whitespace (:func:`strip_text`, :func:`strip_frame`: ``" t1"``
  is the task ``"t1"``, a cell of blanks a missing value);
- matching ids and values by value across spellings and types (:func:`label_number`,
  :func:`value_key`, :func:`positions_by_value`, :func:`ids_like`, :func:`equal_by_value`:
  ``17`` and ``"17"`` are one task, ``1``, ``1.0`` and ``"1"`` one number);
- showing them in error messages (:func:`show_value`, :func:`row_list`).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["DENSE_IDS_PER_VALUE", "equal_by_value", "factorize_ids", "ids_like", "label_number",
           "positions_by_value", "row_list", "show_value", "strip_frame", "strip_text", "value_key"]


#: :func:`factorize_ids` numbers integer ids through a presence array over their range
#: ``max - min + 1`` while that is at most this many times the number of values
DENSE_IDS_PER_VALUE = 2


def _dense_int_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Codes and sorted uniques of integer ids of a compact range, or None if it is not.

    Marks the ids present in an array over their range and numbers them by a cumulative
    sum: three sequential passes instead of a hash table, several times faster on the
    integer ids of large tables, with the same result as ``pd.factorize(sort=True)``.
    """
    lo, hi = int(values.min()), int(values.max())
    span = hi - lo + 1
    if span > max(DENSE_IDS_PER_VALUE * len(values), 1 << 16):
        return None
    # signed ids widen first (int8 127 - -128 overflows); unsigned ones cannot go below lo
    wide = values.astype(np.int64, copy=False) if values.dtype.kind == "i" else values
    base = wide.dtype.type(lo)
    # ids that start at 0 (codes already) need no shifted copy
    offset = (wide - base if lo else wide).astype(np.intp, copy=False)  # in [0, span)
    present = np.bincount(offset, minlength=span) > 0
    number = np.cumsum(present, dtype=np.intp) - 1
    uniques = (np.flatnonzero(present).astype(wide.dtype) + base).astype(values.dtype)
    return number[offset], uniques


def factorize_ids(values: pd.Series | np.ndarray, what: str) -> tuple[np.ndarray, pd.Index]:
    """Codes and sorted uniques; falls back to first-appearance order for mixed types."""
    values = pd.Series(values, copy=False)
    if len(values) and isinstance(values.dtype, np.dtype) and values.dtype.kind in "iu":
        dense = _dense_int_codes(values.to_numpy())
        if dense is not None:
            return dense[0], pd.Index(dense[1], name=what)
    try:
        codes, uniques = pd.factorize(values, sort=True, use_na_sentinel=True)
    except TypeError:  # mixed, unorderable ids (e.g. 3 and "a"): keep appearance order
        codes, uniques = pd.factorize(values, sort=False, use_na_sentinel=True)
    if uniques.dtype == object and pd.api.types.infer_dtype(uniques, skipna=True).startswith("mixed"):
        # 1 and "1" (a JSON Lines number and string) would be two ids written the same in
        # every output table
        seen: dict[str, Any] = {}
        for value in uniques:
            other = seen.setdefault(str(value), value)
            if other is not value:
                raise ValueError(
                    f"{what} id {str(value)!r} is two different values, of types "
                    f"{type(other).__name__} and {type(value).__name__}; give the {what} column "
                    "one type"
                )
    return codes, pd.Index(uniques, name=what)


def _needs_strip(values: np.ndarray) -> bool:
    """Whether an object array holds text with surrounding whitespace, or empty text."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:
        pa = None
    if pa is not None:
        try:  # all text (or missing): pyarrow looks in compiled code
            arr = pa.array(values, type=pa.string(), from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arr = None  # values of other types too (ids 3 and "a"): one look at each below
        if arr is not None:
            spaced = pc.or_(pc.not_equal(arr, pc.utf8_trim_whitespace(arr)), pc.equal(arr, ""))
            return bool(pc.any(spaced).as_py())
    return any(isinstance(v, str) and (not v or v[0].isspace() or v[-1].isspace()) for v in values)


def strip_text(values: pd.Series | pd.Index, index: bool = False) -> pd.Series | pd.Index:
    """``values`` with leading and trailing whitespace removed from its text values.

    How every table of class labels reads ids and labels
    (:meth:`~crowdlearn.core.data.CrowdLabels.from_frame`, so every file, frame and gold), and
    every other answer table its ids and text answers (:func:`strip_frame`): ``"cat "`` from a
    hand-edited file is the class ``"cat"`` and ``" t1"`` the task ``"t1"``.  Text that is
    empty once stripped (a cell of blanks) becomes a missing value, as an empty cell of a
    file is.  Numbers and other non-text
    values are untouched, and so is the text inside a value.

    Parameters
    ----------
    values : Series or Index
    index : bool, default False
        For a Series: strip its index (the ids of a gold Series) as well.

    Returns
    -------
    Series or Index
        ``values`` itself when nothing changes (one pass in compiled code for a text column).
    """
    if isinstance(values, pd.Index):
        if isinstance(values, pd.MultiIndex):  # tuple ids: not text
            return values
        series = pd.Series(values, copy=False)
        out = strip_text(series)
        return values if out is series else pd.Index(out, name=values.name)
    out = values
    if index:
        stripped_index = strip_text(values.index)
        if stripped_index is not values.index:
            out = out.set_axis(stripped_index)
    if isinstance(values.dtype, pd.StringDtype):  # pandas' text columns: vectorised
        stripped = values.str.strip()
        stripped = stripped.mask((stripped == "").fillna(False).to_numpy(dtype=bool))
        if not stripped.equals(values):
            out = pd.Series(stripped.array, index=out.index, name=values.name)
    elif values.dtype == object and _needs_strip(values.to_numpy()):
        def strip(v):
            return (v.strip() or np.nan) if isinstance(v, str) else v

        out = pd.Series([strip(v) for v in values.to_numpy()], index=out.index, name=values.name,
                        dtype=object)
    return out


def strip_frame(df: pd.DataFrame, columns: Iterable[Hashable]) -> pd.DataFrame:
    """``df`` with the text of ``columns`` stripped of surrounding whitespace.

    How every answer table reads its id and label columns (:func:`strip_text`: ``" t1"`` is
    the task ``"t1"``, a cell of blanks a missing value), so that a hand-edited file means
    the same on every kind of answer.

    Parameters
    ----------
    df : DataFrame
    columns : iterable of column names
        A name that is not a column of ``df``, or names several, is skipped: the table
        reader names it in its own error.

    Returns
    -------
    DataFrame
        ``df`` itself when nothing changes, else a shallow copy: the caller's frame is
        never modified.
    """
    out = df
    for col in dict.fromkeys(columns):
        if col is None or int(np.sum(df.columns == col)) != 1:
            continue
        values = strip_text(df[col])
        if values is not df[col]:
            if out is df:
                out = df.copy(deep=False)
            out[col] = values
    return out


def row_list(mask: np.ndarray, first_line: int | None = None, limit: int = 5) -> str:
    """Where the flagged rows are, for an error message.

    One rule: a frame's rows are named by position (0-based, as ``df.iloc``); rows read from a
    file (``first_line`` = the file line of the first row, 2 below a header) by file line
    number, header = line 1, as the parsers' own messages do.
    """
    rows = np.flatnonzero(mask)
    plural = "s" if len(rows) > 1 else ""
    if first_line is not None:
        rows = rows + first_line
        what = f"line{plural}"
    else:
        what = f"row position{plural}"
    shown = ", ".join(str(int(r)) for r in rows[:limit])
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    return f"{what} {shown}{more}"


def show_value(value: Any) -> str:
    """A class, tag, id or answer as an error message shows it: its repr as Python's.

    Values taken from a pandas Index or a numpy array are numpy scalars, whose repr is
    ``np.int64(7)`` since numpy 2; the message should say ``7``, as the file does.

    Parameters
    ----------
    value : object

    Returns
    -------
    str
        ``repr`` of the value, of its Python equivalent for a numpy scalar (text quoted).
    """
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value)


def label_number(value: Any, infinite: bool = False) -> Decimal | None:
    """The finite number a label spells (``"1"``, ``"1.0"``, ``1``, ``1.0`` -> 1); else None.

    ``infinite``: also give the infinities (``inf``, ``"-inf"``), for ordering; they are not
    merged with other spellings, so the default leaves them out.
    """
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (str, int, float, np.integer, np.floating)):
        try:
            number = Decimal(value.strip() if isinstance(value, str) else str(value))
        except (InvalidOperation, ValueError):
            return None
        return number if number.is_finite() or (infinite and number.is_infinite()) else None
    return None


def value_key(value: Any) -> Hashable:
    """A key under which ``1``, ``1.0``, ``"1"`` and ``"1.0"`` coincide: the number a value
    spells (:func:`label_number`; a Decimal's hash equals the number's), else its text."""
    number = label_number(value)
    return number if number is not None else ("text", str(value))


def _same_kind(a: Any, b: Any) -> bool:
    """Whether two collections hold values of the same inferred type (then ``==`` is right)."""
    return pd.api.types.infer_dtype(a, skipna=True) == pd.api.types.infer_dtype(b, skipna=True)


def positions_by_value(target: pd.Index, values: Any, what: str) -> np.ndarray:
    """Position of each of ``values`` in ``target`` (-1 when absent).

    Exact when both hold the same type of value; by value (:func:`value_key`) when they do
    not, because ids and labels read from a file by this library are text while
    ``pd.read_csv`` gives numbers, and ``"17" == 17`` is False: without this a truth file read
    with pandas would match no task, or count every label wrong.
    """
    values = pd.Index(values)
    if len(values) == 0:
        return np.empty(0, dtype=np.intp)
    if _same_kind(target, values):
        if not target.is_unique:
            raise ValueError(f"{what} holds {target[target.duplicated()][0]!r} more than once")
        return target.get_indexer(values)
    keys = pd.Index([value_key(v) for v in target], dtype=object)
    if not keys.is_unique:
        raise ValueError(
            f"{what} holds two values spelling the same number ({target[keys.duplicated()][0]!r}); "
            "give both sides ids and labels of the same type"
        )
    return keys.get_indexer(pd.Index([value_key(v) for v in values], dtype=object))


def ids_like(values: Any, ids: pd.Index, what: str = "ids") -> pd.Index:
    """``values`` with each one that names an id of ``ids`` (by value,
    :func:`positions_by_value`) replaced by that id as ``ids`` spell it; the others unchanged.

    Ids read from a text file are text, those of a Parquet file or a numeric DataFrame column
    numbers; a task list, a worker list or a table keyed by task must find the answers' ids
    either way (``17`` and ``"17"`` are one task).
    """
    values = pd.Index(values)
    pos = positions_by_value(pd.Index(ids), values, what)
    if len(values) == 0 or (pos >= 0).all() and _same_kind(ids, values):
        return values
    out = np.asarray(values, dtype=object).copy()
    hit = pos >= 0
    out[hit] = np.asarray(ids, dtype=object)[pos[hit]]
    return pd.Index(list(out), name=values.name)


def equal_by_value(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise ``a == b`` (missing values unequal), by value when the types differ."""
    present = pd.notna(a) & pd.notna(b)
    if _same_kind(a, b):
        return np.asarray(a == b, dtype=bool) & present
    same = np.fromiter((value_key(x) == value_key(y) for x, y in zip(a, b)), dtype=bool, count=len(a))
    return same & present
