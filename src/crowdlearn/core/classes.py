"""Classes: one number, one class, and the default class order.

How raw label values become classes, for the class labels of
:class:`~crowdlearn.core.data.CrowdLabels` and the tags of a multi-label table alike: ``1``,
``1.0`` and ``"1.0"`` are one class (:func:`normalise_label_values`, and text spellings of
one number merged), gold values are spelled as the classes they name
(:func:`gold_as_classes`), and the classes are ordered alike on every path, numbers by value
then text (:func:`class_codes`).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd

from .ids import factorize_ids, label_number

__all__ = ["class_codes", "gold_as_classes", "normalise_label_values"]


def normalise_label_values(values: pd.Series) -> pd.Series:
    """Make 1.0 and 1 the same class: float columns with integral values become int64."""
    if pd.api.types.is_float_dtype(values.dtype):
        finite = values.dropna().to_numpy()
        # an inf label is a class of its own; checked first so np.mod never sees it
        if len(finite) and np.isfinite(finite).all() and np.all(np.mod(finite, 1) == 0):
            out = values.astype("Int64")
            return out.astype(object).where(out.notna(), np.nan)
    return values


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


def gold_as_classes(gold: pd.Series, classes: Iterable[Hashable]) -> pd.Series:
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
        :meth:`~crowdlearn.core.data.CrowdLabels.from_frame` does first).

    Returns
    -------
    codes : ndarray of int
        The class code of each value.
    classes : Index
        The classes, code ``c`` at position ``c``.
    """
    if not normalised:
        values = normalise_label_values(pd.Series(values))
    codes, index = factorize_ids(values, "class")
    return _in_class_order(*_merge_number_spellings(codes, index))
