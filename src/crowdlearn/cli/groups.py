"""``aggregate --group-col``: the groups of the tasks and the per-group report (accuracy,
positive rate, TPR/FPR/FNR and their disparities)."""

from __future__ import annotations

import sys

from .common import UsageError, ids_as_answers, write_output


def read_groups(args, data, task_col: str):
    """The task -> group Series of ``--group-col`` and the ``--positive`` class, checked
    against the answers before the fit: (where the groups were read, groups, positive)."""
    import pandas as pd

    from ..core.ids import strip_text
    from ..core.tables import check_writable, read_table
    from ..fairness import task_groups

    if args.group_report:
        check_writable(args.group_report)
    src = args.tasks or args.input
    table = read_table(src, columns=[task_col, args.group_col])
    # a frame of its own: the group column may be the task column itself (a group per task);
    # group cells are stripped as ids are (" A " is the group "A"), and an empty cell says
    # nothing: a task's group may be written on some of its rows only
    table = pd.DataFrame({"task": strip_text(table[task_col]).to_numpy(),  # ids as the answers'
                          "group": strip_text(table[args.group_col]).to_numpy()})
    table = table[table["group"].notna()].drop_duplicates()
    positive = data.classes[-1]
    if args.positive is not None:  # the text of a class: "1" is the class 1 of a Parquet file
        match = [c for c in data.classes if str(c) == args.positive]
        if not match:
            raise UsageError(f"--positive {args.positive!r} is not a class of the answers "
                             f"({list(map(str, data.classes))[:10]})")
        positive = match[0]
    groups = pd.Series(table["group"].to_numpy(), index=ids_as_answers(table["task"], data.tasks))
    try:
        groups = task_groups(groups, data.tasks)
    except ValueError as exc:
        raise UsageError(f"{src}: column {args.group_col!r}: {exc}") from None
    return src, groups, positive


def print_group_report(args, est, data, src, groups, positive) -> None:
    """Per-group accuracy, positive rate, TPR/FPR/FNR (stderr; CSV with --group-report)."""
    import pandas as pd

    from ..fairness import disparities, group_report

    truth = None
    if data.truth is not None and bool((data.truth >= 0).any()):
        known = data.truth >= 0
        truth = pd.Series(data.classes.take(data.truth[known]), index=data.tasks[known])
    report = group_report(est.labels_, truth, groups, positive=positive)
    # a gap over fewer than two groups with the rate defined (e.g. no gold) is not a number
    gaps = {k: "n/a" if v != v else f"{v:.4f}" for k, v in disparities(report).items()}
    print(f"groups ({args.group_col}; positive class '{positive}'):\n{report.round(4).to_string()}", file=sys.stderr)
    print("disparities: " + ", ".join(f"{k} {v}" for k, v in gaps.items()), file=sys.stderr)
    if args.group_report:
        write_output(report.reset_index(), args.group_report)
