"""How much of the DS-vs-crowd-kit gap is the stopping rule?  Three tables, gold accuracy in %.

crowd-kit 1.4.2's EM stops when its ELBO per answer gains less than 1e-5, which on some sets
ends after 2-3 iterations (`n_iter` recorded in ``benchmarks/results/crowdkit_baseline.json``).  Those
early stops are where crowd-kit's DS and one-coin beat ours.  This script shows it directly:

1. ``ds`` and ``onecoin`` at their defaults stopped after 1, 2, 3, ... iterations (``tol=0``),
   beside the crowd-kit accuracy and iteration count from the baseline file;
2. ``ds`` with diagonal pseudo-counts ``diag_alpha`` 1/2/3/5, stopped by the default rule
   (``tol=1e-7``) and run to convergence (``tol=1e-10``, up to 2000 iterations), as
   differences from crowd-kit's DS — no column is within 0.3 points everywhere.

Without ``--datasets`` it covers the categorical sets that have a crowd-kit baseline (every
table compares with crowd-kit) and names the ones left out.  ``--write-results`` also writes
the output to section ``ds-stopping`` of ``benchmarks/RESULTS.md``.

Usage::

    python benchmarks/investigations/ds_stopping.py [--data-root ../shared/data] [--datasets ...]
        [--write-results]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import pandas as pd

from crowdlearn.aggregation import DawidSkene, OneCoinDawidSkene
from crowdlearn.benchmarking import categorical_datasets, gold_accuracy
from crowdlearn.core.io import load_folder

BENCH = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BENCH))
from results_md import recording  # noqa: E402

#: $CROWDLEARN_SHARED_DATA, else ../shared/data beside the checkout
DEFAULT_DATA = Path(os.environ.get("CROWDLEARN_SHARED_DATA") or BENCH.parent.parent / "shared" / "data")
BASELINE = BENCH / "results" / "crowdkit_baseline.json"
ITERS = (1, 2, 3, 4, 5, 10, 20, 100)
STOP_SETS = ("duchenne", "product", "zencrowd_all", "zencrowd_us")
CONVERGED = dict(tol=1e-10, max_iter=2000)


def pct(model, data) -> float:
    return round(100 * gold_accuracy(model.labels_, data), 2)


def by_iteration(data: dict, ck: dict, cls, ck_name: str) -> pd.DataFrame:
    rows = []
    for name, d in data.items():
        row = {"dataset": name}
        row.update({f"{it} it": pct(cls(max_iter=it, tol=0).fit(d), d) for it in ITERS})
        if name in ck:
            row["crowd-kit"] = round(100 * ck[name][ck_name]["accuracy"], 2)
            row["crowd-kit iters"] = ck[name][ck_name]["n_iter"]
        rows.append(row)
    return pd.DataFrame(rows).set_index("dataset")


def diag_grid(data: dict, ck: dict) -> pd.DataFrame:
    rows = []
    for name, d in data.items():
        ref = 100 * ck[name]["DawidSkene"]["accuracy"] if name in ck else float("nan")
        row = {"dataset": name, "crowd-kit DS": round(ref, 2)}
        for a in (1.0, 2.0, 3.0, 5.0):
            for label, kw in (("default stop", {}), ("converged", CONVERGED)):
                m = DawidSkene(diag_alpha=a, **kw).fit(d)
                row[f"d{a:g} {label}"] = round(pct(m, d) - ref, 2)
                row[f"d{a:g} {label} iters"] = m.n_iter_
        rows.append(row)
    return pd.DataFrame(rows).set_index("dataset")


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--data-root", type=Path, default=DEFAULT_DATA)
    p.add_argument("--datasets", nargs="+")
    p.add_argument("--write-results", action="store_true",
                   help="also write the output to section ds-stopping of benchmarks/RESULTS.md")
    args = p.parse_args(argv)
    ck = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    names = args.datasets or categorical_datasets(args.data_root)
    skipped = [] if args.datasets else [n for n in names if n not in ck]
    names = [n for n in names if n not in skipped]
    data = {n: load_folder(args.data_root / n) for n in names}
    stop = {n: data[n] for n in STOP_SETS if n in data}

    with recording("ds-stopping", enabled=args.write_results):
        if skipped:
            print(f"_Left out (no crowd-kit baseline): {', '.join(skipped)}._\n")
        print(f"#### ds (default diag_alpha={DawidSkene().diag_alpha:g}) stopped after a fixed number "
              "of EM iterations (gold accuracy %)\n")
        print(by_iteration(stop, ck, DawidSkene, "DawidSkene").to_markdown(), "\n")
        print(f"#### onecoin (default diag_alpha={OneCoinDawidSkene().diag_alpha:g}) stopped after a "
              "fixed number of EM iterations (gold accuracy %)\n")
        print(by_iteration(stop, ck, OneCoinDawidSkene, "OneCoinDawidSkene").to_markdown(), "\n")
        grid = diag_grid(data, ck)
        iters = [c for c in grid.columns if c.endswith("iters")]
        print("#### ds minus crowd-kit DS (points), by diag_alpha and stopping rule\n")
        print(grid.drop(columns=iters).to_markdown(), "\n")
        print("#### EM iterations used\n")
        print(grid[iters].to_markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
