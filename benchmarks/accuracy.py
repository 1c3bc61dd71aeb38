"""Accuracy of every crowdlearn method beside crowd-kit 1.4.2, on every categorical dataset.

Both sides run in this one invocation: crowdlearn in this interpreter, crowd-kit in its own
virtual environment (``bash benchmarks/setup_crowdkit.sh``) through ``crowdkit_baseline.py``.
Without that venv the crowd-kit columns are left out.  Prints markdown tables:

1. accuracy, methods x datasets, for crowdlearn (``cl:``) and crowd-kit (``ck:``);
2. per dataset: crowdlearn ``ds`` vs crowd-kit ``DawidSkene``, best of each side;
3. fit time of each crowdlearn method (seconds, sum over datasets).

Usage::

    python benchmarks/accuracy.py [--data-root ../shared/data] [--datasets bluebirds dog]
                                  [--no-crowdkit]
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
    args = p.parse_args(argv)
    names = args.datasets or categorical_datasets(args.data_root)
    data = {n: load_folder(args.data_root / n) for n in names}
    long = run_methods(data, args.methods or list(methods("classification")))
    acc = long.pivot(index="method", columns="dataset", values="accuracy").reindex(
        index=long["method"].unique(), columns=names
    )
    acc.index = ["cl:" + m for m in acc.index]
    ck = {} if args.no_crowdkit else crowdkit_results(args.data_root, names)
    if ck:
        ck_acc = pd.DataFrame({n: {m: r.get("accuracy") for m, r in ck[n].items()} for n in names if n in ck})
        ck_acc.index = ["ck:" + m for m in ck_acc.index]
        table = pd.concat([acc, ck_acc.reindex(columns=names).astype(float)])
    else:
        table = acc
    print("## Accuracy against gold (tasks with gold and at least one answer)\n")
    print(table.T.to_markdown(floatfmt=".4f"))

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
    print("\n## Dawid-Skene and best method per dataset\n")
    print(pd.DataFrame(rows).to_markdown(index=False, floatfmt=".4f"))

    times = long.groupby("method", sort=False)["seconds"].sum()
    print("\n## crowdlearn fit time, seconds summed over the datasets\n")
    print(times.to_frame("seconds").T.to_markdown(floatfmt=".3f"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
