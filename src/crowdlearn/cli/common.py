"""What the commands share: the ``UsageError`` they raise on bad input, ``--param``
parsing, building a registered method by name, ids read from text spelled as the answers',
the classes of ordinal answers that are not numbers, and writing the output table."""

from __future__ import annotations

import sys


class UsageError(ValueError):
    """Bad input detected by the CLI itself."""


def _parse_value(text: str) -> object:
    """One ``--param`` value: int, float, true/false, none, else the text itself."""
    text = text.strip()
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_params(pairs: list[str] | None) -> dict:
    """``key=value`` strings to a dict of parsed values.

    A value is a number (``5``, ``1e-3``), a bool (``true``/``false``), ``none``, or text;
    a value with a comma is a list of such items (``candidates=ds,glad``), for the parameters
    that take a list.  The estimator checks the values when it is fitted.
    """
    from ..core.params import WHOLE_NUMBERS

    out = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise UsageError(f"--param expects key=value, got {pair!r}")
        key, value = pair.split("=", 1)
        if "," in value:
            parsed: object = [_parse_value(v) for v in value.split(",") if v.strip()]
        else:
            parsed = _parse_value(value)
        if key.strip() in WHOLE_NUMBERS and isinstance(parsed, float) and parsed.is_integer():
            parsed = int(parsed)  # max_iter=1e3 is the count 1000
        out[key.strip()] = parsed
    return out


def make_estimator(name: str, kind: str, seed: int | None, params: dict):
    """The registered method ``name`` for ``kind`` answers, with ``params`` and the seed set."""
    from ..registry import get_method, method_kinds

    # an unregistered name: "unknown method", listing every kind's; a known one of another kind
    # than the data's: "unknown <kind> method", listing those that fit the data
    est = get_method(name, kind if name in method_kinds() else None)()
    valid = est.get_params()
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise UsageError(
            f"method {name!r} has no parameter(s) {unknown}; it takes {sorted(valid)}"
        )
    est.set_params(**params)
    if seed is not None and "random_state" in valid:
        est.set_params(random_state=seed)
    return est


def ids_as_answers(values, ids, what: str = "the answers' ids") -> list:
    """``values`` read from a text file (ids as text) spelled as the answers' ``ids``: those
    read from Parquet or JSON Lines may be numbers, which no text id would match.  Matched by
    value (:func:`crowdlearn.core.ids.ids_like`, as the Python API matches), so ``"17"``,
    ``"17.0"`` and ``17`` name one task; values naming no id are kept as read."""
    import pandas as pd

    from ..core.ids import ids_like

    return list(ids_like(values, pd.unique(pd.Series(ids)), what))


def write_output(table, out) -> None:
    """``table`` written to the file ``out`` (its format by its suffix), else as CSV on stdout."""
    from ..core.io import write_table

    if out:
        write_table(table, out)
    else:
        table.to_csv(sys.stdout, index=False)


def text_classes(data) -> list:
    """The classes of ordinal answers that are not numbers (and so have no order of their own)."""
    from ..ordinal.base import numeric_classes

    return [c for c in data.classes if not numeric_classes([c])]
