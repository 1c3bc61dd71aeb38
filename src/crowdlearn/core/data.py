"""The core data type: :class:`CrowdLabels`, an immutable integer-coded long table.

Every estimator in crowdlearn reads a ``CrowdLabels``.  It stores L crowd answers as three
``int32`` code arrays (task, worker, label) sorted by task, with CSR offsets ``task_ptr`` so
that the answers of task ``n`` are the slice ``task_ptr[n]:task_ptr[n + 1]``.  The category
maps (``tasks``, ``workers``, ``classes``) turn codes back into the user's identifiers.
Memory is O(L + N*K); nothing of size tasks x workers is ever allocated.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence, Sized
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

import numpy as np
import pandas as pd

from .answer_table import check_codes, freeze

__all__ = ["CrowdLabels", "as_crowd_labels", "class_codes", "equal_by_value", "factorize_ids", "ids_like",
           "keyed_gold", "label_number", "positions_by_value", "refuse_contradicting_gold", "row_list",
           "show_value", "strip_frame", "strip_text", "value_key"]

DuplicatePolicy = Literal["keep", "last", "first", "error"]


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

    How every table of class labels reads ids and labels (:meth:`CrowdLabels.from_frame`, so
    every file, frame and gold), and every other answer table its ids and text answers
    (:func:`strip_frame`): ``"cat "`` from a hand-edited file is the class ``"cat"`` and
    ``" t1"`` the task ``"t1"``.  Text that is empty once stripped (a cell of blanks)
    becomes a missing value, as an empty cell of a file is.  Numbers and other non-text
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


def _normalise_label_values(values: pd.Series) -> pd.Series:
    """Make 1.0 and 1 the same class: float columns with integral values become int64."""
    if pd.api.types.is_float_dtype(values.dtype):
        finite = values.dropna().to_numpy()
        # an inf label is a class of its own; checked first so np.mod never sees it
        if len(finite) and np.isfinite(finite).all() and np.all(np.mod(finite, 1) == 0):
            out = values.astype("Int64")
            return out.astype(object).where(out.notna(), np.nan)
    return values


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


def keyed_gold(gold: Any, what: str = "gold", *, key: str = "task", value: str = "class",
               dtype: Any = None, hint: str = "") -> pd.Series:
    """``gold`` as a Series keyed by id: a Series as given, a mapping id -> value converted.

    Gold and truth are matched to the answers by id, so they must name their ids.  A
    sequence (ndarray, list, tuple, ``pd.Index``, ...) names none: pandas would key it by
    position 0..n-1, which with integer ids matches the wrong tasks and with text ids none,
    both silently.  Every public entry that takes gold or truth keyed by task or item reads
    it through this function, so such input is one clear ``ValueError`` everywhere.

    Parameters
    ----------
    gold : Series or mapping
        The gold; a Series may have any index (integer ids included).
    what : str
        Its name in the error (``"gold"``, ``"truth"``, ...).
    key, value : str
        What it maps from and to, for the error (``task -> class``, ``item -> score``...).
    dtype : optional
        The dtype of the Series a mapping becomes (a Series is returned unchanged).
    hint : str
        Appended to the error of a sequence: another form the caller accepts.

    Raises
    ------
    ValueError
        When ``gold`` is a sequence or any other value that is not keyed by id.
    TypeError
        When ``gold`` is a DataFrame (which column holds the values cannot be told).

    Examples
    --------
    >>> keyed_gold({"t1": "yes"}).to_dict()
    {'t1': 'yes'}
    >>> keyed_gold(["yes", "no"])
    Traceback (most recent call last):
        ...
    ValueError: gold must be keyed by task id (a pandas Series indexed by task, or a dict task -> class), got a list of 2 value(s), which names no task
    """
    if isinstance(gold, pd.Series):
        return gold
    if isinstance(gold, Mapping):
        return pd.Series(gold, dtype=dtype)
    if isinstance(gold, pd.DataFrame):
        raise TypeError(
            f"{what} must be a Series or mapping {key} -> {value}, got a DataFrame; "
            f"pass e.g. frame.set_index('{key}')['label']"
        )
    # an array, list, Index, ...: pandas would key it by position 0..n-1, which matches
    # integer ids by value, i.e. the wrong tasks, or none
    name = type(gold).__name__
    shown = (f"an array of shape {gold.shape}" if isinstance(gold, np.ndarray)
             else ("an " if name[0] in "AEIOUaeiou" else "a ") + name
             + (f" of {len(gold)} value(s)" if isinstance(gold, Sized) else ""))
    raise ValueError(
        f"{what} must be keyed by {key} id (a pandas Series indexed by {key}, or a dict "
        f"{key} -> {value}), got {shown}, which names no {key}{hint}"
    )


def equal_by_value(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise ``a == b`` (missing values unequal), by value when the types differ."""
    present = pd.notna(a) & pd.notna(b)
    if _same_kind(a, b):
        return np.asarray(a == b, dtype=bool) & present
    same = np.fromiter((value_key(x) == value_key(y) for x, y in zip(a, b)), dtype=bool, count=len(a))
    return same & present


def _merge_number_spellings(codes: np.ndarray, index: pd.Index) -> tuple[np.ndarray, pd.Index]:
    """One class per number: text labels spelling the same finite number become one class.

    The class keeps the shortest spelling (then the first in sort order); the other classes
    keep their order.  Nothing changes (same arrays returned) when no two labels coincide.
    """
    if len(index) < 2 or not (pd.api.types.is_object_dtype(index.dtype) or pd.api.types.is_string_dtype(index.dtype)):
        return codes, index
    values = index.to_numpy()
    groups: dict[Decimal, list[int]] = {}
    for pos, value in enumerate(values):
        if isinstance(value, str):
            key = label_number(value)
            if key is not None:
                groups.setdefault(key, []).append(pos)
    target = np.arange(len(values))
    merged = False
    for members in groups.values():
        if len(members) > 1:
            keep = min(members, key=lambda i: (len(values[i]), values[i]))
            target[members] = keep
            merged = True
    if not merged:
        return codes, index
    kept = np.unique(target)
    new_code = np.searchsorted(kept, target)
    return new_code[codes], pd.Index(values[kept], name=index.name, dtype=index.dtype)


def _gold_as_classes(gold: pd.Series, classes: Iterable[Hashable]) -> pd.Series:
    """Gold values spelled as the classes they are: one number, one class, for gold too.

    Parameters
    ----------
    gold : Series
        Gold values (task -> class), without missing values.
    classes : iterable
        The class values the gold should use (the answers' labels, or a class index).

    Returns
    -------
    Series
        ``gold`` with every value that is not one of ``classes`` but spells the same
        finite number as one of them replaced by that class: the gold text ``"1.0"`` of a
        truth file becomes the class ``"1"`` of text labels, and the text ``"2"`` the class
        ``2`` of an integer label column (Parquet, JSON Lines).  Other values are
        untouched; ``gold`` itself is returned when nothing changes.
    """
    # gold holds a few distinct values; the classes may be a whole label column, so they are
    # looked at only when some gold value is a number
    numbers = {v: k for v in pd.unique(gold) if (k := label_number(v)) is not None}
    if not numbers:
        return gold
    known = pd.Index(pd.unique(pd.Series(classes, dtype=object)))
    by_number: dict[Decimal, Any] = {}
    for value in known:
        key = label_number(value)
        if key is not None:
            by_number.setdefault(key, value)
    spelled = {v: by_number[k] for v, k in numbers.items() if k in by_number and v not in known}
    if not spelled:
        return gold
    return gold.map(lambda v: spelled.get(v, v)).astype(object)


def refuse_contradicting_gold(ids: pd.Index, values: Any, shown: Any = None, unit: str = "task") -> None:
    """Raise ``ValueError`` when one id is given two different gold values.

    Gold read from a file may list an id twice; keeping either row would silently score the
    answers against a value the file also contradicts.  Repeated rows that agree are
    accepted.  Every answer kind's gold goes through here, so the error reads the same.

    Parameters
    ----------
    ids : Index
        The gold's ids, one per gold value (a repeated id is a repeated row).
    values : array-like
        One hashable value per id, equal exactly when two gold values are the same (class
        codes, floats, a sorted tuple of tag codes).
    shown : array-like, optional
        What the error shows of each value (default ``values`` themselves).
    unit : str
        What an id is called in the error (``task`` or ``item``).

    Raises
    ------
    ValueError
        ``gold of task 't1' is given twice: 1.5 and 2.0`` for the first contradicted id.
    """
    ids = pd.Index(ids)
    if not ids.has_duplicates:
        return
    values = pd.Series(list(values), dtype=object)
    # the row where each id first appears
    first_at = pd.Series(np.arange(len(ids))).groupby(pd.factorize(ids)[0], sort=False).transform("first")
    first_at = first_at.to_numpy()
    bad = np.flatnonzero(values.to_numpy()[first_at] != values.to_numpy())
    if len(bad):
        at = bad[0]
        shown = values.to_numpy() if shown is None else np.asarray(list(shown), dtype=object)
        raise ValueError(
            f"gold of {unit} {show_value(ids[at])} is given twice: {show_value(shown[first_at[at]])} and "
            f"{show_value(shown[at])}"
        )


def _refuse_contradicting_gold(tasks: pd.Index, codes: np.ndarray, classes: pd.Index) -> None:
    """:func:`refuse_contradicting_gold` of class codes, showing the classes they index."""
    codes = np.asarray(codes)
    refuse_contradicting_gold(tasks, codes, classes.take(codes))


def _class_sort_key(value: Any) -> tuple:
    """Where a class goes in the default class order (:func:`class_codes`).

    Numbers first, by value, however they are spelled (the text ``"10"`` of a file after
    ``"2"``, as the number 10 of a numeric column is); then everything else by its text.
    The type name breaks the rare tie of two classes spelling one number in different types
    (``1`` and ``"1.0"`` in one object column), so the order never depends on row order.
    """
    number = label_number(value, infinite=True)
    if number is not None:
        return (0, number, type(value).__name__, str(value))
    return (1, str(value), type(value).__name__)


def _in_class_order(codes: np.ndarray, index: pd.Index) -> tuple[np.ndarray, pd.Index]:
    """``codes`` and ``index`` renumbered so that the classes follow :func:`_class_sort_key`."""
    if len(index) < 2 or index.dtype.kind in "iufb":
        # a numeric (or boolean) index is already sorted by value: pd.factorize(sort=True)
        return codes, index
    values = index.to_numpy()
    order = np.array(sorted(range(len(values)), key=lambda i: _class_sort_key(values[i])),
                     dtype=np.intp)
    if np.array_equal(order, np.arange(len(values))):
        return codes, index
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[codes], pd.Index(values[order], name=index.name, dtype=index.dtype)


def class_codes(values: pd.Series, normalised: bool = False) -> tuple[np.ndarray, pd.Index]:
    """Codes and class index of raw label values, in the default class order.

    One class per number (``1``, ``1.0`` and ``"1.0"`` are one class), and the classes in
    one order on every path: numbers by value, whether a file's text (``"2"`` before
    ``"10"``) or a numeric column, then the other labels by their text
    (:func:`_class_sort_key`), so mixed labels do not depend on the rows' order either.
    This is the order of every ``probas_`` column set unless ``classes=`` is given.

    Parameters
    ----------
    values : Series
        Raw label values, without missing values.
    normalised : bool, default False
        Float values were already made integers where integral (as
        :meth:`CrowdLabels.from_frame` does first).

    Returns
    -------
    codes : ndarray of int
        The class code of each value.
    classes : Index
        The classes, code ``c`` at position ``c``.
    """
    if not normalised:
        values = _normalise_label_values(pd.Series(values))
    codes, index = factorize_ids(values, "class")
    return _in_class_order(*_merge_number_spellings(codes, index))


class CrowdLabels:
    """Crowd answers as an immutable, integer-coded long table sorted by task.

    Parameters
    ----------
    task, worker, label : array of int
        Codes of length L, ``0 <= task < n_tasks`` and so on.  Must be sorted by task (the
        constructors guarantee it); use :meth:`from_codes` to build from unsorted codes.
    tasks, workers, classes : pandas.Index
        The identifiers behind the codes.
    truth : array of int, optional
        Gold class code per task, ``-1`` where unknown.
    features : array, shape (n_tasks, n_features), optional
        Item features aligned with ``tasks``.

    Notes
    -----
    Labels: one number, one class.  Files are read as text (``CrowdLabels.from_csv``, the
    ``crowdlearn`` command), so ids and labels stay as written (``007`` stays ``007``); a
    DataFrame's labels are the values it holds.  On every path, labels that spell the same
    finite number are one class: ``1``, ``1.0`` and ``1e0`` in a file are the class ``"1"``
    (the shortest spelling), and in a float column 1.0 is the class ``1`` (integral floats
    become ints).  So a file gives the same classes and the same answers whether it goes
    through the CLI, ``from_csv`` or ``pandas.read_csv`` + :meth:`from_frame`; only the class
    names' type differs (text from files, numbers from a numeric column).  Labels that are
    not all numbers, or distinct numbers, are untouched.  The classes are ordered alike on
    every path too: numbers by value (``"2"`` before ``"10"``), then other labels by text.

    Text ids and labels are stripped of leading and trailing whitespace (:func:`strip_text`):
    ``"cat"`` and ``"cat "`` of a hand-edited file are one class, ``" t1"`` and ``"t1"`` one
    task, on every path (files, frames, given ``classes``, gold, feature rows), so gold still
    matches; a value of blanks only is a missing value.  Numbers and the text inside a value
    are untouched.

    Error messages locate rows by position in a frame (0-based, as ``df.iloc``: "row
    position 3"), and by file line for files (header = line 1: "line 5").

    Repeated (task, worker) answers are kept by default: real data has them and they carry
    information.  Every task in ``tasks`` has at least one answer unless it was added
    explicitly through ``all_tasks`` (then its slice is empty and estimators return the
    class prior for it).
    """

    __slots__ = (
        "task",
        "worker",
        "label",
        "tasks",
        "workers",
        "classes",
        "task_ptr",
        "truth",
        "features",
        "_codes_cache",
    )

    def __init__(
        self,
        task: np.ndarray,
        worker: np.ndarray,
        label: np.ndarray,
        tasks: pd.Index,
        workers: pd.Index,
        classes: pd.Index,
        truth: np.ndarray | None = None,
        features: np.ndarray | None = None,
    ) -> None:
        task = np.ascontiguousarray(task, dtype=np.int32)
        worker = np.ascontiguousarray(worker, dtype=np.int32)
        label = np.ascontiguousarray(label, dtype=np.int32)
        if not (len(task) == len(worker) == len(label)):
            raise ValueError("task, worker and label code arrays must have the same length")
        if len(task) > 1 and np.any(task[1:] < task[:-1]):
            raise ValueError("task codes must be sorted; use CrowdLabels.from_codes")
        n, m, k = len(tasks), len(workers), len(classes)
        check_codes((task, n, "task"), (worker, m, "worker"), (label, k, "label"))
        self.task, self.worker, self.label = task, worker, label
        self.tasks = pd.Index(tasks, name="task")
        self.workers = pd.Index(workers, name="worker")
        self.classes = pd.Index(classes, name="class")
        self.task_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(task, minlength=n), out=self.task_ptr[1:])
        if truth is not None:
            truth = np.ascontiguousarray(truth, dtype=np.int32)
            if truth.shape != (n,):
                raise ValueError(f"truth must have one entry per task ({n}), got {truth.shape}")
            if np.any((truth < -1) | (truth >= k)):
                raise ValueError(f"truth codes must lie in [-1, {k})")
        self.truth = truth
        if features is not None:
            features = np.asarray(features)
            if features.ndim < 2 or features.shape[0] != n:
                raise ValueError(
                    f"features must have one row per task: expected {n} rows, "
                    f"got shape {features.shape}"
                )
        self.features = features
        self._codes_cache: dict[str, Any] = {}
        freeze(self.task, self.worker, self.label, self.task_ptr)

    # ------------------------------------------------------------------ sizes
    @property
    def n_tasks(self) -> int:
        return len(self.tasks)

    @property
    def n_workers(self) -> int:
        return len(self.workers)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def n_labels(self) -> int:
        return len(self.task)

    def __len__(self) -> int:
        return self.n_labels

    def __repr__(self) -> str:
        extra = []
        if self.truth is not None:
            extra.append(f"gold={int((self.truth >= 0).sum())}")
        if self.features is not None:
            extra.append(f"features={self.features.shape[1:]}")
        tail = (", " + ", ".join(extra)) if extra else ""
        return (
            f"CrowdLabels(labels={self.n_labels}, tasks={self.n_tasks}, "
            f"workers={self.n_workers}, classes={self.n_classes}{tail})"
        )

    # ---------------------------------------------------------- derived data
    @property
    def worker_label(self) -> np.ndarray:
        """``worker * K + label`` per answer (int32 while it fits): the EM kernels' key."""
        wl = self._codes_cache.get("wl")
        if wl is None:
            k = self.n_classes
            dtype = np.int32 if self.n_workers * k < 2**31 else np.int64
            wl = self.worker.astype(dtype) * k + self.label
            wl.flags.writeable = False
            self._codes_cache["wl"] = wl
        return wl

    def labels_per_task(self) -> np.ndarray:
        return np.diff(self.task_ptr)

    def worker_order(self) -> np.ndarray:
        """Positions of the answers sorted by worker (stable: by task within a worker),
        built once and cached: loops that update per-worker rows run in this order."""
        order = self._codes_cache.get("worker_order")
        if order is None:
            order = np.argsort(self.worker, kind="stable")
            order.flags.writeable = False
            self._codes_cache["worker_order"] = order
        return order

    def canonical_order(self) -> np.ndarray:
        """Positions of the answers sorted by (task, worker, label) codes, built once and cached.

        The answers of a task are stored in the order of the rows they were read from, so
        anything drawn or chosen per answer (a random start, cross-validation folds, the
        first of repeated answers) follows this order instead, and the result does not
        depend on how the rows of a file were ordered.  Equal answers are interchangeable.
        """
        order = self._codes_cache.get("canonical_order")
        if order is None:
            order = np.lexsort((self.label, self.worker, self.task))
            order.flags.writeable = False
            self._codes_cache["canonical_order"] = order
        return order

    def labels_per_worker(self) -> np.ndarray:
        return np.bincount(self.worker, minlength=self.n_workers)

    def vote_counts(self) -> np.ndarray:
        """Dense (n_tasks, n_classes) array of answer counts per class."""
        k = self.n_classes
        flat = np.bincount(
            self.task.astype(np.int64) * k + self.label, minlength=self.n_tasks * k
        )
        return flat.reshape(self.n_tasks, k).astype(np.float64)

    def incidence(self):
        """Sparse (n_tasks, n_workers * n_classes) CSR matrix with one entry per answer.

        Built once and cached: row ``n`` holds a 1 at column ``worker * K + label`` for each
        answer of task ``n`` (repeated answers are separate entries that add up).
        """
        mat = self._codes_cache.get("incidence")
        if mat is None:
            import scipy.sparse as sp

            mat = sp.csr_matrix(
                (np.ones(self.n_labels), self.worker_label, self.task_ptr),
                shape=(self.n_tasks, self.n_workers * self.n_classes),
            )
            self._codes_cache["incidence"] = mat
        return mat

    def truth_series(self) -> pd.Series | None:
        if self.truth is None:
            return None
        known = self.truth >= 0
        return pd.Series(
            self.classes.take(self.truth[known]), index=self.tasks[known], name="truth"
        )

    # ----------------------------------------------------------- constructors
    @classmethod
    def from_codes(
        cls,
        task: np.ndarray,
        worker: np.ndarray,
        label: np.ndarray,
        *,
        n_tasks: int | None = None,
        n_workers: int | None = None,
        n_classes: int | None = None,
        tasks: Sequence[Hashable] | pd.Index | None = None,
        workers: Sequence[Hashable] | pd.Index | None = None,
        classes: Sequence[Hashable] | pd.Index | None = None,
        truth: np.ndarray | None = None,
        features: np.ndarray | None = None,
    ) -> "CrowdLabels":
        """Build from integer codes in any order (a stable sort by task is applied)."""
        task = np.asarray(task)
        worker = np.asarray(worker)
        label = np.asarray(label)
        def size(given, ids, codes):
            if given is not None:
                return given
            return len(ids) if ids is not None else int(codes.max(initial=-1)) + 1

        n_tasks = size(n_tasks, tasks, task)
        n_workers = size(n_workers, workers, worker)
        n_classes = size(n_classes, classes, label)
        if task.size and np.all(task[1:] >= task[:-1]):
            # already sorted by task (files often are): copies, not an argsort
            task, worker, label = task.copy(), worker.copy(), label.copy()
        else:
            order = np.argsort(task, kind="stable")
            task, worker, label = task[order], worker[order], label[order]
        return cls(
            task,
            worker,
            label,
            tasks=pd.Index(tasks if tasks is not None else np.arange(n_tasks)),
            workers=pd.Index(workers if workers is not None else np.arange(n_workers)),
            classes=pd.Index(classes if classes is not None else np.arange(n_classes)),
            truth=truth,
            features=features,
        )

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        task: str = "task",
        worker: str = "worker",
        label: str = "label",
        classes: Iterable[Hashable] | None = None,
        *,
        truth: Mapping[Hashable, Hashable] | pd.Series | None = None,
        features: np.ndarray | pd.DataFrame | None = None,
        duplicates: DuplicatePolicy = "keep",
        all_tasks: Iterable[Hashable] | None = None,
        first_line: int | None = None,
    ) -> "CrowdLabels":
        """Build from a long DataFrame with one row per answer.

        Parameters
        ----------
        df : DataFrame
            One row per crowd answer.
        task, worker, label : str
            Column names.  Ids may be any hashable values (str, int, tuples, unicode...);
            text ids and labels lose surrounding whitespace (see the class notes).
        classes : iterable, optional
            The full class set, in the order used for ``probas_`` columns.  Answers outside
            it raise ``ValueError``.  Default: the union of answers and truth values in the
            default class order, numbers by value then text (:func:`class_codes`).
        truth : mapping or Series task -> class, optional
            Gold labels (a subset of tasks is fine), keyed by task id: an array or list
            names no task and is refused (:func:`keyed_gold`).
        features : array or DataFrame, optional
            Item features.  An array must have one row per task in ``self.tasks`` order;
            a DataFrame is aligned on its index by task id.
        duplicates : {"keep", "last", "first", "error"}
            What to do with repeated (task, worker) answers.
        all_tasks : iterable, optional
            Tasks to include even if they have no answer (they then get the class prior).
        first_line : int, optional
            For a frame read from a file: the file line of its first row (2 below a header).
            Errors then name file lines (header = line 1) instead of row positions (0-based,
            as ``df.iloc``), the default.
        """
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"from_frame expects a pandas DataFrame, got {type(df).__name__}")
        roles = {"task": task, "worker": worker, "label": label}
        for i, (role_a, col_a) in enumerate(roles.items()):
            for role_b, col_b in list(roles.items())[i + 1:]:
                if col_a == col_b:
                    raise ValueError(
                        f"{role_a} and {role_b} cannot both be column {col_a!r}; "
                        "each role needs its own column"
                    )
        for col in (task, worker, label):
            count = int(np.sum(df.columns == col)) if col in df.columns else 0
            if count > 1:
                raise ValueError(
                    f"column {col!r} appears {count} times in the table; rename or drop "
                    "the extra one(s) so each role has exactly one column"
                )
        missing = [c for c in (task, worker, label) if c not in df.columns]
        if missing:
            from .tables import column_hint

            raise ValueError(
                f"missing column(s) {missing}; the table has columns {list(df.columns)}"
                + column_hint(missing, df.columns)
            )
        if len(df) == 0 and all_tasks is None:
            raise ValueError("no crowd answers: the table is empty")
        # "cat " (a hand-edited file) is the class "cat", " t1" the task "t1"; a blank is missing
        df = strip_frame(df, (task, worker, label))
        for col in (task, worker, label):
            bad = df[col].isna().to_numpy()
            if bad.any():
                raise ValueError(f"missing value in column '{col}' at {row_list(bad, first_line)}")
        labels_col = _normalise_label_values(df[label])

        if duplicates not in ("keep", "last", "first", "error"):
            raise ValueError(f"duplicates must be keep, last, first or error; got {duplicates!r}")
        if duplicates != "keep":
            dup = df.duplicated([task, worker], keep=False if duplicates == "error" else duplicates)
            if duplicates == "error" and dup.any():
                raise ValueError(
                    f"repeated (task, worker) answers at {row_list(dup.to_numpy(), first_line)}"
                )
            keep_rows = ~dup.to_numpy()
            df = df.loc[keep_rows]
            labels_col = labels_col.loc[keep_rows]
            kept_at = np.flatnonzero(keep_rows)  # error messages name the rows as given
        else:
            kept_at = None

        truth_s = None
        if truth is not None:
            truth_s = keyed_gold(truth, "truth")
            truth_s = strip_text(truth_s, index=True)  # ids and classes as the answers'
            if truth_s.isna().any():  # (a boolean mask on a large string index is slow)
                truth_s = truth_s[truth_s.notna().to_numpy()]
            truth_s = _normalise_label_values(truth_s)

        if all_tasks is not None:
            tasks_pool = pd.concat([strip_text(pd.Series(list(all_tasks))), df[task]], ignore_index=True)
            _, task_index = factorize_ids(tasks_pool.drop_duplicates(), "task")
            task_codes = task_index.get_indexer(df[task])
        else:
            task_codes, task_index = factorize_ids(df[task], "task")
        worker_codes, worker_index = factorize_ids(df[worker], "worker")

        # each gold task's position among the tasks (by value: text task ids from a file and a
        # truth Series read by pd.read_csv, 17 not "17", are the same tasks); -1: not a task
        gold_pos = None if truth_s is None else positions_by_value(task_index, truth_s.index, "the answers' tasks")

        # classes: user-given order, else the default order of observed answers and gold values
        if classes is not None:
            class_index = strip_text(pd.Index(list(classes), name="class"))
            if class_index.has_duplicates:
                raise ValueError("classes contains duplicates")
            keys = pd.Index([value_key(c) for c in class_index], dtype=object)
            if keys.has_duplicates:  # one number, one class: 1 and 1.0 are one class twice
                twice = keys.duplicated(keep=False)
                raise ValueError(f"classes spell one number twice: {', '.join(map(show_value, class_index[twice]))}")
            label_codes = class_index.get_indexer(labels_col)
            bad = label_codes < 0
            if bad.any():  # one number, one class: "1.0" is the given class "1"
                by_number = {}
                for pos, value in enumerate(class_index):
                    key = label_number(value)
                    if key is not None:
                        by_number.setdefault(key, pos)
                if by_number:
                    uniq, inv = np.unique(labels_col.to_numpy()[bad].astype(str), return_inverse=True)
                    found = np.array([by_number.get(label_number(u), -1) for u in uniq])
                    label_codes[bad] = found[inv]
                    bad = label_codes < 0
            if bad.any():
                first = labels_col.to_numpy()[bad][0]
                first = first.item() if isinstance(first, np.generic) else first  # 1, not np.int64(1)
                raise ValueError(
                    f"label {first!r} is not one of the given classes "
                    f"{list(class_index)[:10]} "
                    f"({row_list(bad if kept_at is None else np.isin(np.arange(len(dup)), kept_at[bad]), first_line)})"
                )
        else:
            pool = labels_col
            if truth_s is not None:  # gold "2" for the label 2 is that class, not a second one
                truth_s = _gold_as_classes(truth_s, labels_col)
                # only the gold of tasks in the table names classes: gold for a task nobody
                # answered is not used, and must not change the classes every method fits
                pool = pd.concat([labels_col, truth_s[gold_pos >= 0]], ignore_index=True)
            pool_codes, class_index = class_codes(pool, normalised=True)
            label_codes = pool_codes[: len(labels_col)]  # the answers come first in the pool

        truth_codes = None
        if truth_s is not None:
            truth_codes = np.full(len(task_index), -1, dtype=np.int32)
            pos = gold_pos
            cls_codes = class_index.get_indexer(_gold_as_classes(truth_s, class_index))
            if np.any((cls_codes < 0) & (pos >= 0)):  # gold for tasks nobody answered is not used
                first = int(np.flatnonzero((cls_codes < 0) & (pos >= 0))[0])
                bad_val, bad_task = show_value(truth_s.iloc[first]), show_value(truth_s.index[first])
                raise ValueError(f"gold label {bad_val} of task {bad_task} is not one of the "
                                 f"classes {list(class_index)[:10]}")
            ok = pos >= 0  # gold for tasks nobody answered is ignored, as it can't be used
            # by the task matched (7 and "007" are one task), not by the gold's spelling
            _refuse_contradicting_gold(task_index.take(pos[ok]), cls_codes[ok], class_index)
            truth_codes[pos[ok]] = cls_codes[ok]

        feats = None
        if features is not None:
            if isinstance(features, pd.DataFrame):
                features = features.set_axis(strip_text(features.index))  # task ids as the answers'
                missing_rows = task_index.difference(features.index)
                if len(missing_rows):
                    raise ValueError(
                        f"features lack rows for {len(missing_rows)} task(s), e.g. {missing_rows[0]!r}"
                    )
                feats = features.loc[task_index].to_numpy()
            else:
                feats = np.asarray(features)
        return cls.from_codes(
            task_codes,
            worker_codes,
            label_codes,
            tasks=task_index,
            workers=worker_index,
            classes=class_index,
            truth=truth_codes,
            features=feats,
        )

    @classmethod
    def from_records(
        cls, records: Iterable[tuple[Hashable, Hashable, Hashable]], **kwargs: Any
    ) -> "CrowdLabels":
        """Build from an iterable of (task, worker, label) tuples."""
        df = pd.DataFrame(list(records), columns=["task", "worker", "label"])
        return cls.from_frame(df, **kwargs)

    @classmethod
    def from_csv(cls, path, task="task", worker="worker", label="label", classes=None, **kwargs):
        """Read a CSV/TSV file (delimiter sniffed from the extension) with one row per answer.

        JSON Lines and Parquet files are read too (by their extension); errors name the
        file's lines, or row positions for Parquet (:func:`~crowdlearn.core.tables.first_record_line`).
        """
        from .tables import first_record_line, read_table

        df = read_table(path, columns=(task, worker, label))
        kwargs.setdefault("first_line", first_record_line(path))
        return cls.from_frame(df, task, worker, label, classes, **kwargs)

    @classmethod
    def from_parquet(cls, path, task="task", worker="worker", label="label", classes=None, **kwargs):
        """Read a Parquet file (needs pyarrow: ``pip install crowdlearn[parquet]``)."""
        from .tables import read_table

        df = read_table(path, columns=(task, worker, label), fmt="parquet")
        return cls.from_frame(df, task, worker, label, classes, **kwargs)

    @classmethod
    def from_wide(
        cls,
        wide: pd.DataFrame | np.ndarray,
        missing: Any = None,
        classes: Iterable[Hashable] | None = None,
        **kwargs: Any,
    ) -> "CrowdLabels":
        """Build from a tasks x workers table; NaN (or ``missing``) marks no answer."""
        if not isinstance(wide, pd.DataFrame):
            wide = pd.DataFrame(np.asarray(wide, dtype=object))
        wide = wide.copy()
        wide.index.name = "task"
        wide.columns.name = "worker"
        if missing is not None:
            wide = wide.mask(wide == missing)
        long = wide.stack(future_stack=True).dropna().rename("label").reset_index()
        return cls.from_frame(long, classes=classes, all_tasks=wide.index, **kwargs)

    # ------------------------------------------------------------- exporters
    def to_frame(self) -> pd.DataFrame:
        """Long DataFrame (task, worker, label) with the user's ids, in task order."""
        return pd.DataFrame(
            {
                "task": self.tasks.take(self.task),
                "worker": self.workers.take(self.worker),
                "label": self.classes.take(self.label),
            }
        )

    def to_wide(self, fill_value: Any = np.nan) -> pd.DataFrame:
        """Tasks x workers DataFrame (last answer wins for repeats).  Allocates N x M."""
        out = np.full((self.n_tasks, self.n_workers), -1, dtype=np.int64)
        out[self.task, self.worker] = self.label
        frame = pd.DataFrame(out, index=self.tasks, columns=self.workers)
        lookup = pd.Series(list(self.classes), dtype=object)
        return frame.apply(lambda col: col.map(lambda c: lookup[c] if c >= 0 else fill_value))

    # -------------------------------------------------------------- subsets
    def subset(
        self,
        tasks: Iterable[Hashable] | None = None,
        workers: Iterable[Hashable] | None = None,
        *,
        keep_classes: bool = True,
    ) -> "CrowdLabels":
        """Answers restricted to the given tasks and/or workers (ids, not codes).

        Classes are kept (so ``probas_`` columns stay comparable) unless ``keep_classes`` is
        False.  Tasks and workers left without answers are dropped.
        """
        mask = np.ones(self.n_labels, dtype=bool)
        if tasks is not None:
            sel = self.tasks.get_indexer(pd.Index(list(tasks)))
            if np.any(sel < 0):
                raise KeyError("subset: unknown task id(s)")
            keep = np.zeros(self.n_tasks, dtype=bool)
            keep[sel] = True
            mask &= keep[self.task]
        if workers is not None:
            sel = self.workers.get_indexer(pd.Index(list(workers)))
            if np.any(sel < 0):
                raise KeyError("subset: unknown worker id(s)")
            keep = np.zeros(self.n_workers, dtype=bool)
            keep[sel] = True
            mask &= keep[self.worker]
        return self._select(mask, keep_classes=keep_classes)

    def _select_keep_ids(self, mask: np.ndarray) -> "CrowdLabels":
        """The answers of ``mask`` with *all* task, worker and class ids (and codes) kept.

        Tasks or workers left without answers stay in the index; code arrays of the result
        are comparable with this object's (used by hold-out splits).
        """
        return CrowdLabels(
            self.task[mask],
            self.worker[mask],
            self.label[mask],
            tasks=self.tasks,
            workers=self.workers,
            classes=self.classes,
            truth=self.truth,
            features=self.features,
        )

    def _select(self, mask: np.ndarray, keep_classes: bool = True) -> "CrowdLabels":
        t_used = np.unique(self.task[mask])
        w_used = np.unique(self.worker[mask])
        t_map = np.full(self.n_tasks, -1, np.int64)
        t_map[t_used] = np.arange(len(t_used))
        w_map = np.full(self.n_workers, -1, np.int64)
        w_map[w_used] = np.arange(len(w_used))
        label = self.label[mask]
        classes = self.classes
        truth = None if self.truth is None else self.truth[t_used]
        if not keep_classes:
            c_used = np.unique(label)
            c_map = np.full(self.n_classes, -1, np.int64)
            c_map[c_used] = np.arange(len(c_used))
            label = c_map[label]
            classes = classes.take(c_used)
            if truth is not None:
                truth = np.where(truth >= 0, c_map[np.maximum(truth, 0)], -1)
        return CrowdLabels(
            t_map[self.task[mask]],
            w_map[self.worker[mask]],
            label,
            tasks=self.tasks.take(t_used),
            workers=self.workers.take(w_used),
            classes=classes,
            truth=truth,
            features=None if self.features is None else self.features[t_used],
        )

    def with_truth(self, truth: Mapping[Hashable, Hashable] | pd.Series | None) -> "CrowdLabels":
        """A copy sharing the answers, with gold labels attached (task id -> class).

        ``truth`` is a Series or mapping keyed by task id; an array or list is refused
        (:func:`keyed_gold`)."""
        codes = None if truth is None else self.encode_gold(keyed_gold(truth, "truth"))
        return CrowdLabels(
            self.task, self.worker, self.label, self.tasks, self.workers, self.classes,
            truth=codes, features=self.features,
        )

    def with_features(self, features: np.ndarray | pd.DataFrame | None) -> "CrowdLabels":
        """A copy sharing the answers, with item features attached."""
        if isinstance(features, pd.DataFrame):
            features = features.set_axis(strip_text(features.index)).loc[self.tasks].to_numpy()
        return CrowdLabels(
            self.task, self.worker, self.label, self.tasks, self.workers, self.classes,
            truth=self.truth, features=features,
        )

    def encode_gold(self, gold: Mapping[Hashable, Hashable] | pd.Series) -> np.ndarray:
        """Gold labels (task id -> class) as int32 codes per task, -1 where unknown.

        ``gold`` is a Series or mapping keyed by task id; an array or list is refused
        (:func:`keyed_gold`): it names no task."""
        gold_s = keyed_gold(gold)
        gold_s = _normalise_label_values(strip_text(gold_s, index=True).dropna())
        codes = np.full(self.n_tasks, -1, dtype=np.int32)
        gold_s = _gold_as_classes(gold_s, self.classes)
        pos = positions_by_value(self.tasks, gold_s.index, "the answers' tasks")
        cls_codes = self.classes.get_indexer(gold_s)
        if np.any(cls_codes < 0):
            bad = gold_s.to_numpy()[cls_codes < 0][0]
            raise ValueError(
                f"gold label {bad!r} is not one of the classes {list(self.classes)[:10]}"
            )
        _refuse_contradicting_gold(gold_s.index, cls_codes, self.classes)
        ok = pos >= 0
        codes[pos[ok]] = cls_codes[ok]
        return codes


def as_crowd_labels(data: Any) -> CrowdLabels:
    """Accept a CrowdLabels, a long DataFrame with task/worker/label columns, or records."""
    if isinstance(data, CrowdLabels):
        return data
    if isinstance(data, pd.DataFrame):
        return CrowdLabels.from_frame(data)
    if isinstance(data, (list, tuple)):
        if any(isinstance(item, CrowdLabels) for item in data):
            # simulators that also plant parameters return (answers, planted)
            raise TypeError(
                f"expected CrowdLabels, got a {type(data).__name__} holding one: the simulators that "
                f"plant worker parameters return (answers, planted); pass the answers alone"
            )
        return CrowdLabels.from_records(data)
    raise TypeError(
        f"expected CrowdLabels or a DataFrame with task, worker, label columns; "
        f"got {type(data).__name__}"
    )
