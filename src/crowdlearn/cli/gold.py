"""Gold files: reading them, spelling their ids as the answers', and the notes on stderr about
gold that cannot be scored (units without answers, classes no worker answered)."""

from __future__ import annotations

import sys

from .common import UsageError, ids_as_answers


def read_gold(path, unit_col: str, value_cols=None):
    """A gold file ``unit,truth`` as a Series unit -> truth value; the value column is the
    first of ``value_cols`` (default :data:`crowdlearn.core.io.GOLD_COLUMNS`) it has."""
    from ..core.io import GOLD_COLUMNS, read_table

    value_cols = GOLD_COLUMNS if value_cols is None else value_cols
    gdf = read_table(path)
    tcol = unit_col if unit_col in gdf.columns else gdf.columns[0]
    vcol = next((c for c in value_cols if c in gdf.columns and c != tcol), None)
    if vcol is None:
        raise UsageError(f"{path}: expected columns {unit_col},truth; found {list(gdf.columns)}")
    return gdf.set_index(tcol)[vcol]


def read_label_gold(path, cols):
    """The gold of class labels (``task,truth``; the value column may also be named ``gold``,
    ``label`` or as the answers' label column), its ids and classes stripped of surrounding
    whitespace as the answers' are (:func:`crowdlearn.core.ids.strip_text`), so that the
    note on gold tasks without answers compares the same ids."""
    from ..core.ids import strip_text

    from ..core.io import GOLD_COLUMNS

    return strip_text(read_gold(path, cols[0], (*GOLD_COLUMNS, cols[2])), index=True)


def gold_ids_of(truth, ids):
    """The gold Series with its (text) ids as the answers' ``ids`` (:func:`ids_as_answers`)."""
    import pandas as pd

    if not isinstance(truth, pd.Series) or isinstance(truth.index, pd.MultiIndex):
        return truth
    return truth.set_axis(pd.Index(ids_as_answers(truth.index, ids), name=truth.index.name))


def note_unmatched_gold(gold_file, truth, units, unit: str = "task") -> None:
    """One line on stderr when gold names units that have no answers (they cannot be scored).

    Parameters
    ----------
    gold_file : path-like
        The file the gold was read from, named in the note.
    truth : pandas.Series or None
        Gold values by unit id; None, or gold keyed by (group, item), is not checked.
    units : pandas.Index or None
        The ids of the answered units.
    unit : str
        What a unit is called in the note (``task`` or ``item``).
    """
    import pandas as pd

    from ..core.ids import positions_by_value

    if not isinstance(truth, pd.Series) or units is None or isinstance(truth.index, pd.MultiIndex):
        return
    # by value, as the tables match gold to their units ("007" in a text gold file is the
    # task 7 of answers read from Parquet)
    alone = truth.index[positions_by_value(pd.Index(units), truth.index, f"the answered {unit}s") < 0]
    if len(alone):
        print(f"crowdlearn: note: {gold_file}: {len(alone)} of {len(truth)} gold {unit}(s) have no "
              f"answers and are not scored (e.g. {alone[0]!r})", file=sys.stderr)


def note_unanswered_gold_classes(gold_file, data) -> None:
    """One line on stderr when the gold of answered tasks names classes no worker answered.

    Labels are compared as written, so gold spelled otherwise than the answers (``true`` for
    ``True``, ``Yes`` for ``yes``) becomes classes of its own: every such task is scored
    wrong, and the accuracy alone (0 when no spelling matches) does not say why.  A class only
    the gold has is legal (a rare class no worker chose), hence a note, not an error.

    Parameters
    ----------
    gold_file : path-like
        The file the gold was read from, named in the note.
    data : CrowdLabels
        The answers with the gold attached; other tables are not checked.
    """
    import numpy as np

    from ..core.data import CrowdLabels
    from ..core.ids import show_value

    if not isinstance(data, CrowdLabels) or data.truth is None or data.n_labels == 0:
        return
    known = data.truth[(data.truth >= 0) & (data.labels_per_task() > 0)]
    unanswered = np.setdiff1d(np.unique(known), np.unique(data.label))
    if len(unanswered):
        shown = ", ".join(show_value(c) for c in data.classes[unanswered[:5]])
        n_tasks = int(np.isin(known, unanswered).sum())
        print(f"crowdlearn: note: {gold_file}: {len(unanswered)} gold class(es) appear in no "
              f"answer ({shown}{', ...' if len(unanswered) > 5 else ''}; labels are compared as "
              f"written): the {n_tasks} answered task(s) with that gold have no answer to "
              "agree with", file=sys.stderr)


def table_with_gold(args, build, truth, task_ids):
    """``build(truth)`` -> the answer table, with the gold's text ids spelled as the answers'
    ``task_ids`` (:func:`ids_as_answers`), errors naming the answers' and gold files, and the note
    on gold tasks without answers (:func:`note_unmatched_gold`)."""
    from ..core.tables import naming_file

    truth = gold_ids_of(truth, task_ids)
    with naming_file(args.input, args.gold):
        data = build(truth)
    note_unmatched_gold(args.gold, truth, data.tasks)
    note_unanswered_gold_classes(args.gold, data)
    return data
