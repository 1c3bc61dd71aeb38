"""Does fitting only some folds change what ``auto`` returns on large inputs?

``AutoAggregator`` scores its candidates by cross-validation over answers.  On large inputs
it fits the folds in turn only until ``max_withheld`` (50,000) withheld answers have been
scored: on a subsample of 10^5 answers, three of the five folds.  Each fold still trains on
the answers outside it, so the scores estimate the same quantity from fewer answers; the
question is how much the choice and the stacking weights move, and what it saves.

Crowds: the six simulated scenarios of ``tune_defaults.SCENARIOS`` scaled up 30-fold in
tasks and workers (answers per worker and per task unchanged; 0.9 to 1.5 x 10^5 answers), two
seeds each, and the two real sets large enough for the cap to apply (trec2010, 98,453
answers; cifar10n, 150,000).  Each crowd is fitted with the default and with
``max_withheld=None`` (every fold); accuracy against the planted truth (the gold for the
real sets), the largest change of a stacking weight, and the CPU seconds of each fit.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/investigations/auto_withheld.py [--write-results]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from results_md import markdown_table, write_section  # noqa: E402
from tune_defaults import DEFAULT_DATA, SCENARIOS  # noqa: E402

from crowdlearn import simulate  # noqa: E402
from crowdlearn.aggregation.auto import AutoAggregator  # noqa: E402
from crowdlearn.core.data import CrowdLabels  # noqa: E402
from crowdlearn.diagnostics.metrics import accuracy  # noqa: E402

SCALE = 30
SEEDS = (0, 1)
REAL = ("trec2010", "cifar10n")


def crowds(root: Path):
    for name, kw in SCENARIOS.items():
        big = dict(kw, n_tasks=kw["n_tasks"] * SCALE, n_workers=kw["n_workers"] * SCALE)
        for seed in SEEDS:
            data = simulate.dawid_skene(**big, seed=seed)
            yield f"{name} x{SCALE} s{seed}", data, pd.Series(data.classes.take(data.truth), index=data.tasks)
    for name in REAL:
        folder = root / name
        data = CrowdLabels.from_csv(folder / "labels.csv")
        yield name, data, pd.read_csv(folder / "truth.csv").set_index("task")["truth"]


def fit(data, gold, **kw):
    c0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = AutoAggregator(**kw).fit(data)
    return est, accuracy(est.labels_, gold), time.process_time() - c0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-root", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)
    rows = []
    for name, data, gold in crowds(args.data_root):
        capped, acc_c, sec_c = fit(data, gold)
        full, acc_f, sec_f = fit(data, gold, max_withheld=None)
        weights = pd.concat([capped.weights_, full.weights_], axis=1).fillna(0.0)
        rows.append({
            "crowd": name, "answers": data.n_labels, "folds fitted": capped.scores_.attrs["folds"],
            "accuracy, every fold": acc_f, "accuracy, capped": acc_c,
            "difference (points)": 100 * (acc_c - acc_f),
            "largest weight change": float(np.abs(weights.iloc[:, 0] - weights.iloc[:, 1]).max()),
            "cpu s, every fold": sec_f, "cpu s, capped": sec_c,
        })
        print(rows[-1], flush=True)
    df = pd.DataFrame(rows).set_index("crowd")
    md = ("#### `auto` with its folds capped at 50,000 scored answers (the default) against every fold "
          "fitted (`max_withheld=None`)\n\n" + markdown_table(df, floatfmt=".4f")
          + f"\n\nMean difference {df['difference (points)'].mean():+.3f} points, largest "
          f"{df['difference (points)'].abs().max():.3f}; CPU {df['cpu s, capped'].sum():.0f} s against "
          f"{df['cpu s, every fold'].sum():.0f} s in all.")
    print(md)
    if args.write_results:
        write_section("auto-withheld", md, "OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python "
                      "benchmarks/investigations/auto_withheld.py --write-results")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
