"""The ``crowdlearn`` command.

Sub-commands: ``aggregate``, ``methods``, ``simulate``, ``benchmark``, ``demo``, ``datasets``.  Bad input
ends with exit status 2 and one line ``crowdlearn: error: ...`` on stderr; nothing below this
module prints.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
import warnings
from pathlib import Path

__all__ = ["main"]


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


def _parse_params(pairs: list[str] | None) -> dict:
    """``key=value`` strings to a dict of parsed values.

    A value is a number (``5``, ``1e-3``), a bool (``true``/``false``), ``none``, or text;
    a value with a comma is a list of such items (``candidates=ds,glad``), for the parameters
    that take a list.  The estimator checks the values when it is fitted.
    """
    from .core.params import WHOLE_NUMBERS

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
    from .registry import DEFAULT_METHODS, method_kinds

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


def _make_estimator(name: str, kind: str, seed: int | None, params: dict):
    from .registry import get_method, method_kinds

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


def _read_gold(path, unit_col: str, value_cols=None):
    """A gold file ``unit,truth`` as a Series unit -> truth value; the value column is the
    first of ``value_cols`` (default :data:`crowdlearn.core.io.GOLD_COLUMNS`) it has."""
    from .core.io import GOLD_COLUMNS, read_table

    value_cols = GOLD_COLUMNS if value_cols is None else value_cols
    gdf = read_table(path)
    tcol = unit_col if unit_col in gdf.columns else gdf.columns[0]
    vcol = next((c for c in value_cols if c in gdf.columns and c != tcol), None)
    if vcol is None:
        raise UsageError(f"{path}: expected columns {unit_col},truth; found {list(gdf.columns)}")
    return gdf.set_index(tcol)[vcol]


def _read_label_gold(path, cols):
    """The gold of class labels (``task,truth``; the value column may also be named ``gold``,
    ``label`` or as the answers' label column), its ids and classes stripped of surrounding
    whitespace as the answers' are (:func:`crowdlearn.core.data.strip_text`), so that the
    note on gold tasks without answers compares the same ids."""
    from .core.data import strip_text

    from .core.io import GOLD_COLUMNS

    return strip_text(_read_gold(path, cols[0], (*GOLD_COLUMNS, cols[2])), index=True)


def _ids_like(values, ids, what: str = "the answers' ids") -> list:
    """``values`` read from a text file (ids as text) spelled as the answers' ``ids``: those
    read from Parquet or JSON Lines may be numbers, which no text id would match.  Matched by
    value (:func:`crowdlearn.core.data.ids_like`, as the Python API matches), so ``"17"``,
    ``"17.0"`` and ``17`` name one task; values naming no id are kept as read."""
    import pandas as pd

    from .core.data import ids_like

    return list(ids_like(values, pd.unique(pd.Series(ids)), what))


def _gold_ids_of(truth, ids):
    """The gold Series with its (text) ids as the answers' ``ids`` (:func:`_ids_like`)."""
    import pandas as pd

    if not isinstance(truth, pd.Series) or isinstance(truth.index, pd.MultiIndex):
        return truth
    return truth.set_axis(pd.Index(_ids_like(truth.index, ids), name=truth.index.name))


def _note_unmatched_gold(gold_file, truth, units, unit: str = "task") -> None:
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

    from .core.data import positions_by_value

    if not isinstance(truth, pd.Series) or units is None or isinstance(truth.index, pd.MultiIndex):
        return
    # by value, as the tables match gold to their units ("007" in a text gold file is the
    # task 7 of answers read from Parquet)
    alone = truth.index[positions_by_value(pd.Index(units), truth.index, f"the answered {unit}s") < 0]
    if len(alone):
        print(f"crowdlearn: note: {gold_file}: {len(alone)} of {len(truth)} gold {unit}(s) have no "
              f"answers and are not scored (e.g. {alone[0]!r})", file=sys.stderr)


def _note_unanswered_gold_classes(gold_file, data) -> None:
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

    from .core.data import CrowdLabels, show_value

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


def _read_answer_gold(args, kind: str, extra: dict):
    """Gold of the answer kinds: ``task,truth`` (continuous, multi-label); pairwise gold by
    item, within the ``group`` column when the answers are grouped, read as ``benchmark``
    reads a folder's (:func:`crowdlearn.pairwise.data.truth_columns`: a ``score`` column is
    higher = better, ``task,truth`` ranks or groups, 1 = best) and otherwise as scores unless
    ``--gold-lower-is-better``; similarity clusters.  Ids are stripped of surrounding
    whitespace as the answers' are (:func:`crowdlearn.core.data.strip_text`), so that the
    note on gold without answers compares the same ids."""
    from .core.data import strip_text

    if kind == "pairwise":
        from .core.io import read_table
        from .pairwise.data import GROUP_SEP, read_truth, split_unit_text, truth_columns

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
    gold = _read_gold(args.gold, "task" if kind in ("continuous", "multilabel") else "item")
    return gold.set_axis(strip_text(gold.index))  # values: each table reads its own


def _table_with_gold(args, build, truth, task_ids):
    """``build(truth)`` -> the answer table, with the gold's text ids spelled as the answers'
    ``task_ids`` (:func:`_ids_like`), errors naming the answers' and gold files, and the note
    on gold tasks without answers (:func:`_note_unmatched_gold`)."""
    from .core.tables import naming_file

    truth = _gold_ids_of(truth, task_ids)
    with naming_file(args.input, args.gold):
        data = build(truth)
    _note_unmatched_gold(args.gold, truth, data.tasks)
    _note_unanswered_gold_classes(args.gold, data)
    return data


def _write(table, out) -> None:
    from .core.io import write_table

    if out:
        write_table(table, out)
    else:
        table.to_csv(sys.stdout, index=False)


def _stage(args, text: str) -> None:
    """One line on stderr saying what a long command is doing, when progress is shown."""
    from .core.progress import bar_wanted

    if bar_wanted(getattr(args, "progress", None)):
        print(f"crowdlearn: {text}", file=sys.stderr, flush=True)


def _reading(args, path) -> None:
    try:
        size = f" ({os.path.getsize(path) / 1e6:,.1f} MB)"
    except OSError:
        size = ""
    _stage(args, f"reading {path}{size}")


def _cmd_aggregate(args) -> int:
    from .core import progress
    from .core.tables import check_writable

    # a bad --out fails now, not after reading and fitting (the scaled engines may write a folder)
    if args.out and (args.engine == "memory" or Path(args.out).suffix):
        check_writable(args.out)
    # every fit below (the method's, and those it makes) draws its bar by this setting
    with progress.settings(verbose=args.progress):
        return _aggregate(args)


def _aggregate(args) -> int:
    from .core.io import read_table
    from .core.tables import first_record_line

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
        from .continuous.calibration import CalibratedContinuous

        return CalibratedContinuous(est, random_state=seed), gold
    from .aggregation.calibration import CalibratedAggregator

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
    from .registry import DEFAULT_METHODS
    from .scale import Columns, fit, supported_methods

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
    est = _make_estimator(name, "classification", args.seed, _parse_params(args.param))
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
        _write(result, None)
    print(f"{name} ({args.engine} engine): {len(est.workers_)} workers, {len(est.classes_)} classes; "
          f"{est.n_iter_} iterations, converged={est.converged_}, {elapsed:.3f} s"
          + (f"; wrote {len(result)} file(s) to {out}" if out else ""), file=sys.stderr)
    return 0


def _read_answers(args, columns, read: list):
    """The answers file with ``columns`` present, taken from ``read`` when it was read already."""
    from .core.tables import read_table, require_columns

    if not read:
        _reading(args, args.input)
        return read_table(args.input, columns=columns)
    df = read.pop()
    require_columns(df, columns, args.input)
    return df


def _aggregate_answers(args, kind: str, colmap: dict, first_line, read: list | None = None) -> int:
    """Continuous, multi-label, pairwise and similarity answers: the kind's table in, the
    fitted ``result_frame()`` out."""
    from .core.tables import naming_file
    from .registry import answer_type_of

    table_cls = answer_type_of(kind)
    if args.format:  # numbers from a platform's export (crowdlearn.io)
        from .io import read_export

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
        data = _table_with_gold(args, build, truth, df[roles["task"]])
    else:  # pairwise and similarity: gold by item
        with naming_file(args.input, args.gold):
            data = build(truth)
        _note_unmatched_gold(args.gold, truth, data.items, "item")
    del df
    return _fit_answers(args, kind, data)


def _default_group(df, cols: list, extra: dict) -> None:
    """A ``group`` column groups comparisons here as in ``fit(frame)`` and dataset folders
    (:func:`crowdlearn.pairwise.data.default_group`): ``extra`` gains the role, with a note
    on stderr saying how to rank all items together instead.  Not when another role reads
    that column (``--col worker=group``)."""
    from .pairwise.data import default_group

    column = default_group(df.columns)
    if column is not None and column not in cols:
        extra["group"] = column
        print(f"crowdlearn: note: items are ranked within the groups of column {column!r} "
              "(--col group= ranks all items together)", file=sys.stderr)


def _fit_answers(args, kind: str, data) -> int:
    """Fit the kind's method on its answer table, write ``result_frame()``, and summarise
    (with the kind's metrics against the gold the table carries, if any)."""
    from .benchmarking import truth_scores
    from .registry import DEFAULT_METHODS

    name = args.method or DEFAULT_METHODS[kind]
    est = _make_estimator(name, kind, args.seed, _parse_params(args.param))
    _stage(args, f"fitting {name}")
    t0 = time.perf_counter()
    if args.calibrate:  # continuous (checked before reading): standard errors from the gold
        est, gold = _calibrated(args, kind, est, data)
        est.fit(data, gold=gold)
    else:
        est.fit(data)
    elapsed = time.perf_counter() - t0
    _write(est.result_frame(), args.out)
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
    from .benchmarking import gold_accuracy
    from .core.data import CrowdLabels
    from .core.tables import naming_file
    from .registry import DEFAULT_METHODS
    from .report import posterior_table

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
        truth = _read_label_gold(args.gold, cols)
    if args.format:  # a platform's export (crowdlearn.io); its own gold counts too
        from .io import read_export

        data = read_export(args.input, None if args.format == "auto" else args.format,
                           question=args.question, classes=classes,
                           statuses=args.statuses.split(",") if args.statuses else None)
        if truth is not None:
            data = data.with_truth(truth)
    else:
        df = _read_answers(args, cols, read or [])
        _stage(args, f"encoding {len(df):,} answers")
        truth = _gold_ids_of(truth, df[cols[0]])
        with naming_file(args.input, args.gold):
            data = CrowdLabels.from_frame(df, *cols, classes=classes, truth=truth, first_line=first_line)
    params = _parse_params(args.param)
    if kind == "ordinal" and classes is None and params.get("classes") is None:
        _check_ordinal_labels(args, data, None if args.format else df[cols[2]], first_line)
    df = None  # the string frames cost more memory than the fit itself at 10^7 rows
    groups = _read_groups(args, data, cols[0]) if args.group_col else None  # checked before the fit
    has_gold = data.truth is not None and bool((data.truth >= 0).any())
    _note_unmatched_gold(args.gold, truth, data.tasks)
    _note_unanswered_gold_classes(args.gold, data)
    del truth
    name = args.method or DEFAULT_METHODS[kind]
    est = _make_estimator(name, kind, args.seed, params)
    fit_gold = None
    if args.calibrate:
        est, fit_gold = _calibrated(args, kind, est, data)
    _stage(args, f"fitting {name} on {data.n_labels:,} answers")
    t0 = time.perf_counter()
    est.fit(data, gold=fit_gold)
    elapsed = time.perf_counter() - t0
    if args.out:
        _stage(args, f"writing {args.out}")
    _write(posterior_table(est), args.out)
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
        _group_report(args, est, data, *groups)
    return 0


def _text_classes(data) -> list:
    """The classes of ordinal answers that are not numbers (and so have no order of their own)."""
    from .ordinal.base import numeric_classes

    return [c for c in data.classes if not numeric_classes([c])]


def _check_ordinal_labels(args, data, labels, first_line) -> None:
    """Ordinal labels without a stated order must be numbers: text labels (low, mid, high)
    would otherwise be ranked alphabetically.  The error names the first such label and,
    when the answers' label column is at hand, its first line."""
    import numpy as np

    from .core.data import row_list

    text = _text_classes(data)
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


def _read_groups(args, data, task_col: str):
    """The task -> group Series of ``--group-col`` and the ``--positive`` class, checked
    against the answers before the fit: (where the groups were read, groups, positive)."""
    import pandas as pd

    from .core.data import strip_text
    from .core.tables import check_writable, read_table
    from .fairness import task_groups

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
    groups = pd.Series(table["group"].to_numpy(), index=_ids_like(table["task"], data.tasks))
    try:
        groups = task_groups(groups, data.tasks)
    except ValueError as exc:
        raise UsageError(f"{src}: column {args.group_col!r}: {exc}") from None
    return src, groups, positive


def _group_report(args, est, data, src, groups, positive) -> None:
    """Per-group accuracy, positive rate, TPR/FPR/FNR (stderr; CSV with --group-report)."""
    import pandas as pd

    from .fairness import disparities, group_report

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
        _write(report.reset_index(), args.group_report)


def _needs(tags) -> str:
    """What a method needs beyond crowd answers, from its tags ("-" for nothing)."""
    needs = []
    if tags.requires_features:
        needs.append("features")
    if tags.binary_only:
        needs.append("binary")
    return ",".join(needs) or "-"


def _cmd_methods(args) -> int:
    from .core.base import get_tags
    from .registry import get_method, method_kinds

    kinds = {n: k for n, k in method_kinds().items() if args.kind in (None, k)}
    if not kinds:
        raise UsageError(f"no registered method of kind {args.kind!r}")
    rows = []
    for name, kind in kinds.items():
        try:
            cls = get_method(name)
        except ImportError as exc:
            rows.append((name, kind, "?", f"(unavailable: {exc})"))
            continue
        doc = ((cls.__doc__ or "").strip().splitlines() or [""])[0]
        rows.append((name, kind, _needs(get_tags(cls)), doc))
    widths = [max(len(r[i]) for r in rows + [("method", "kind", "needs", "")]) for i in range(3)]
    header = ("method", "kind", "needs", "description")
    for row in [header, *rows]:
        print("  ".join(f"{v:<{w}}" for v, w in zip(row[:3], widths)) + "  " + row[3])
    return 0


def _accuracy_table(datasets: dict, method_names, seed) -> str:
    import pandas as pd

    from .benchmarking import NEEDS_FEATURES, run_methods

    long = run_methods(datasets, method_names, seed=seed)
    long["acc"] = long["accuracy"].map(lambda a: "n/a" if a != a else f"{a:.4f}")
    long.loc[long["error"].notna(), "acc"] = "error"
    long.loc[long["error"] == NEEDS_FEATURES, "acc"] = "needs features"
    if len(datasets) == 1:
        # one set: how sure each figure is (Wilson interval of the accuracy over the gold
        # tasks; exact McNemar test against the most accurate method on the same tasks) and
        # how calibrated the confidences are
        def fmt(v, spec):
            return "" if v != v else format(v, spec)

        n_gold = int(long["n_gold"].iloc[0])
        out = pd.DataFrame({
            "method": long["method"], "accuracy": long["acc"],
            "95% CI": [("" if lo != lo else f"{lo:.3f}-{hi:.3f}") for lo, hi in zip(long["low"], long["high"])],
            "p vs best": long["vs_best_p"].map(lambda v: fmt(v, ".3g")),
            "log-loss": long["log_loss"].map(lambda v: fmt(v, ".4f")),
            "ECE": long["ece"].map(lambda v: fmt(v, ".4f")),
            "seconds": long["seconds"].map(lambda s: f"{s:.3f}"),
        })
        table = out.to_string(index=False)
        if n_gold:
            table += (f"\n{n_gold} gold tasks; 'p vs best': exact McNemar test against the most accurate "
                      "method on the same gold tasks (p > 0.05: the gap may be chance)")
    else:
        wide = long.pivot(index="method", columns="dataset", values="acc").reindex(long["method"].unique())
        table = wide.to_string()
    # an "error" cell says that a method failed; the line below it says why
    failed = long[long["acc"] == "error"]
    notes = [f"{row.method} on {row.dataset}: {row.error}" for row in failed.itertuples()]
    return "\n".join([table, *notes])


def _dataset_names(folders) -> dict:
    """Each dataset folder (or bundled name) given, once, -> its name in the tables.

    A folder is named by its last part (``../shared/data/dog`` -> ``dog``), unless another
    folder given has the same last part (``run1/data``, ``run2/data``): those keep the path as
    given, so that no dataset replaces another in the table.
    """
    unique = {}
    for folder in folders:  # the same folder given twice is one dataset
        unique.setdefault(str(Path(folder).resolve()), folder)
    last = [Path(folder).name for folder in unique.values()]
    return {folder: name if last.count(name) == 1 else str(folder)
            for folder, name in zip(unique.values(), last)}


def _check_benchmark_ordinal(folder, data) -> None:
    """An ordinal folder's labels must be numbers: a folder states no class order, and text
    grades (low, mid, high) would be ranked alphabetically, so MAE and kappa would score a
    wrong order without a word (``aggregate`` refuses them the same way, where ``--classes``
    can give the order)."""
    text = _text_classes(data)
    if text:
        raise UsageError(f"{folder}: ordinal label {text[0]!r} is not a number, so the labels have "
                         "no order to score MAE and kappa by; write them as numbers from lowest "
                         "to highest (e.g. 1, 2, 3), or fit in Python with "
                         "CrowdLabels.from_frame(..., classes=[lowest, ..., highest])")


def _wants_features(asked) -> bool:
    """Whether a classification benchmark of ``asked`` (None: every method) runs a method
    that needs item features (MMLC)."""
    from .core.base import get_tags
    from .registry import get_method, method_kinds

    names = asked if asked is not None else [n for n, k in method_kinds().items() if k == "classification"]
    return any(method_kinds()[n] == "classification" and get_tags(get_method(n)).requires_features
               for n in names)


def _with_folder_features(folder, data):
    """``data`` with the folder's ``features.npy`` attached for its answered tasks.

    Only the answered tasks: the gold of tasks without answers (a folder's test split) would
    otherwise count against every truth-inference method.  A folder whose features miss an
    answered task keeps none, and says so, so that the methods needing them report it.
    """
    from .core.io import read_features

    features = read_features(folder)
    if features is None:
        return data
    import pandas as pd

    from .core.data import strip_text

    features.index = pd.Index(_ids_like(strip_text(features.index), data.tasks))
    features = features[~features.index.duplicated()]
    missing = data.tasks[~data.tasks.isin(features.index)]
    if len(missing):
        print(f"{folder}: features.npy has no row for {len(missing)} answered task(s) "
              f"(e.g. {missing[0]!r}); methods that need features are skipped", file=sys.stderr)
        return data
    return data.with_features(features.loc[data.tasks].to_numpy())


def _note_folder_gold(folder: Path, kind: str, data) -> None:
    """``benchmark``'s note on a folder's gold units without answers, as ``aggregate --gold``
    gives it (:func:`_note_unmatched_gold`): gold whose ids are spelled otherwise than the
    answers' (``0001`` for ``1``) scores nothing, and the table alone shows only ``n/a``."""
    from .core.data import strip_text
    from .core.io import GOLD_COLUMNS

    file = next((folder / n for n in ("truth.csv", "truth.csv.gz") if (folder / n).exists()), None)
    if file is None or getattr(data, "grouped", False):  # grouped comparisons: gold by (group, item)
        return
    pairs = kind in ("pairwise", "similarity")
    # the unit column is task (the shared format) or the first one (item, as simulate writes)
    gold = _read_gold(file, "task", (*GOLD_COLUMNS, "score"))
    _note_unmatched_gold(file, gold.set_axis(strip_text(gold.index)),  # ids as the answers' are
                         data.items if pairs else data.tasks, "item" if pairs else "task")
    _note_unanswered_gold_classes(file, data)


def _cmd_benchmark(args) -> int:
    """One table per answer kind among the folders: accuracy for class labels, the kind's
    metrics against gold for the others."""
    from .benchmarking import run_kind_methods
    from .core.io import folder_kind
    from .datasets import load, locate

    from .registry import method_kinds

    asked = args.methods.split(",") if args.methods else None
    unknown = [m for m in asked or [] if m not in method_kinds()]
    if unknown:
        raise UsageError(f"unknown method(s) {unknown}; see 'crowdlearn methods'")
    by_kind: dict[str, dict] = {}
    for folder, name in _dataset_names(args.folders).items():
        path = locate(folder)
        kind = args.kind or folder_kind(path)
        data = load(path, kind=kind)
        _note_folder_gold(path, kind, data)
        if kind == "ordinal":
            _check_benchmark_ordinal(folder, data)
        if kind == "classification" and _wants_features(asked):
            data = _with_folder_features(folder, data)
        by_kind.setdefault(kind, {})[name] = data
    for kind, datasets in by_kind.items():
        if len(by_kind) > 1:
            print(f"== {kind}")
        methods = None if asked is None else [m for m in asked if method_kinds()[m] == kind]
        if methods == []:
            print(f"(none of --methods is a {kind} method)")
            continue
        if kind == "classification":
            print(_accuracy_table(datasets, methods, args.seed))
            continue
        long = run_kind_methods(datasets, kind, methods, args.seed)
        metrics = [c for c in long.columns if c not in ("dataset", "method", "seconds", "error")]
        shown = long[["dataset", "method", *metrics, "seconds"]].copy()
        shown["error"] = long["error"].fillna("")
        print(shown.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    return 0


def _cmd_demo(args) -> int:
    from . import datasets

    data = datasets.load(args.dataset)
    print(
        f"{args.dataset}: {data.n_labels} answers, {data.n_tasks} tasks, "
        f"{data.n_workers} workers, {data.n_classes} classes; accuracy against its gold labels"
    )
    from .benchmarking import NEEDS_FEATURES, run_methods
    from .registry import methods as registered

    names = args.methods.split(",") if args.methods else list(registered("classification"))
    width = max(len("method"), *(len(n) for n in names))
    print(f"{'method':>{width}}  accuracy  seconds", flush=True)
    # one line per method as soon as it is fitted: the whole table takes seconds
    for name in names:
        row = run_methods({args.dataset: data}, [name], seed=args.seed).iloc[0]
        if row["error"] == NEEDS_FEATURES:
            acc = "needs features"
        elif isinstance(row["error"], str):
            acc = "error"
        else:
            acc = "n/a" if row["accuracy"] != row["accuracy"] else f"{row['accuracy']:.4f}"
        print(f"{name:>{width}}  {acc:>8}  {row['seconds']:7.3f}", flush=True)
    return 0


def _cmd_datasets(args) -> int:
    """The bundled datasets and the folders of the shared root, one line each."""
    from .datasets import list_datasets

    table = list_datasets(args.root)
    if args.kind:
        table = table[table["kind"] == args.kind]
    shown = table.drop(columns=[] if args.sources else ["source"]).astype(object).reset_index()
    shown = shown.where(shown.notna(), "-")
    shown["features"] = shown["features"].map(lambda f: f if f else "-")
    shown["description"] = shown["description"].map(lambda d: d if len(d) <= 70 else d[:67] + "...")
    text = shown.astype(str)
    widths = {c: max(len(c), *text[c].str.len()) if len(text) else len(c) for c in text.columns}
    numeric = ("answers", "tasks", "workers", "classes", "gold", "features")

    def line(cells: dict) -> str:  # numbers right-aligned, words left-aligned
        return "  ".join(f"{v:>{widths[c]}}" if c in numeric else f"{v:<{widths[c]}}"
                         for c, v in cells.items()).rstrip()

    print(line({c: c for c in text.columns}))
    for row in text.to_dict("records"):
        print(line(row))
    return 0


def _simulated(args):
    """The answer table ``crowdlearn simulate`` draws for ``--kind``, and its gold as a Series
    (unit -> truth); the common flags mean the same for every kind (``--classes``: classes,
    tags or clusters; ``--spammers``: workers who answer at random, or reverse comparisons)."""
    from . import simulate

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


def _cmd_simulate(args) -> int:
    """A synthetic crowd: the answers to ``--out`` (a file, or a folder in the dataset format
    that ``benchmark`` reads: answers, ``truth.csv`` and a ``SOURCE.md`` naming the kind) and
    the planted truth to ``--truth-out``."""
    from .core.io import write_table
    from .core.tables import check_writable

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
    from . import __version__

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


def _cmd_preferences(args) -> int:
    """Preference annotations -> a preference per (prompt, pair), and DPO-ready JSON Lines."""
    from .core.tables import check_writable, naming_file
    from .pairwise.preferences import PreferenceAggregator, Preferences

    if args.out:
        check_writable(args.out)
    if args.dpo:  # JSON Lines whatever its name; its folder is checked now, not after the fit
        check_writable(args.dpo, table=False)
    if not 0.0 <= args.min_confidence <= 1.0:
        raise UsageError(f"--min-confidence is a probability in [0, 1]; got {args.min_confidence}")
    with naming_file(args.input):
        prefs = Preferences.from_csv(args.input)
    params = _parse_params(args.param)
    agg = PreferenceAggregator(method=args.method, params=params or None,
                               random_state=0 if args.seed is None else args.seed)
    agg.fit(prefs)
    _write(agg.result_frame(), args.out)
    summary = f"preferences ({args.method}): {prefs!r}"
    if args.dpo:
        n = agg.to_dpo_jsonl(args.dpo, min_confidence=args.min_confidence)
        summary += f"; wrote {n} DPO lines (confidence >= {args.min_confidence}) to {args.dpo}"
    print(summary, file=sys.stderr)
    return 0


def _read_id_list(path, col: str, ids) -> list:
    """The ids in column ``col`` of a list file (``next --tasks`` / ``--workers``), spelled as
    the answers' ``ids`` (:func:`_ids_like`).  A file without the column, or with an empty
    cell in it, is an error naming the file (and the line)."""
    from .core.data import row_list, strip_text
    from .core.tables import first_record_line, read_table

    values = strip_text(read_table(path, columns=[col])[col])  # as the answers' ids are
    empty = values.isna().to_numpy()
    if empty.any():  # not a task nor a worker: it was suggested as one
        raise UsageError(f"{path}: missing value in column {col!r} at {row_list(empty, first_record_line(path))}")
    return _ids_like(values, ids)


def _cmd_next(args) -> int:
    from .active import ActiveLoop
    from .core.data import CrowdLabels
    from .core.tables import first_record_line, naming_file, read_table

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
    _write(pick, args.out)
    why = ""
    if len(pick) < args.budget:  # say why fewer: a short pool, or listed workers who answered all
        pool = len(set(tasks)) if tasks is not None else answers.n_tasks
        why = (f"; the pool has {pool} task(s)" if workers is None else
               f"; the pool has {pool} task(s), {len(pick)} of them not yet answered by a listed worker")
    print(f"next: {len(pick)} of {args.budget} suggestions ({args.strategy}; {loop.answers_.n_labels} answers "
          f"so far, method {args.method}{why})", file=sys.stderr)
    return 0


def _cmd_report(args) -> int:
    import pandas as pd

    from .benchmarking import gold_accuracy
    from .core.data import CrowdLabels
    from .core.tables import check_writable, first_record_line, read_table
    from .report import summarize

    check_writable(args.out, table=False)  # now, not after the fits
    cols = [args.task_col, args.worker_col, args.label_col]
    frame = read_table(args.input, columns=cols)
    truth = _read_label_gold(args.gold, cols) if args.gold else None
    data = _table_with_gold(args, lambda gold: CrowdLabels.from_frame(
        frame, *cols, truth=gold, first_line=first_record_line(args.input)), truth, frame[cols[0]])
    names = args.method or ["ds"]
    rows, main_fit = [], None
    for name in names:
        est = _make_estimator(name, "classification", args.seed, {})
        t0 = time.perf_counter()
        est.fit(data)
        row = {"method": name, "seconds": time.perf_counter() - t0, "iterations": est.n_iter_,
               "converged": bool(est.converged_), "mean confidence": float(est.probas_.max(axis=1).mean())}
        if truth is not None:
            row["accuracy"] = gold_accuracy(est.labels_, data)
        rows.append(row)
        if main_fit is None:
            main_fit = (name, est)
    name, est = main_fit
    comparison = pd.DataFrame(rows).set_index("method") if len(rows) > 1 else None
    summarize(est, data).to_html(args.out, labels=data, comparison=comparison, title=f"crowdlearn report: {name}",
                                 summary={"iterations": est.n_iter_, "converged": est.converged_})
    print(f"report: {args.out} ({name}; {data.n_labels} answers, {data.n_tasks} tasks)", file=sys.stderr)
    return 0


def _seed(text: str) -> int:
    """``--seed``: numpy seeds are integers in [0, 2^32)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**32), got {text!r}") from None
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**32), got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="crowdlearn", description="Learning from crowds.")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True)

    a = sub.add_parser(
        "aggregate", help="infer the truth of every task (class, number, ranking, clusters)",
        description="Aggregate crowd answers of any kind. The kind is the method's kind, else "
        "--kind, else read from the columns (left,right: pairwise; item_a,item_b: similarity; "
        "otherwise class labels). Output: class labels and ordinal "
        "task,label,confidence,p_<class>...; continuous task,estimate,stderr; multilabel "
        "task,label,confidence,p:<tag>...; pairwise item,score,rank,stderr; similarity "
        "item,cluster,confidence.")
    a.add_argument("input", help="CSV/TSV/Parquet/JSON Lines file of answers")
    a.add_argument("--method", default=None, help="registered method (default: the kind's default)")
    a.add_argument("--kind", default=None,
                   help="classification, continuous, ordinal, multilabel, pairwise or similarity")
    a.add_argument("--col", action="append", metavar="ROLE=COLUMN",
                   help="column of a role (e.g. left=first, group=query; a 'group' column groups "
                        "comparisons unless group= is given); repeatable")
    a.add_argument("--out", help="output .csv/.tsv/.parquet/.jsonl (default: CSV on stdout)")
    a.add_argument("--task-col", default="task")
    a.add_argument("--worker-col", default="worker")
    a.add_argument("--label-col", default="label")
    a.add_argument("--classes", help="comma-separated class set (multilabel: tag set), in output order "
                   "(ordinal: lowest first), a name with a comma in double quotes (default: the labels seen)")
    a.add_argument("--gold", help="file of task,truth; reports accuracy")
    a.add_argument("--format", default=None, metavar="NAME",
                   help="read a platform export: toloka, mturk, labelstudio, prodigy, argilla, "
                   "crowdflower, peerannot, cleanlab, or auto (detected from the content)")
    a.add_argument("--question", help="the export's question when it holds several")
    a.add_argument("--statuses", help="comma-separated assignment statuses kept "
                   "(default: the platform's accepted ones)")
    a.add_argument("--delimiter", help="multilabel: the separator of tags in a label (default |)")
    a.add_argument("--gold-lower-is-better", action="store_true",
                   help="pairwise gold 'item,truth' holds ranks or groups (1 = best), not "
                   "scores ('score' columns are scores and 'task,truth' ranks, as in benchmark)")
    a.add_argument("--seed", type=_seed, default=None)
    a.add_argument("--param", action="append", metavar="KEY=VALUE", help="estimator parameter")
    a.add_argument("--calibrate", action="store_true",
                   help="give the --gold tasks to the fit and calibrate on them the confidences "
                   "of class labels (CalibratedAggregator) or the standard errors of continuous "
                   "answers (CalibratedContinuous); reports what cross-fitting measures on them")
    a.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show what is being done and a bar of the iterations on stderr "
                   "(default: when stderr is a terminal; never when the CI variable is set)")
    a.add_argument("--group-col", help="class labels: report accuracy, positive rate, TPR/FPR/FNR "
                   "per value of this column (of the answers file, or of --tasks) on stderr")
    a.add_argument("--tasks", help="table with the task column and the --group-col column")
    a.add_argument("--positive", help="the positive class of the group report (default: the last class)")
    a.add_argument("--group-report", help="also write the per-group table here (CSV/Parquet/...)")
    a.add_argument("--engine", choices=("memory", "dask", "stream"), default="memory",
                   help="class labels beyond memory: 'dask' fits on a Dask cluster, 'stream' reads "
                   "the files chunk by chunk on this machine; INPUT may then be a folder or a glob "
                   "of Parquet/CSV files and --out a folder (methods: mv, wmv, wawa, zbs, ds, onecoin, ccds, glad, mace)")
    a.add_argument("--scheduler", help="--engine dask: address of a running scheduler (default: a local cluster)")
    a.add_argument("--workers", type=int, help="--engine dask: worker processes of the local cluster (default 2)")
    a.add_argument("--chunk-answers", type=int, default=4_000_000,
                   help="--engine stream: answers read at a time (the memory bound; default 4,000,000)")
    a.set_defaults(func=_cmd_aggregate)

    pr = sub.add_parser(
        "preferences", help="aggregate preference annotations (which response is better) for DPO",
        description="Rows prompt,response_a,response_b,worker,label (label a, b or tie). Writes "
        "pair,prompt,response_1,response_2,p_1,p_2,p_tie,outcome (a response or tie),preferred,confidence; --dpo also writes "
        "prompt,chosen,rejected,confidence JSON Lines for a DPO trainer.")
    pr.add_argument("input", help="CSV/TSV/JSON Lines file of preference annotations")
    pr.add_argument("--method", default="crowd-bt", help="crowd-bt (default) or ds")
    pr.add_argument("--out", help="output table (default: CSV on stdout)")
    pr.add_argument("--dpo", help="also write DPO JSON Lines here")
    pr.add_argument("--min-confidence", type=float, default=0.5,
                    help="pairs whose preferred response has a lower probability are left out of --dpo")
    pr.add_argument("--seed", type=_seed, default=None)
    pr.add_argument("--param", action="append", metavar="KEY=VALUE",
                    help="parameter of the underlying method")
    pr.set_defaults(func=_cmd_preferences)

    m = sub.add_parser("methods", help="list the registered methods: kind, needs, description")
    m.add_argument("--kind", help="only methods of this kind (classification, learning, "
                   "continuous, ordinal, multilabel, pairwise, similarity)")
    m.set_defaults(func=_cmd_methods)

    b = sub.add_parser("benchmark", help="agreement with gold over dataset folders, any kind")
    b.add_argument("folders", nargs="+",
                   help="folders holding labels.csv (pairs.csv for comparisons) and truth.csv")
    b.add_argument("--methods", help="comma-separated method names (default: all of the kind)")
    b.add_argument("--kind", help="answer kind of every folder (default: each folder's SOURCE.md)")
    b.add_argument("--seed", type=_seed, default=0)
    b.set_defaults(func=_cmd_benchmark)

    d = sub.add_parser("demo", help="aggregate a bundled real dataset with every method")
    d.add_argument("--dataset", default="zencrowd_us")
    d.add_argument("--methods", help="comma-separated method names (default: all)")
    d.add_argument("--seed", type=_seed, default=0)
    d.set_defaults(func=_cmd_demo)

    ds = sub.add_parser("datasets", help="list the bundled datasets and those of a shared folder",
                        description="Name, kind, counts and a one-line description of every "
                        "dataset 'crowdlearn.datasets.load(name)' opens: the bundled ones and the "
                        "folders under --root (default $CROWDLEARN_SHARED_DATA or ../shared/data).")
    ds.add_argument("--root", help="folder of dataset folders in the shared format")
    ds.add_argument("--kind", help="only datasets of this answer kind")
    ds.add_argument("--sources", action="store_true", help="also print where each dataset is")
    ds.set_defaults(func=_cmd_datasets)

    s = sub.add_parser("simulate", help="write a synthetic crowd with planted truth (any kind)")
    s.add_argument("--kind", default=None, help="classification (Dawid-Skene workers, the default), "
                   "continuous, ordinal, multilabel, pairwise (--tasks items, tasks x "
                   "labels-per-task comparisons) or similarity (--classes clusters)")
    s.add_argument("--tasks", type=int, default=1000)
    s.add_argument("--workers", type=int, default=50)
    s.add_argument("--classes", type=int, default=3)
    s.add_argument("--labels-per-task", type=int, default=5)
    s.add_argument("--spammers", type=float, default=0.0, help="fraction of uniform spammers")
    s.add_argument("--adversaries", type=float, default=0.0, help="fraction of adversaries")
    s.add_argument("--seed", type=_seed, default=0)
    s.add_argument("--out", required=True,
                   help="answers file (.csv/.tsv/.parquet/.jsonl), or a folder (existing, or "
                   "ending in /) to write as a dataset that 'benchmark' reads: labels.csv "
                   "(pairs.csv, similarity.csv), truth.csv and SOURCE.md")
    s.add_argument("--truth-out", help="also write the planted truth here: task,truth "
                   "(similarity item,truth; pairwise item,score, higher = better)")
    s.set_defaults(func=_cmd_simulate)

    nx = sub.add_parser(
        "next", help="which tasks (and workers) to ask next, from the answers so far",
        description="Writes task,worker,score: the --budget tasks to label next, best first (distinct "
        "tasks; worker empty unless --workers lists who can be asked).")
    nx.add_argument("input", help="CSV/TSV/Parquet/JSON Lines file of the answers so far")
    nx.add_argument("--budget", type=int, required=True,
                    help="how many (task, worker) pairs; 0 writes the header only")
    nx.add_argument("--strategy", default="entropy", help="entropy (default), margin, eig, kg or random")
    nx.add_argument("--method", default="ds", help="truth-inference method refit on the answers")
    nx.add_argument("--tasks", help="file with the --task-col column: the pool to choose from "
                    "(default: the tasks answered so far; new tasks are scored with the class prior)")
    nx.add_argument("--workers", help="file with the --worker-col column: who can be asked now")
    nx.add_argument("--worker-strategy", default=None,
                    help="eig (default; the worker whose answer tells most about the task; with "
                    "--strategy eig or kg, task and worker are chosen together), eig-thompson, greedy, ucb, "
                    "thompson or epsilon (on the estimated accuracies)")
    nx.add_argument("--task-col", default="task")
    nx.add_argument("--worker-col", default="worker")
    nx.add_argument("--label-col", default="label")
    nx.add_argument("--out", help="output .csv/.tsv/.parquet/.jsonl (default: CSV on stdout)")
    nx.add_argument("--seed", type=_seed, default=None)
    nx.set_defaults(func=_cmd_next)

    rp = sub.add_parser("report", help="one self-contained HTML page of a fit (workers, confusions, "
                        "confidence, reliability against gold, convergence, method comparison)")
    rp.add_argument("input", help="CSV/TSV/Parquet/JSON Lines file of class-label answers")
    rp.add_argument("--method", action="append", help="method (repeat to compare; the first is "
                    "the page's subject; default ds)")
    rp.add_argument("--gold", help="file of task,truth: accuracy, log-loss and a reliability diagram")
    rp.add_argument("--out", required=True, help="the .html file to write")
    rp.add_argument("--task-col", default="task")
    rp.add_argument("--worker-col", default="worker")
    rp.add_argument("--label-col", default="label")
    rp.add_argument("--seed", type=_seed, default=None)
    rp.set_defaults(func=_cmd_report)
    return p


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning of a method as one line, as errors are (not the file, line and source of
    the call that raised it)."""
    text = str(message).strip().splitlines()
    print(f"crowdlearn: warning: {text[0] if text else category.__name__}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings():  # restores the default display on the way out
            if not args.debug:
                warnings.showwarning = _show_warning
            return args.func(args)
    except BrokenPipeError:  # the reader went away (`| head`): not an error of ours
        sys.stderr = open(os.devnull, "w")  # silence the flush at interpreter exit
        return 0
    except (ValueError, TypeError, KeyError, FileNotFoundError, ImportError, OSError) as exc:
        if args.debug:
            raise
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"crowdlearn: error: {msg}", file=sys.stderr)
        return 2
    except MemoryError:
        print("crowdlearn: error: out of memory", file=sys.stderr)
        return 2
    except Exception as exc:  # pragma: no cover - last resort: one line, not a traceback
        if args.debug:
            raise
        print(f"crowdlearn: internal error ({type(exc).__name__}): {exc}; rerun with --debug", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
