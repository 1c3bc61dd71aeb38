"""``crowdlearn next``: which tasks (and workers) to ask next in a labelling loop."""

from __future__ import annotations

import sys

from .common import UsageError, ids_as_answers, write_output


def _read_id_list(path, col: str, ids) -> list:
    """The ids in column ``col`` of a list file (``next --tasks`` / ``--workers``), spelled as
    the answers' ``ids`` (:func:`ids_as_answers`).  A file without the column, or with an empty
    cell in it, is an error naming the file (and the line)."""
    from ..core.ids import row_list, strip_text
    from ..core.tables import first_record_line, read_table

    values = strip_text(read_table(path, columns=[col])[col])  # as the answers' ids are
    empty = values.isna().to_numpy()
    if empty.any():  # not a task nor a worker: it was suggested as one
        raise UsageError(f"{path}: missing value in column {col!r} at {row_list(empty, first_record_line(path))}")
    return ids_as_answers(values, ids)


def cmd_next(args) -> int:
    """``crowdlearn next``: the tasks (and workers) to ask next, best first."""
    from ..active import ActiveLoop
    from ..core.data import CrowdLabels
    from ..core.tables import first_record_line, naming_file, read_table

    if args.budget < 0:  # 0 is ActiveLoop.suggest(0): no suggestion, a header-only table
        raise UsageError(f"--budget must be >= 0, got {args.budget}")
    if args.worker_strategy is not None and not args.workers:  # it would choose among nobody
        raise UsageError("--worker-strategy chooses among the workers of --workers: give that file too")
    cols = [args.task_col, args.worker_col, args.label_col]
    with naming_file(args.input):
        try:
            table = read_table(args.input, columns=cols)
        except ValueError as exc:
            if str(exc).endswith(": no rows"):  # the first round of a labelling loop
                raise UsageError(f"{exc}: next ranks tasks by the answers so far; before any, no "
                                 "task is more uncertain than another, so send a first round "
                                 "of any tasks (e.g. a random sample of the pool)") from None
            raise
        answers = CrowdLabels.from_frame(table, *cols, first_line=first_record_line(args.input))
    loop = ActiveLoop(method=args.method, strategy=args.strategy,
                      worker_strategy=(args.worker_strategy or "eig") if args.workers else None,
                      random_state=args.seed if args.seed is not None else 0)
    loop.observe(answers)
    # the lists name tasks and workers by the answers' columns, as aggregate's --tasks does
    tasks = _read_id_list(args.tasks, args.task_col, answers.tasks) if args.tasks else None
    workers = _read_id_list(args.workers, args.worker_col, answers.workers) if args.workers else None
    pick = loop.suggest(args.budget, tasks=tasks, workers=workers)
    write_output(pick, args.out)
    why = ""
    if len(pick) < args.budget:  # say why fewer: a short pool, or listed workers who answered all
        pool = len(set(tasks)) if tasks is not None else answers.n_tasks
        why = (f"; the pool has {pool} task(s)" if workers is None else
               f"; the pool has {pool} task(s), {len(pick)} of them not yet answered by a listed worker")
    print(f"next: {len(pick)} of {args.budget} suggestions ({args.strategy}; {loop.answers_.n_labels} answers "
          f"so far, method {args.method}{why})", file=sys.stderr)
    return 0
