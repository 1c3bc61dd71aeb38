"""Gold (or truth) keyed by id, and the check that refuses an id given two gold values.

Every public entry that takes gold or truth keyed by task or item reads it through
:func:`keyed_gold`, and every answer kind's gold goes through
:func:`refuse_contradicting_gold`, so the errors read the same on every kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sized
from typing import Any

import numpy as np
import pandas as pd

from .ids import show_value

__all__ = ["keyed_gold", "refuse_contradicting_gold"]


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
