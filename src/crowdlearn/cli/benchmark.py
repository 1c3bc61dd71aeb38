"""``crowdlearn benchmark``: agreement with gold over dataset folders, one table per answer kind."""

from __future__ import annotations

import sys
from pathlib import Path

from .common import UsageError, ids_as_answers, text_classes
from .gold import note_unanswered_gold_classes, note_unmatched_gold, read_gold


def _accuracy_table(datasets: dict, method_names, seed) -> str:
    import pandas as pd

    from ..benchmarking import NEEDS_FEATURES, run_methods

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
    text = text_classes(data)
    if text:
        raise UsageError(f"{folder}: ordinal label {text[0]!r} is not a number, so the labels have "
                         "no order to score MAE and kappa by; write them as numbers from lowest "
                         "to highest (e.g. 1, 2, 3), or fit in Python with "
                         "CrowdLabels.from_frame(..., classes=[lowest, ..., highest])")


def _wants_features(asked) -> bool:
    """Whether a classification benchmark of ``asked`` (None: every method) runs a method
    that needs item features (MMLC)."""
    from ..core.base import get_tags
    from ..registry import get_method, method_kinds

    names = asked if asked is not None else [n for n, k in method_kinds().items() if k == "classification"]
    return any(method_kinds()[n] == "classification" and get_tags(get_method(n)).requires_features
               for n in names)


def _with_folder_features(folder, data):
    """``data`` with the folder's ``features.npy`` attached for its answered tasks.

    Only the answered tasks: the gold of tasks without answers (a folder's test split) would
    otherwise count against every truth-inference method.  A folder whose features miss an
    answered task keeps none, and says so, so that the methods needing them report it.
    """
    from ..core.io import read_features

    features = read_features(folder)
    if features is None:
        return data
    import pandas as pd

    from ..core.ids import strip_text

    features.index = pd.Index(ids_as_answers(strip_text(features.index), data.tasks))
    features = features[~features.index.duplicated()]
    missing = data.tasks[~data.tasks.isin(features.index)]
    if len(missing):
        print(f"{folder}: features.npy has no row for {len(missing)} answered task(s) "
              f"(e.g. {missing[0]!r}); methods that need features are skipped", file=sys.stderr)
        return data
    return data.with_features(features.loc[data.tasks].to_numpy())


def _note_folder_gold(folder: Path, kind: str, data) -> None:
    """``benchmark``'s note on a folder's gold units without answers, as ``aggregate --gold``
    gives it (:func:`note_unmatched_gold`): gold whose ids are spelled otherwise than the
    answers' (``0001`` for ``1``) scores nothing, and the table alone shows only ``n/a``."""
    from ..core.ids import strip_text
    from ..core.io import GOLD_COLUMNS

    file = next((folder / n for n in ("truth.csv", "truth.csv.gz") if (folder / n).exists()), None)
    if file is None or getattr(data, "grouped", False):  # grouped comparisons: gold by (group, item)
        return
    pairs = kind in ("pairwise", "similarity")
    # the unit column is task (the shared format) or the first one (item, as simulate writes)
    gold = read_gold(file, "task", (*GOLD_COLUMNS, "score"))
    note_unmatched_gold(file, gold.set_axis(strip_text(gold.index)),  # ids as the answers' are
                         data.items if pairs else data.tasks, "item" if pairs else "task")
    note_unanswered_gold_classes(file, data)


def cmd_benchmark(args) -> int:
    """One table per answer kind among the folders: accuracy for class labels, the kind's
    metrics against gold for the others."""
    from ..benchmarking import run_kind_methods
    from ..core.io import folder_kind
    from ..datasets import load, locate

    from ..registry import method_kinds

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
