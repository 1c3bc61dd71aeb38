"""Snapshot and compare every label-only method's outputs on the categorical datasets.

A refactor must not change what the methods compute.  ``--save DIR`` fits every registered
label-only method on every categorical dataset of ``../shared/data`` and writes one
``DATASET.npz`` (posteriors and labels per method) into DIR; ``--compare DIR`` fits the
current code and prints, per method and dataset, the largest posterior difference and the
number of changed labels.  Run the save side on the old revision::

    git worktree add /tmp/base REV
    PYTHONPATH=/tmp/base/src python benchmarks/investigations/equivalence.py --save /tmp/snap
    python benchmarks/investigations/equivalence.py --compare /tmp/snap [--old-defaults]

``--old-defaults`` fits the current code with the defaults the methods had at the snapshot's
revision (1b2313e; :data:`OLD_DEFAULTS`), so that a structural change is checked apart from
deliberate changes of defaults.  Thread counts must match the save side (minimax's numba path
sums in a thread-dependent order).  ``--write-results`` records the per-method summary as
section ``refactor-equivalence`` of RESULTS.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

DEFAULT_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
NEEDS_FEATURES = {"mmlc-owf", "mmlc-df"}

#: defaults at revision 1b2313e that were changed deliberately since (issue 13: defaults chosen
#: on simulated crowds, benchmarks/tune_defaults.py; onecoin/ccds: the collapse on tiny crowds)
OLD_DEFAULTS = {
    "ds": {"diag_alpha": 1.0},
    "group-ds": {"diag_alpha": 1.0},
    "bds": {"alpha_diag": 2.0},
    "mmsr": {"trim": 0.2},
    "glad": {"fit_priors": False},
    "onecoin": {"diag_alpha": 0.0},
    "ccds": {"diag_alpha": 0.0},
}


def _label_only_methods():
    import crowdlearn

    try:
        reg = crowdlearn.methods(kind="classification")
    except TypeError:  # the registry before it had kinds
        reg = crowdlearn.methods()
    return {n: c for n, c in reg.items() if n not in NEEDS_FEATURES}


def _datasets(root: Path) -> list[str]:
    import crowdlearn

    try:
        from crowdlearn.benchmarking import categorical_datasets
    except ImportError:
        from crowdlearn.user.benchmarking import categorical_datasets  # noqa
    return categorical_datasets(root)


def _load(folder: Path):
    try:
        from crowdlearn.core.io import load_folder
    except ImportError:
        from crowdlearn.core.io import load_folder
    return load_folder(folder)


def old_default_params() -> dict[str, dict]:
    """Constructor arguments that restore :data:`OLD_DEFAULTS`, nested methods included.

    ``spammer-filtered`` aggregates with ``ds`` and ``auto`` chooses among registered
    methods, so both get instances built with the old defaults.
    """
    from crowdlearn.aggregation.auto import DEFAULT_CANDIDATES
    from crowdlearn.registry import get_method

    def old(name):
        return get_method(name)(**OLD_DEFAULTS.get(name, {}))

    params = {name: dict(kw) for name, kw in OLD_DEFAULTS.items()}
    params["spammer-filtered"] = {"base": old("ds")}
    params["auto"] = {"candidates": [old(name) for name in DEFAULT_CANDIDATES]}
    return params


def fit_all(root: Path, names, only=None, params=None):
    for name in names:
        data = _load(root / name)
        for method, cls in _label_only_methods().items():
            if only and method not in only:
                continue
            t0 = time.perf_counter()
            try:
                est = cls(**(params or {}).get(method, {})).fit(data)
                out = (est.probas_.to_numpy(), np.asarray(est.labels_.astype(str), dtype=str),
                       np.asarray(est.probas_.index.astype(str), dtype=str))
            except Exception as exc:  # recorded, so a method that fails on both sides matches
                out = repr(exc)
            yield name, method, out, time.perf_counter() - t0


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--save", type=Path)
    g.add_argument("--compare", type=Path)
    p.add_argument("--data-root", type=Path, default=DEFAULT_DATA)
    p.add_argument("--datasets", nargs="+")
    p.add_argument("--methods", nargs="+")
    p.add_argument("--old-defaults", action="store_true")
    p.add_argument("--write-results", action="store_true")
    args = p.parse_args(argv)
    names = args.datasets or _datasets(args.data_root)
    rows = []
    saved: dict[str, dict] = {}
    params = old_default_params() if args.old_defaults else None
    for name, method, out, sec in fit_all(args.data_root, names, args.methods, params):
        if args.save:
            saved.setdefault(name, {})
            if isinstance(out, str):
                saved[name][f"{method}|error"] = np.array(out)
            else:
                saved[name][f"{method}|proba"], saved[name][f"{method}|labels"], saved[name][f"{method}|tasks"] = out
            print(f"{name:20s} {method:18s} {sec:7.2f}s", flush=True)
            continue
        ref = np.load(args.compare / f"{name}.npz", allow_pickle=True)  # ids saved as object arrays
        if f"{method}|error" in ref.files or isinstance(out, str):
            same = f"{method}|error" in ref.files and isinstance(out, str)
            rows.append({"dataset": name, "method": method, "max |dp|": np.nan,
                         "labels changed": 0 if same else -1, "note": out if isinstance(out, str) else "ref failed"})
            continue
        proba, labels, tasks = out
        assert (ref[f"{method}|tasks"].astype(str) == tasks).all(), (name, method, "task order changed")
        dp = float(np.max(np.abs(ref[f"{method}|proba"] - proba))) if proba.size else 0.0
        changed = int(np.sum(ref[f"{method}|labels"].astype(str) != labels))
        rows.append({"dataset": name, "method": method, "max |dp|": dp, "labels changed": changed, "note": ""})
        print(f"{name:20s} {method:18s} {dp:9.2e} {changed:5d}", flush=True)
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
        for name, arrays in saved.items():
            np.savez_compressed(args.save / f"{name}.npz", **arrays)
        return 0
    table = pd.DataFrame(rows)
    bad = table[(table["max |dp|"] > 1e-10) | (table["labels changed"] != 0)]
    print("\n## Differences above 1e-10\n")
    print(bad.to_string(index=False) if len(bad) else "none")
    if args.write_results:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from results_md import markdown_table, write_section

        summary = table.groupby("method", sort=False).agg(
            datasets=("dataset", "size"),
            max_abs_dp=("max |dp|", "max"),
            labels_changed=("labels changed", "sum"),
            sets_with_changes=("labels changed", lambda s: int((s != 0).sum())),
        )
        mode = "with the old defaults (--old-defaults)" if args.old_defaults else "at today's defaults"
        md = (f"Posteriors of every label-only method, fitted {mode}, against the snapshot of "
              f"revision 1b2313e on {len(names)} categorical sets: largest absolute difference "
              "over all tasks and sets, and labels changed.\n\n"
              + markdown_table(summary, floatfmt=".2e"))
        section = "refactor-equivalence" + ("-old-defaults" if args.old_defaults else "")
        write_section(section, md, "python " + " ".join([sys.argv[0], *sys.argv[1:]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
