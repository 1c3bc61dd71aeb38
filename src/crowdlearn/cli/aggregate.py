"""``crowdlearn aggregate``: the answer kind, the checks of its flags, the in-memory fits of
every kind (class labels, and the kinds with answer tables of their own) and the scaled
engines (``--engine dask`` / ``stream``), with their summaries on stderr."""

from __future__ import annotations

import csv
import os
import sys
import time
from pathlib import Path

from .common import UsageError, make_estimator, parse_params, text_classes, write_output
from .gold import (gold_ids_of, note_unanswered_gold_classes, note_unmatched_gold, read_gold,
                   read_label_gold, table_with_gold)
from .groups import print_group_report, read_groups


def _classes(args) -> list[str] | None:
    """``--classes a,b,c`` as a list; spaces around a name and empty items are not classes.

    The list is one CSV row, so a class with a comma is given quoted, as the answers file
    quotes it (``--classes '"yes, sure",no'``); an unclosed quote runs to the end.
    """
    if not args.classes:
        return None
    # not strict: blanks after a closing quote (' "a" , b') are dropped like those around names
    row = next(csv.reader([args.classes], skipinitialspace=True, strict=False), [])
    classes = [c.strip() for c in row if c.strip()]
    if not classes:
        raise UsageError(f"--classes names no class: {args.classes!r}")
    repeated = sorted({c for c in classes if classes.count(c) > 1})
    if repeated:
        raise UsageError(f"--classes names {repeated[0]!r} more than once")
    return classes


#: columns that reveal an answer kind on their own (the other kinds share task,worker,label)
_KIND_COLUMNS = (("pairwise", ("left", "right")), ("similarity", ("item_a", "item_b")))


def _column_map(args) -> dict:
    """Role -> column name from ``--col ROLE=NAME`` and the ``--task-col`` style options."""
    out = {"task": args.task_col, "worker": args.worker_col, "label": args.label_col}
    for pair in args.col or []:
        if "=" not in pair:
            raise UsageError(f"--col expects ROLE=COLUMN, got {pair!r}")
        role, col = (x.strip() for x in pair.split("=", 1))
        out[role] = col
    return out


def _resolve_kind(args, columns) -> str:
    """The answer kind to aggregate: the method's kind, else ``--kind``, else the columns."""
    from ..registry import DEFAULT_METHODS, method_kinds

    kinds = method_kinds()
    if args.method is not None and args.method in kinds:
        kind = kinds[args.method]
        if kind == "learning":
            raise UsageError(
                f"method {args.method!r} is a learning method (it trains a classifier from item "
                "features); 'aggregate' runs truth-inference methods, see 'crowdlearn methods'"
            )
        if args.kind is not None and args.kind != kind:
            raise UsageError(f"method {args.method!r} is a {kind} method, not {args.kind}")
        return kind
    if args.kind is not None:
        if args.kind not in DEFAULT_METHODS:
            raise UsageError(f"--kind must be one of {', '.join(DEFAULT_METHODS)}; got {args.kind!r}")
        return args.kind
    colmap = _column_map(args)
    for kind, roles in _KIND_COLUMNS:
        if all(colmap.get(r, r) in columns for r in roles):
            return kind
    return "classification"


def _read_answer_gold(args, kind: str, extra: dict):
    """Gold of the answer kinds: ``task,truth`` (continuous, multi-label); pairwise gold by
    item, within the ``group`` column when the answers are grouped, read as ``benchmark``
    reads a folder's (:func:`crowdlearn.pairwise.data.truth_columns`: a ``score`` column is
    higher = better, ``task,truth`` ranks or groups, 1 = best) and otherwise as scores unless
    ``--gold-lower-is-better``; similarity clusters.  Ids are stripped of surrounding
    whitespace as the answers' are (:func:`crowdlearn.core.ids.strip_text`), so that the
    note on gold without answers compares the same ids."""
    from ..core.ids import strip_text

    if kind == "pairwise":
        from ..core.io import read_table
        from ..pairwise.data import GROUP_SEP, read_truth, split_unit_text, truth_columns

        columns = list(read_table(args.gold).columns)
        item, value, lower = truth_columns(columns, args.gold)
        if lower is None:
            lower = args.gold_lower_is_better
        elif args.gold_lower_is_better and not lower:
            raise UsageError(f"--gold-lower-is-better: {args.gold} names its column {value!r} "
                             "(higher = better); give ranks or groups as task,truth")
        group = extra.get("group")
        if group is not None and group in columns:
            return read_truth(args.gold, item=item, value=value, group=group, lower_is_better=lower)
        truth = read_truth(args.gold, item=item, value=value, lower_is_better=lower)
        if group is not None:
            # grouped units are (group, item) pairs: gold without the group column names them
            # only as the text group::item (how simulate writes grouped planted truth)
            bad = next((k for k in truth.index if split_unit_text(str(k)) is None), None)
            if bad is not None:
                raise UsageError(
                    f"{args.gold}: the comparisons are grouped by column {group!r}; the gold "
                    f"{item} {bad!r} names no (group, item) unit: give the gold a {group!r} "
                    f"column, or name its items 'group{GROUP_SEP}item'")
        return truth
    gold = read_gold(args.gold, "task" if kind in ("continuous", "multilabel") else "item")
    return gold.set_axis(strip_text(gold.index))  # values: each table reads its own


def _stage(args, text: str) -> None:
    """One line on stderr saying what a long command is doing, when progress is shown."""
    from ..core.progress import bar_wanted

    if bar_wanted(getattr(args, "progress", None)):
        print(f"crowdlearn: {text}", file=sys.stderr, flush=True)


def _reading(args, path) -> None:
    try:
        size = f" ({os.path.getsize(path) / 1e6:,.1f} MB)"
    except OSError:
        size = ""
    _stage(args, f"reading {path}{size}")


def cmd_aggregate(args) -> int:
    """``crowdlearn aggregate``: the truth of every task, by the kind of the answers."""
    from ..core import progress
    from ..core.tables import check_writable

    # a bad --out fails now, not after reading and fitting (the scaled engines may write a folder)
    if args.out and (args.engine == "memory" or Path(args.out).suffix):
        check_writable(args.out)
    # every fit below (the method's, and those it makes) draws its bar by this setting
    with progress.settings(verbose=args.progress):
        return _aggregate(args)


def _aggregate(args) -> int:
    from ..core.io import read_table
    from ..core.tables import first_record_line

    colmap = _column_map(args)
    if args.engine != "memory":
        return _aggregate_scaled(args, colmap)
    if args.format:
        kind = _resolve_kind(args, set())
        _check_kind_flags(args, kind)
        _check_group_flags(args, kind)
        _check_calibrate(args, kind)
        if kind == "continuous":
            return _aggregate_answers(args, kind, colmap, None)
        if kind not in ("classification", "ordinal"):
            raise UsageError(f"--format reads class labels or numbers; {kind} answers from "
                             "platform exports are not supported yet")
        return _aggregate_labels(args, kind, colmap, None)
    # the kind is read from the columns only when neither --kind nor --method says it; the
    # table read for that is the one the fit uses (files are read once)
    # handed over in a list, so that the callee holds the only reference and can free the
    # string frame (larger than the fit itself at 10^7 rows) once its table is built
    read = []
    if args.kind is None and args.method is None:
        _reading(args, args.input)
        read = [read_table(args.input)]
    kind = _resolve_kind(args, set(read[0].columns) if read else set())
    _check_kind_flags(args, kind)
    _check_group_flags(args, kind)
    _check_calibrate(args, kind)
    # errors name file lines (header = line 1); Parquet has no lines: row positions
    first_line = first_record_line(args.input)
    if kind in ("classification", "ordinal"):
        return _aggregate_labels(args, kind, colmap, first_line, read)
    return _aggregate_answers(args, kind, colmap, first_line, read)


def _check_calibrate(args, kind: str) -> None:
    """--calibrate: class labels in memory, with gold to learn from."""
    if not args.calibrate:
        return
    if kind not in ("classification", "ordinal", "continuous"):
        raise UsageError(f"--calibrate calibrates class-label confidences and continuous standard "
                         f"errors, not {kind} answers")
    if not args.gold:
        raise UsageError("--calibrate learns from gold labels: give --gold")


def _calibrated(args, kind: str, est, data):
    """--calibrate: ``est`` wrapped in its kind's calibration (the confidences of class
    labels, the standard errors of continuous answers) and the gold it learns from."""
    gold = data.truth_series() if data.truth is not None else None
    if gold is None or gold.empty:
        raise UsageError("--calibrate learns from gold: give --gold with tasks of the answers")
    seed = 0 if args.seed is None else args.seed
    if kind == "continuous":
        from ..continuous.calibration import CalibratedContinuous

        return CalibratedContinuous(est, random_state=seed), gold
    from ..aggregation.calibration import CalibratedAggregator

    return CalibratedAggregator(est, random_state=seed), gold


def _check_kind_flags(args, kind: str) -> None:
    """--classes, --delimiter, --gold-lower-is-better, --question and --statuses: only where
    they are read (they were ignored elsewhere).

    --classes is the class set of class labels (their order, for ordinal ones) and the tag set
    of multi-label answers; --delimiter separates the tags of a multi-label answer;
    --gold-lower-is-better reads comparisons' gold; --question and --statuses select within a
    platform's export (--format).
    """
    if args.classes is not None and kind not in ("classification", "ordinal", "multilabel"):
        raise UsageError(f"--classes names the classes of class labels or the tags of multilabel "
                         f"answers; {kind} answers have none")
    if args.delimiter is not None and kind != "multilabel":
        raise UsageError(f"--delimiter separates the tags of multilabel answers; {kind} answers have none")
    if args.gold_lower_is_better and kind != "pairwise":
        raise UsageError(f"--gold-lower-is-better reads the gold of comparisons, not of {kind} answers")
    export_only = [flag for flag, value in (("--question", args.question), ("--statuses", args.statuses))
                   if value]
    if export_only and not args.format:
        raise UsageError(f"{', '.join(export_only)} select(s) within a platform's export: add --format")


def _check_group_flags(args, kind: str) -> None:
    """The group report's flags: with --group-col, on class labels (they were ignored)."""
    orphans = [flag for flag, value in (("--tasks", args.tasks), ("--positive", args.positive),
                                        ("--group-report", args.group_report)) if value]
    if orphans and not args.group_col:
        raise UsageError(f"{', '.join(orphans)} belong(s) to the group report: add --group-col")
    if args.group_col and kind not in ("classification", "ordinal"):
        raise UsageError(f"--group-col reports on class labels, not on {kind} answers")


def _aggregate_scaled(args, colmap: dict) -> int:
    """``--engine dask`` / ``stream``: class labels from files too large for one fit in memory.

    The input is a file, a folder or a glob of Parquet/CSV files; ``--out`` a folder (one
    Parquet file per partition) or a CSV file; without it the table goes to stdout.
    """
    from ..registry import DEFAULT_METHODS
    from ..scale import Columns, fit, supported_methods

    unsupported = [flag for flag, value in (("--gold", args.gold), ("--format", args.format),
                                            ("--question", args.question), ("--statuses", args.statuses),
                                            ("--group-col", args.group_col),
                                            ("--calibrate", args.calibrate)) if value]
    if unsupported:
        raise UsageError(f"--engine {args.engine} does not take {', '.join(unsupported)} (use the in-memory engine)")
    # the engines code every label as a class: numbers, grades or comparisons would be fitted
    # as that many unordered classes, a wrong result with no error
    if args.kind not in (None, "classification"):
        raise UsageError(f"--engine {args.engine} fits class labels, not {args.kind} answers "
                         "(drop --engine to fit them in memory)")
    _check_kind_flags(args, "classification")  # the engines fit class labels only (above)
    name = args.method or DEFAULT_METHODS["classification"]
    if name not in supported_methods():
        raise UsageError(f"--engine {args.engine} runs {', '.join(supported_methods())}; not {name!r}")
    est = make_estimator(name, "classification", args.seed, parse_params(args.param))
    columns = Columns(colmap["task"], colmap["worker"], colmap["label"])
    options = {"columns": columns, "classes": _classes(args)}
    out = args.out
    if out and args.engine == "dask" and Path(out).suffix:
        raise UsageError(f"--engine dask writes a folder of Parquet files; --out {out} looks like a file")
    cluster = client = None
    try:
        if args.engine == "dask":
            try:
                from distributed import Client, LocalCluster
            except ImportError:
                raise UsageError("--engine dask needs dask: pip install 'crowdlearn[dask]'") from None
            import logging

            # the p2p shuffle logs a WARNING for every shuffle it starts and ends
            logging.getLogger("distributed.shuffle").setLevel(logging.ERROR)
            if args.scheduler:
                client = Client(args.scheduler)
            else:
                # a task's error (a file pandas cannot parse) comes back to fit_dask, which
                # names the file, and is printed as one line: the worker's own log of it, a
                # traceback, is not shown too
                cluster = LocalCluster(n_workers=args.workers or 2, threads_per_worker=1,
                                       silence_logs=logging.CRITICAL)
                client = Client(cluster)
            options["client"] = client
        else:
            options["chunk_answers"] = args.chunk_answers
        _stage(args, f"fitting {name} with the {args.engine} engine")
        t0 = time.perf_counter()
        try:
            result = fit(est, args.input, engine=args.engine, out=out,
                         on_stage=lambda text: _stage(args, text), **options)
        except FileNotFoundError as exc:
            raise UsageError(str(exc)) from None
        elapsed = time.perf_counter() - t0
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    if out is None:
        write_output(result, None)
    print(f"{name} ({args.engine} engine): {len(est.workers_)} workers, {len(est.classes_)} classes; "
          f"{est.n_iter_} iterations, converged={est.converged_}, {elapsed:.3f} s"
          + (f"; wrote {len(result)} file(s) to {out}" if out else ""), file=sys.stderr)
    return 0


def _read_answers(args, columns, read: list):
    """The answers file with ``columns`` present, taken from ``read`` when it was read already."""
    from ..core.tables import read_table, require_columns

    if not read:
        _reading(args, args.input)
        return read_table(args.input, columns=columns)
    df = read.pop()
    require_columns(df, columns, args.input)
    return df


def _aggregate_answers(args, kind: str, colmap: dict, first_line, read: list | None = None) -> int:
    """Continuous, multi-label, pairwise and similarity answers: the kind's table in, the
    fitted ``result_frame()`` out."""
    from ..core.tables import naming_file
    from ..registry import answer_type_of

    table_cls = answer_type_of(kind)
    if args.format:  # numbers from a platform's export (crowdlearn.io)
        from ..io import read_export

        data = read_export(args.input, None if args.format == "auto" else args.format, kind=kind,
                           question=args.question,
                           statuses=args.statuses.split(",") if args.statuses else None)
        if args.gold:
            data = data.with_truth(_read_answer_gold(args, kind, {}))
        return _fit_answers(args, kind, data)
    roles = {role: colmap.get(role, role) for role in table_cls.ROLES}
    extra = {role: col for role, col in colmap.items()
             if role not in roles and role not in ("task", "worker", "label")}
    # an optional role given no column (--col group=) is left out: the way to ignore a
    # column that would fill it by default
    optional = getattr(table_cls, "OPTIONAL_ROLES", ())
    extra = {role: col for role, col in extra.items() if col or role not in optional}
    cols = [*roles.values(), *extra.values()]
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise UsageError(f"column {dup[0]!r} is given to two roles; each role needs its own column")
    df = _read_answers(args, cols, read or [])
    if kind == "pairwise" and "group" not in colmap:
        _default_group(df, cols, extra)
    truth = _read_answer_gold(args, kind, extra) if args.gold else None
    options = {}
    if kind == "multilabel":  # the other kinds refused these flags (_check_kind_flags)
        if args.delimiter is not None:
            options["delimiter"] = args.delimiter
        if args.classes is not None:
            options["tags"] = _classes(args)

    def build(gold):
        return table_cls.from_frame(df, **roles, **extra, **options, truth=gold, first_line=first_line)

    if kind in ("continuous", "multilabel"):  # gold by task: match its ids to the answers'
        data = table_with_gold(args, build, truth, df[roles["task"]])
    else:  # pairwise and similarity: gold by item
        with naming_file(args.input, args.gold):
            data = build(truth)
        note_unmatched_gold(args.gold, truth, data.items, "item")
    df = None  # frees the string frame (not del: build() closes over it)
    return _fit_answers(args, kind, data)


def _default_group(df, cols: list, extra: dict) -> None:
    """A ``group`` column groups comparisons here as in ``fit(frame)`` and dataset folders
    (:func:`crowdlearn.pairwise.data.default_group`): ``extra`` gains the role, with a note
    on stderr saying how to rank all items together instead.  Not when another role reads
    that column (``--col worker=group``)."""
    from ..pairwise.data import default_group

    column = default_group(df.columns)
    if column is not None and column not in cols:
        extra["group"] = column
        print(f"crowdlearn: note: items are ranked within the groups of column {column!r} "
              "(--col group= ranks all items together)", file=sys.stderr)


def _fit_answers(args, kind: str, data) -> int:
    """Fit the kind's method on its answer table, write ``result_frame()``, and summarise
    (with the kind's metrics against the gold the table carries, if any)."""
    from ..benchmarking import truth_scores
    from ..registry import DEFAULT_METHODS

    name = args.method or DEFAULT_METHODS[kind]
    est = make_estimator(name, kind, args.seed, parse_params(args.param))
    _stage(args, f"fitting {name}")
    t0 = time.perf_counter()
    if args.calibrate:  # continuous (checked before reading): standard errors from the gold
        est, gold = _calibrated(args, kind, est, data)
        est.fit(data, gold=gold)
    else:
        est.fit(data)
    elapsed = time.perf_counter() - t0
    write_output(est.result_frame(), args.out)
    summary = f"{name} ({kind}): {data!r}; {elapsed:.3f} s"
    scores = {} if args.calibrate else truth_scores(est, data)  # empty without gold
    if args.calibrate:  # the fit saw the gold: its own errors there would say nothing
        cal = est.calibration_
        summary += (f"; standard errors calibrated on {int(cal['n_gold'])} gold tasks "
                    f"(se' = sqrt({est.stderr_scale_:.3g} se^2 + {est.stderr_floor_:.3g})); on them, "
                    f"cross-fitted: MAE {cal['mae']:.4g}, RMSE {cal['rmse']:.4g}, 95% intervals cover "
                    f"{cal['coverage95_before']:.3f} -> {cal['coverage95_after']:.3f}")
    if scores:
        # a metric undefined on this gold (a correlation over one task, or over constant
        # values) is not a number: n/a, as the group report prints undefined gaps
        summary += "; against gold: " + ", ".join(f"{k} = " + ("n/a" if v != v else f"{v:.4f}")
                                                  for k, v in scores.items())
    print(summary, file=sys.stderr)
    return 0


def _aggregate_labels(args, kind: str, colmap: dict, first_line, read: list | None = None) -> int:
    """Class labels (categorical or ordinal): ``task, label, confidence, p_<class>...``."""
    from ..benchmarking import gold_accuracy
    from ..core.data import CrowdLabels
    from ..core.tables import naming_file
    from ..registry import DEFAULT_METHODS
    from ..report import posterior_table

    cols = (colmap["task"], colmap["worker"], colmap["label"])
    roles = ("task", "worker", "label")
    for i in range(3):
        for j in range(i + 1, 3):
            if cols[i] == cols[j]:
                raise UsageError(
                    f"{roles[i]} and {roles[j]} cannot both be column {cols[i]!r} "
                    f"(--{roles[i]}-col, --{roles[j]}-col); each role needs its own column"
                )
    classes = _classes(args)
    truth = None
    if args.gold:
        truth = read_label_gold(args.gold, cols)
    if args.format:  # a platform's export (crowdlearn.io); its own gold counts too
        from ..io import read_export

        data = read_export(args.input, None if args.format == "auto" else args.format,
                           question=args.question, classes=classes,
                           statuses=args.statuses.split(",") if args.statuses else None)
        if truth is not None:
            data = data.with_truth(truth)
    else:
        df = _read_answers(args, cols, read or [])
        _stage(args, f"encoding {len(df):,} answers")
        truth = gold_ids_of(truth, df[cols[0]])
        with naming_file(args.input, args.gold):
            data = CrowdLabels.from_frame(df, *cols, classes=classes, truth=truth, first_line=first_line)
    params = parse_params(args.param)
    if kind == "ordinal" and classes is None and params.get("classes") is None:
        _check_ordinal_labels(args, data, None if args.format else df[cols[2]], first_line)
    df = None  # the string frames cost more memory than the fit itself at 10^7 rows
    groups = read_groups(args, data, cols[0]) if args.group_col else None  # checked before the fit
    has_gold = data.truth is not None and bool((data.truth >= 0).any())
    note_unmatched_gold(args.gold, truth, data.tasks)
    note_unanswered_gold_classes(args.gold, data)
    del truth
    name = args.method or DEFAULT_METHODS[kind]
    est = make_estimator(name, kind, args.seed, params)
    fit_gold = None
    if args.calibrate:
        est, fit_gold = _calibrated(args, kind, est, data)
    _stage(args, f"fitting {name} on {data.n_labels:,} answers")
    t0 = time.perf_counter()
    est.fit(data, gold=fit_gold)
    elapsed = time.perf_counter() - t0
    if args.out:
        _stage(args, f"writing {args.out}")
    write_output(posterior_table(est), args.out)
    summary = (
        f"{name}: {data.n_labels} answers, {data.n_tasks} tasks, {data.n_workers} workers, "
        f"{data.n_classes} classes; {est.n_iter_} iterations, "
        f"converged={est.converged_}, {elapsed:.3f} s"
    )
    if args.calibrate:  # the fit saw the gold: its own accuracy there would say nothing
        cal = est.calibration_
        summary += (f"; calibrated on {int(cal['n_gold'])} gold tasks (temperature {est.temperature_:.3g}, "
                    f"mixture {est.eps_:.3g}); on them, cross-fitted: accuracy {cal['accuracy']:.4f}, "
                    f"log-loss {cal['log_loss_before']:.4f} -> {cal['log_loss_after']:.4f}, "
                    f"ECE {cal['ece_before']:.4f} -> {cal['ece_after']:.4f}")
    elif has_gold:
        summary += f"; accuracy on {int((data.truth >= 0).sum())} gold tasks = {gold_accuracy(est.labels_, data):.4f}"
    print(summary, file=sys.stderr)
    fitted = getattr(est, "base_", est) if args.calibrate else est  # the calibrated method's own notes
    for attr in ("reason_", "fallback_"):  # why `auto` chose, why a moment method fell back
        note = getattr(fitted, attr, None)
        if isinstance(note, str) and note:
            print(f"{name}: {note}", file=sys.stderr)
    if groups is not None:
        print_group_report(args, est, data, *groups)
    return 0


def _check_ordinal_labels(args, data, labels, first_line) -> None:
    """Ordinal labels without a stated order must be numbers: text labels (low, mid, high)
    would otherwise be ranked alphabetically.  The error names the first such label and,
    when the answers' label column is at hand, its first line."""
    import numpy as np

    from ..core.ids import row_list

    text = text_classes(data)
    if not text:
        return
    where = f"{args.input}: "
    first = np.array(labels.isin(text[:1])) if labels is not None else None
    if first is not None and first.any():
        first[first.argmax() + 1:] = False
        where += f"{row_list(first, first_line)}: "
    elif first is not None and args.gold:  # a class of the gold alone: the answers are numbers
        where = f"{args.gold}: gold "
    shown = ",".join(map(str, data.classes[:10])) + (",..." if len(data.classes) > 10 else "")
    raise UsageError(f"{where}ordinal label {text[0]!r} is not a number, so the labels have no "
                     f"order; give it from lowest to highest with --classes (e.g. --classes {shown})")
