"""Model choice without gold (issue 15): which default should a user without gold get?

Three parts, each writing its own RESULTS.md section with ``--write-results``:

``--synthetic`` (the part that *chooses*): the candidate defaults — ``ds``, ``hds`` and
``auto`` in three configurations (stacking, which is now the default, and selection with
``ds`` or ``hds`` as the reference) — on the declared grid of simulated crowds of
``tune_defaults.py`` (sparse workers, many classes, spammers and adversaries, asymmetric
confusions, class imbalance, a dense control; three seeds each).  Accuracy against the
planted truth; the chosen default is the best mean accuracy, and a configuration within 0.1
points of it with a smaller worst regret is preferred (the rule of ``tune_defaults.py``).

``--real`` (the part that *reports*): every categorical set of ../shared/data, with the
acceptance check of issue 15 (``auto`` at least crowd-kit's best minus 0.5 points and at
least ``ds`` minus 0.3 points) and the gold-chosen best of the candidate methods beside it.
crowd-kit's accuracies come from its recorded run (``results/crowdkit_baseline.json``).

``--timing``: ``auto`` at 10^6 answers on one core.

Usage::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/model_choice.py --synthetic --real --timing [--write-results]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_md import markdown_table, write_section  # noqa: E402
from tune_defaults import SCENARIOS, crowds  # noqa: E402

from crowdlearn import simulate  # noqa: E402
from crowdlearn.aggregation.auto import DEFAULT_CANDIDATES, AutoAggregator  # noqa: E402
from crowdlearn.benchmarking import categorical_datasets, gold_accuracy  # noqa: E402
from crowdlearn.core.io import load_folder  # noqa: E402
from crowdlearn.registry import get_method  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data"
CK_JSON = HERE / "results" / "crowdkit_baseline.json"

_HDS_FIRST = ("hds",) + tuple(c for c in DEFAULT_CANDIDATES if c != "hds")

#: the configurations competing to be what a user without gold gets
CONFIGS = {
    "ds": lambda: get_method("ds")(),
    "hds": lambda: get_method("hds")(),
    "auto[select]": lambda: AutoAggregator(combine="select"),
    "auto[select,ref=hds]": lambda: AutoAggregator(combine="select", candidates=_HDS_FIRST),
    "auto": lambda: AutoAggregator(),  # combine="stack"
}


def _acc_planted(est, data) -> float:
    est.fit(data)
    return float(np.mean(est.labels_.to_numpy() == data.classes.take(np.asarray(data.truth))))


def synthetic(out) -> pd.DataFrame:
    rows = []
    t0 = time.time()
    for (scen, seed), data in crowds().items():
        for name, make in CONFIGS.items():
            rows.append({"scenario": scen, "seed": seed, "config": name, "acc": _acc_planted(make(), data)})
        out(f"  {scen} seed {seed} done ({time.time() - t0:.0f}s)")
    df = pd.DataFrame(rows)
    df["regret"] = df.groupby(["scenario", "seed"])["acc"].transform("max") - df["acc"]
    table = 100 * df.pivot_table(index="config", columns="scenario", values="acc", aggfunc="mean")
    table = table[list(SCENARIOS)].reindex(list(CONFIGS))
    table["mean"] = 100 * df.groupby("config")["acc"].mean()
    table["worst regret"] = 100 * df.groupby("config")["regret"].max()
    best = table["mean"].max()
    close = table[table["mean"] >= best - 0.1]
    chosen = close["worst regret"].idxmin()
    md = (
        f"#### Candidate defaults on simulated crowds (accuracy %, mean over {df['seed'].nunique()} seeds; "
        f"{time.time() - t0:.0f}s)\n\n" + markdown_table(table, floatfmt=".2f")
        + f"\n\nChosen by the rule above: **{chosen}**."
    )
    out(md)
    return md


def real(root: Path, out) -> str:
    ck = json.loads(CK_JSON.read_text()) if CK_JSON.exists() else {}
    rows = {}
    t0 = time.time()
    for name in categorical_datasets(root):
        data = load_folder(root / name)
        r = {}
        for cfg, make in CONFIGS.items():
            est = make().fit(data)
            r[cfg] = gold_accuracy(est.labels_, data)
            if cfg == "auto":
                r["auto chose"] = est.chosen_
        cand = {m: gold_accuracy(get_method(m)().fit(data).labels_, data) for m in DEFAULT_CANDIDATES}
        top = max(cand, key=cand.get)
        r["gold-chosen best"] = f"{cand[top]:.4f} ({top})"
        accs = {k: v["accuracy"] for k, v in ck.get(name, {}).items() if v.get("accuracy") is not None}
        if accs:
            ck_top = max(accs, key=accs.get)
            r["crowd-kit best"] = f"{accs[ck_top]:.4f} ({ck_top})"
            r["bar"] = max(accs[ck_top] - 0.005, r["ds"] - 0.003)
        else:
            r["crowd-kit best"] = ""
            r["bar"] = r["ds"] - 0.003
        rows[name] = r
        out(f"  {name} done ({time.time() - t0:.0f}s)")
    df = pd.DataFrame(rows).T
    for cfg in CONFIGS:
        if cfg != "ds":
            df[f"{cfg} ok"] = np.where(df[cfg].astype(float) >= df["bar"].astype(float) - 1e-12, "yes", "**no**")
    cols = list(CONFIGS) + ["auto chose", "gold-chosen best", "crowd-kit best", "bar"] + [f"{c} ok" for c in CONFIGS if c != "ds"]
    df = df[cols]
    passed = {c: int((df[f"{c} ok"] == "yes").sum()) for c in CONFIGS if c != "ds"}
    md = (
        "#### Gold accuracy of the candidate defaults; bar = max(crowd-kit best - 0.5 points, ds - 0.3 points)\n\n"
        + markdown_table(df)
        + "\n\nSets meeting the bar (of " + str(len(df)) + "): "
        + ", ".join(f"{c} {n}" for c, n in passed.items())
        + f". ({time.time() - t0:.0f}s)"
    )
    out(md)
    return md


#: the crowds of ``--timing``: (label, tasks, workers, classes); 5 answers per task, workers
#: 50-90% accurate.  The first is the crowd of the section's earlier runs; the others vary
#: the class count at 10^4 workers, where the per-worker cost of EM (O(workers x K^2) per
#: iteration for the confusion-matrix candidates) is largest
TIMING_CROWDS = (
    ("2,000 workers, 4 classes", 200_000, 2000, 4),
    ("10^4 workers, 2 classes", 200_000, 10_000, 2),
    ("10^4 workers, 5 classes", 200_000, 10_000, 5),
    ("10^4 workers, 10 classes", 200_000, 10_000, 10),
)


def timing(out) -> str:
    rows = []
    for label, n_tasks, n_workers, k in TIMING_CROWDS:
        data = simulate.dawid_skene(n_tasks, n_workers, k, labels_per_task=5, accuracy=(0.5, 0.9), seed=0)
        configs = [("auto", lambda: AutoAggregator())]
        if not rows:  # selection alone once, for its cost against stacking's refits
            configs.append(("auto[select]", lambda: AutoAggregator(combine="select")))
        for name, make in configs:
            t0, c0 = time.time(), time.process_time()
            est = make().fit(data)
            rows.append({"crowd": label, "config": name, "answers": data.n_labels, "wall s": time.time() - t0,
                         "cpu s": time.process_time() - c0, "chose": est.chosen_})
            out(str(rows[-1]))
    df = pd.DataFrame(rows).set_index("crowd")
    md = ("#### `auto` at 10^6 answers (200,000 tasks x 5 answers, workers 50-90% accurate; one core; "
          "`chose`: the largest stacking weight, or the selected method)\n\n" + markdown_table(df, floatfmt=".1f"))
    out(md)
    return md


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-root", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--synthetic", action="store_true")
    ap.add_argument("--real", action="store_true")
    ap.add_argument("--timing", action="store_true")
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)

    def out(s: str) -> None:
        print(s, flush=True)

    cmd = "OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/model_choice.py " + " ".join(
        f"--{k}" for k in ("synthetic", "real", "timing") if getattr(args, k))
    if args.synthetic:
        md = synthetic(out)
        if args.write_results:
            write_section("model-choice-synthetic", md, cmd + " --write-results")
    if args.real:
        md = real(args.data_root, out)
        if args.write_results:
            write_section("model-choice-real", md, cmd + " --write-results")
    if args.timing:
        md = timing(out)
        if args.write_results:
            write_section("model-choice-time", md, cmd + " --write-results")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
