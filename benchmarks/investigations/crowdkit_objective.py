"""Why crowd-kit's DS and one-coin beat ours on a few sets: its EM stopping objective.

crowd-kit 1.4.2 stops EM when its objective per answer gains less than 1e-5 *or falls*.  Its
objective counts the class-prior term once per answer instead of once per task, so it is not
the lower bound that EM increases, and it can fall (``_crowdkit_objective.py`` explains and
checks this).  Where it falls, EM stops after 2-4 iterations.  This script fits crowd-kit's DS
and one-coin on every categorical dataset three ways, in crowd-kit's venv:

* ``shipped``: crowd-kit as released;
* ``per_answer``: our rewrite of its objective (must reproduce ``shipped`` exactly);
* ``per_task``: the same rewrite with the prior term once per task (the true lower bound);

and prints them beside crowdlearn's ``ds`` / ``onecoin`` and, for best-vs-best, every
registered crowdlearn method against every crowd-kit method (the other crowd-kit methods
from ``benchmarks/results/crowdkit_baseline.json``; they do not use this objective).

The best-vs-best table covers only the sets in the baseline file (elsewhere crowd-kit's
other methods were not run); the sets left out are named.  ``--write-results`` also writes
the output to section ``crowdkit-objective`` of ``benchmarks/RESULTS.md``.

Usage::

    python benchmarks/investigations/crowdkit_objective.py [--data-root ../shared/data] [--datasets ...]
        [--methods ...]   # crowdlearn methods for best-vs-best (default: all registered)
        [--write-results]

Takes ~15 minutes with every registered method (1 minute of it crowd-kit).  A run over all
datasets (no ``--datasets``) saves crowd-kit's results to ``benchmarks/results/crowdkit_objective.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from crowdkit_bridge import VENV_PY, available  # noqa: E402
from results_md import recording  # noqa: E402

from crowdlearn.benchmarking import categorical_datasets, run_methods
from crowdlearn.core.io import load_folder
from crowdlearn.registry import methods

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
#: $CROWDLEARN_SHARED_DATA, else ../shared/data beside the checkout
DEFAULT_DATA = Path(os.environ.get("CROWDLEARN_SHARED_DATA") or BENCH.parent.parent / "shared" / "data")
BASELINE = BENCH / "results" / "crowdkit_baseline.json"
OUT = BENCH / "results" / "crowdkit_objective.json"
EM_METHODS = {"DawidSkene": "ds", "OneCoinDawidSkene": "onecoin"}


def crowdkit_objective_runs(root: Path, names: list[str]) -> dict:
    if not available():
        raise SystemExit("crowd-kit venv missing: run bash benchmarks/setup_crowdkit.sh")
    cmd = [str(VENV_PY), str(HERE / "_crowdkit_objective.py"), *(str(root / n) for n in names)]
    return json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout)


def em_table(ck: dict, ours: pd.DataFrame, ck_name: str) -> pd.DataFrame:
    """One row per dataset: crowd-kit shipped / per-task objective vs our method (points)."""
    cl_name = EM_METHODS[ck_name]
    rows = []
    for name, res in ck.items():
        shipped, fixed, rewrite = (res[f"{ck_name}/{o}"] for o in ("shipped", "per_task", "per_answer"))
        mine = 100 * ours.loc[name, cl_name]
        rows.append({
            "dataset": name,
            "ck shipped": 100 * shipped["accuracy"],
            "ck iters": shipped["n_iter"],
            "ck worst step": shipped["min_step"],
            "ck per-task objective": 100 * fixed["accuracy"],
            "per-task iters": fixed["n_iter"],
            "per-task worst step": fixed["min_step"],
            f"cl {cl_name}": mine,
            "cl - ck shipped": mine - 100 * shipped["accuracy"],
            "cl - ck per-task": mine - 100 * fixed["accuracy"],
            "rewrite = shipped": rewrite["accuracy"] == shipped["accuracy"]
            and rewrite["n_iter"] == shipped["n_iter"]
            and rewrite["max_abs_diff_vs_crowdkit"] < 1e-9,
        })
    return pd.DataFrame(rows).set_index("dataset")


def best_table(ck: dict, baseline: dict, ours: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for name, res in ck.items():
        if name not in baseline:  # crowd-kit's other methods not run there: no best to compare
            continue
        others = {m: r["accuracy"] for m, r in baseline[name].items()
                  if m not in EM_METHODS and r.get("accuracy") is not None}
        shipped = {**others, **{m: res[f"{m}/shipped"]["accuracy"] for m in EM_METHODS}}
        fixed = {**others, **{m: res[f"{m}/per_task"]["accuracy"] for m in EM_METHODS}}
        mine = ours.loc[name].dropna()
        best_s, best_f, best_c = (max(d, key=d.get) for d in (shipped, fixed, mine.to_dict()))
        rows.append({
            "dataset": name,
            "best cl": f"{100 * mine[best_c]:.2f} ({best_c})",
            "best ck shipped": f"{100 * shipped[best_s]:.2f} ({best_s})",
            "best ck, per-task objective": f"{100 * fixed[best_f]:.2f} ({best_f})",
            "cl - ck shipped": 100 * (mine[best_c] - shipped[best_s]),
            "cl - ck per-task": 100 * (mine[best_c] - fixed[best_f]),
        })
    return pd.DataFrame(rows).set_index("dataset")


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--data-root", type=Path, default=DEFAULT_DATA)
    p.add_argument("--datasets", nargs="+")
    p.add_argument("--methods", nargs="+", help="crowdlearn methods for best-vs-best (default: all)")
    p.add_argument("--write-results", action="store_true",
                   help="also write the output to section crowdkit-objective of benchmarks/RESULTS.md")
    args = p.parse_args(argv)
    names = args.datasets or categorical_datasets(args.data_root)
    ck = crowdkit_objective_runs(args.data_root, names)
    if not args.datasets:  # a partial run must not overwrite the recorded full one
        OUT.write_text(json.dumps(ck, indent=1))
    baseline = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    data = {n: load_folder(args.data_root / n) for n in names}
    wanted = list(dict.fromkeys([*(args.methods or methods("classification")), *EM_METHODS.values()]))
    long = run_methods(data, wanted)
    ours = long.pivot(index="dataset", columns="method", values="accuracy")
    with recording("crowdkit-objective", enabled=args.write_results):
        for ck_name in EM_METHODS:
            table = em_table(ck, ours, ck_name)
            # worst steps (objective change per answer; negative: it fell) in scientific notation
            fmt = [".1e" if c.endswith("worst step") else ".2f" for c in ["dataset", *table.columns]]
            print(f"#### crowd-kit {ck_name}: shipped vs per-task objective, and crowdlearn "
                  f"`{EM_METHODS[ck_name]}` (gold accuracy %)\n")
            print(table.to_markdown(floatfmt=fmt), "\n")
            for col in ("cl - ck shipped", "cl - ck per-task"):
                print(f"- {col}: {int((table[col] < -0.3).sum())} sets more than 0.3 points behind")
            print()
        table = best_table(ck, baseline, ours)
        print("#### Best crowdlearn method vs best crowd-kit method (gold accuracy %)\n")
        left_out = [n for n in ck if n not in table.index]
        if left_out:
            print(f"_Left out (crowd-kit's other methods not in its baseline file): {', '.join(left_out)}._\n")
        print(table.to_markdown(floatfmt=".2f"), "\n")
        for col in ("cl - ck shipped", "cl - ck per-task"):
            print(f"- {col}: behind on {int((table[col] < 0).sum())} sets, "
                  f"more than 0.3 points behind on {int((table[col] < -0.3).sum())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
