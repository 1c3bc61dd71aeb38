"""Accuracy of every crowdlearn method beside crowd-kit 1.4.2, on every categorical dataset.

Both sides run in this one invocation: crowdlearn in this interpreter, crowd-kit in its own
virtual environment (``bash benchmarks/setup_crowdkit.sh``) through ``crowdkit_baseline.py``.
Without that venv the crowd-kit columns are left out.  Prints markdown tables:

1. accuracy, methods x datasets, for crowdlearn (``cl:``) and crowd-kit (``ck:``);
2. per dataset: crowdlearn ``ds`` vs crowd-kit ``DawidSkene``, best of each side;
3. fit time of each crowdlearn method (seconds, sum over datasets).

Usage::

    python benchmarks/accuracy.py [--data-root ../shared/data] [--datasets bluebirds dog]
                                  [--no-crowdkit] [--write-results [SECTION]]

``--write-results`` replaces the section ``accuracy`` of RESULTS.md (or ``SECTION``, for a
run over a subset of methods or datasets) with the printed tables.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_md import markdown_table, recording  # noqa: E402

from crowdlearn.benchmarking import categorical_datasets, run_methods
from crowdlearn.core.io import load_folder
from crowdlearn.registry import methods

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data"
CK_PYTHON = HERE / ".venv-crowdkit" / "bin" / "python"


def crowdkit_results(root: Path, names: list[str]) -> dict:
    if not CK_PYTHON.exists():
        print("(crowd-kit venv missing: run bash benchmarks/setup_crowdkit.sh)", file=sys.stderr)
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, str(HERE / "crowdkit_baseline.py"), "--data-root", str(root),
               "--datasets", *names, "--out-dir", tmp]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return json.loads((Path(tmp) / "crowdkit_baseline.json").read_text())


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--data-root", type=Path, default=DEFAULT_DATA)
    p.add_argument("--datasets", nargs="+")
    p.add_argument("--methods", nargs="+")
    p.add_argument("--no-crowdkit", action="store_true")
    p.add_argument("--crowdkit-json", type=Path, metavar="PATH",
                   help="take crowd-kit's accuracies from a saved crowdkit_baseline.py run "
                        "(e.g. benchmarks/results/crowdkit_baseline.json) instead of running it")
    p.add_argument("--write-results", nargs="?", const="accuracy", metavar="SECTION",
                   help="write the tables to this section of RESULTS.md (default: accuracy)")
    args = p.parse_args(argv)
    with recording(args.write_results or "", enabled=bool(args.write_results)):
        run(args)
    return 0


def run(args) -> None:
    names = args.datasets or categorical_datasets(args.data_root)
    data = {n: load_folder(args.data_root / n) for n in names}
    long = run_methods(data, args.methods or list(methods("classification")))
    acc = long.pivot(index="method", columns="dataset", values="accuracy").reindex(
        index=long["method"].unique(), columns=names
    )
    acc.index = ["cl:" + m for m in acc.index]
    if args.crowdkit_json:
        ck = json.loads(args.crowdkit_json.read_text())
        print(f"(crowd-kit columns from {args.crowdkit_json}, as recorded there)\n")
    else:
        ck = {} if args.no_crowdkit else crowdkit_results(args.data_root, names)
    if ck:
        ck_acc = pd.DataFrame({n: {m: r.get("accuracy") for m, r in ck[n].items()} for n in names if n in ck})
        ck_acc.index = ["ck:" + m for m in ck_acc.index]
        table = pd.concat([acc, ck_acc.reindex(columns=names).astype(float)])
    else:
        table = acc
    print("#### Accuracy against gold (tasks with gold and at least one answer)\n")
    print(markdown_table(table.T, ".4f"))

    rows = []
    for n in names:
        cl_col = acc[n]
        # --methods may leave ds out: its columns are then nan, not a KeyError
        row = {"dataset": n, "cl ds": cl_col.get("cl:ds", np.nan),
               "best cl": f"{cl_col.max():.4f} ({cl_col.idxmax()[3:]})"}
        if ck and n in ck:
            ck_col = table.loc[[i for i in table.index if i.startswith("ck:")], n].dropna()
            row["ck DawidSkene"] = ck_col.get("ck:DawidSkene", np.nan)
            row["ds - ck DS (points)"] = 100 * (row["cl ds"] - row["ck DawidSkene"])
            row["best ck"] = f"{ck_col.max():.4f} ({ck_col.idxmax()[3:]})"
            row["best cl - best ck (points)"] = 100 * (cl_col.max() - ck_col.max())
        rows.append(row)
    print("\n#### Dawid-Skene and best method per dataset\n")
    print(markdown_table(pd.DataFrame(rows), ".4f", index=False))

    times = long.groupby("method", sort=False)["seconds"].sum()
    print("\n#### crowdlearn fit time, seconds summed over the datasets\n")
    print(markdown_table(times.to_frame("seconds").T, ".3f"))


if __name__ == "__main__":
    sys.exit(main())
