"""How do the defaults hold up when each task has only one, two or three answers?

One-off investigation (RESULTS section ``sparse-redundancy``, issue 15).  Most real crowds give
an item 1 to 10 labels, while the benchmark sets carry 3 to 20 per task.  For every categorical
set of ../shared/data this keeps ``k`` answers per task (a seeded random subset of each task's
answers, two draws) and reports the gold accuracy of majority vote, ``ds``, ``hds``,
``onecoin`` and ``auto``, mean over the draws.  With ``k = 1`` no two workers share a task and
every aggregator returns the answers (``BaseAggregator.fit``), so that row is not run.

Run from the repository root::

    OMP_NUM_THREADS=1 python benchmarks/investigations/sparse_redundancy.py [--k 2 3] [--write-results]
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
sys.path.insert(0, str(HERE.parent))

from results_md import markdown_table, write_section  # noqa: E402

from crowdlearn.benchmarking import categorical_datasets, gold_accuracy  # noqa: E402
from crowdlearn.core.io import load_folder  # noqa: E402
from crowdlearn.registry import get_method  # noqa: E402

ROOT = HERE.parents[1].parent / "shared" / "data"
METHODS = ("mv", "ds", "hds", "onecoin", "auto")
DRAWS = (0, 1)


def run(ks) -> str:
    rows = []
    for name in categorical_datasets(ROOT):
        full = load_folder(ROOT / name)
        for k in ks:
            accs = []
            for seed in DRAWS:
                data = full._select_keep_ids(_mask(full, k, seed))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    accs.append({m: gold_accuracy(get_method(m)().fit(data).labels_, data) for m in METHODS})
            rows.append({"dataset": name, "answers per task": k, **pd.DataFrame(accs).mean().to_dict()})
            print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    mean = table.groupby("answers per task")[list(METHODS)].mean().reset_index()
    mean.insert(0, "dataset", "mean")
    table = pd.concat([table.sort_values(["answers per task", "dataset"]), mean], ignore_index=True)
    return (f"#### Gold accuracy with k answers kept per task (random subset, mean of {len(DRAWS)} draws)\n\n"
            + markdown_table(table, floatfmt=".4f", index=False))


def _mask(data, k: int, seed: int) -> np.ndarray:
    """True for the answers kept: ``k`` per task at most, chosen by a seeded random key."""
    rng = np.random.default_rng(seed)
    key = np.empty(data.n_labels)
    key[data.canonical_order()] = rng.random(data.n_labels)  # independent of the rows' order
    by_task = np.lexsort((key, data.task))
    rank = np.empty(data.n_labels, dtype=np.int64)
    rank[by_task] = np.arange(data.n_labels) - data.task_ptr[data.task[by_task]]
    return rank < k


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.time()
    md = run(args.k) + f"\n\n({time.time() - t0:.0f}s)"
    print(md)
    if args.write_results:
        write_section("sparse-redundancy", md, "OMP_NUM_THREADS=1 python benchmarks/investigations/sparse_redundancy.py"
                      + " --k " + " ".join(map(str, args.k)) + " --write-results")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
