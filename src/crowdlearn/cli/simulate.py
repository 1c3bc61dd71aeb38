"""``crowdlearn simulate``: a synthetic crowd of any kind with planted truth, written as a file
or as a dataset folder that ``benchmark`` reads."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .common import UsageError


def _simulated(args):
    """The answer table ``crowdlearn simulate`` draws for ``--kind``, and its gold as a Series
    (unit -> truth); the common flags mean the same for every kind (``--classes``: classes,
    tags or clusters; ``--spammers``: workers who answer at random, or reverse comparisons)."""
    from .. import simulate

    kind = args.kind or "classification"
    n, m, r, k, spam, seed = args.tasks, args.workers, args.labels_per_task, args.classes, args.spammers, args.seed
    if kind == "classification":
        data = simulate.dawid_skene(n_tasks=n, n_workers=m, n_classes=k, labels_per_task=r,
                                    spammers=spam, adversaries=args.adversaries, seed=seed)
        return data, data.truth_series()
    if kind == "continuous":
        data, _ = simulate.continuous_crowd(n, m, r, spammers=spam, seed=seed)
    elif kind == "ordinal":
        data, _ = simulate.ordinal_crowd(n, m, k, r, spammers=spam, seed=seed)
        return data, data.truth_series()
    elif kind == "multilabel":
        data, _ = simulate.multilabel_crowd(n, m, k, r, spammers=spam, seed=seed)
    elif kind == "pairwise":
        data, _ = simulate.pairwise_crowd(n, m, n * r, frac_unreliable=spam, seed=seed)
    elif kind == "similarity":
        data, _ = simulate.similarity_crowd(n, k, m, answers_per_item=r, random_fraction=spam, seed=seed)
    else:
        raise UsageError(f"--kind must be one of classification, continuous, ordinal, multilabel, "
                         f"pairwise, similarity; got {kind!r}")
    return data, data.truth_series()


#: the answers file of a dataset folder, by kind (:func:`crowdlearn.core.io.folder_kind` tells
#: comparisons and similarity answers by it); labels.csv for the others
_FOLDER_ANSWERS = {"pairwise": "pairs.csv", "similarity": "similarity.csv"}


def _gold_table(kind: str, truth):
    """The planted truth as the table ``simulate`` writes: ``task,truth``; ``item,truth`` for
    similarity clusters; ``item,score`` for comparisons, whose planted truth is a score
    (higher = better), not the group or rank (1 = best) a dataset folder's ``truth`` column
    holds, so that ``benchmark`` and ``aggregate --gold`` read it the right way round."""
    import pandas as pd

    unit = "item" if kind in ("pairwise", "similarity") else "task"
    values = truth.map(lambda v: "|".join(map(str, v)) if isinstance(v, (tuple, frozenset, set, list)) else v)
    return pd.DataFrame({unit: [_unit_id(i) for i in truth.index],
                         "score" if kind == "pairwise" else "truth": values.to_numpy()})


def cmd_simulate(args) -> int:
    """A synthetic crowd: the answers to ``--out`` (a file, or a folder in the dataset format
    that ``benchmark`` reads: answers, ``truth.csv`` and a ``SOURCE.md`` naming the kind) and
    the planted truth to ``--truth-out``."""
    from ..core.io import write_table
    from ..core.tables import check_writable

    kind = args.kind or "classification"
    out = Path(args.out)
    folder = out.is_dir() or args.out.endswith(("/", os.sep))
    answers = out / _FOLDER_ANSWERS.get(kind, "labels.csv") if folder else out
    if folder and not out.is_dir() and not out.parent.is_dir():
        raise UsageError(f"--out {args.out}: the folder {out.parent} does not exist")
    for path in ([] if folder else [answers]) + ([args.truth_out] if args.truth_out else []):
        check_writable(path)  # now, not after the simulation
    data, truth = _simulated(args)
    gold = _gold_table(kind, truth) if truth is not None else None
    if folder:
        out.mkdir(exist_ok=True)
    write_table(data.to_frame(), answers)
    wrote = [answers.name if folder else str(answers)]
    if folder:
        if gold is not None:
            write_table(gold, out / "truth.csv")
            wrote.append("truth.csv")
        (out / "SOURCE.md").write_text(_simulated_source(args, kind, data, answers.name, gold), encoding="utf-8")
        wrote.append("SOURCE.md")
    if args.truth_out and gold is not None:
        write_table(gold, args.truth_out)
        wrote.append(str(args.truth_out))
    where = f" in {out}" if folder else ""
    print(f"wrote {len(data)} answers: {', '.join(wrote)}{where}", file=sys.stderr)
    return 0


def _simulated_source(args, kind: str, data, answers: str, gold) -> str:
    """The SOURCE.md of a simulated dataset folder: how it was made, and the ``- kind:`` and
    count lines that :func:`crowdlearn.datasets.describe` and ``folder_kind`` read."""
    from .. import __version__

    units = getattr(data, "n_tasks", None)
    unit_line = (f"- tasks with at least one answer: {units}" if units is not None
                 else f"- items: {data.n_items}")
    what = "comparisons" if kind == "pairwise" else "crowd answers"
    command = (f"crowdlearn simulate --kind {kind} --tasks {args.tasks} --workers {args.workers} "
               f"--classes {args.classes} --labels-per-task {args.labels_per_task} --spammers {args.spammers} "
               f"--adversaries {args.adversaries} --seed {args.seed}")
    lines = [f"# {Path(args.out).name or 'simulated'}: simulated {kind} crowd with planted truth", "",
             f"Written by crowdlearn {__version__}: `{command}`.", "", "## Counts", "",
             f"- kind: {kind}", f"- {what} (rows of {answers}): {len(data)}", unit_line,
             f"- workers: {data.n_workers}"]
    if gold is not None:
        lines.append(f"- rows of truth.csv: {len(gold)}"
                     + (" (planted scores, higher = better)" if kind == "pairwise" else ""))
    return "\n".join(lines) + "\n"


def _unit_id(index_value):
    """Grouped pairwise items are (group, item) pairs; files name them ``group::item``."""
    return "::".join(map(str, index_value)) if isinstance(index_value, tuple) else index_value
