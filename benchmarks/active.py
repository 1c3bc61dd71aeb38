"""Budget curves of active labelling strategies replayed on recorded crowds (issue 17, item 3).

For each dataset and strategy, :func:`crowdlearn.active.replay` starts from one random answer
per task and reveals a tenth of the number of tasks per round (only answers that were really
given; with a worker strategy, the chosen worker's), refitting ``ds`` each round.  Reported
over ``--seeds`` seeds (mean and standard deviation): the area under the accuracy-vs-labels
curve (mean accuracy over the label range), and the share of all answers needed to come
within 1 point of ``ds`` fitted on every answer.  ``--plot PATH`` draws the mean curves
(matplotlib).

``--synthetic`` replays the worker-choosing strategies on simulated crowds instead (planted
truth; every task answered by 10 of 50 workers; section ``active-worker-synthetic``): the
default worker strategy of ``crowdlearn next --workers`` is chosen there, not on the recorded
sets above.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/active.py [--datasets dog bluebirds] [--seeds 10] [--plot benchmarks/results/active_budget.png] [--write-results]
    OMP_NUM_THREADS=1 python benchmarks/active.py --synthetic [--seeds 5] [--write-results]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_md import markdown_table, write_section  # noqa: E402

from crowdlearn.active import budget_summary, replay  # noqa: E402
from crowdlearn.benchmarking import gold_accuracy  # noqa: E402
from crowdlearn.core.io import load_folder  # noqa: E402
from crowdlearn.registry import get_method  # noqa: E402
from crowdlearn.simulate import WorkerSpec, crowd  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data"

#: (task strategy, worker strategy)
STRATEGIES = [("random", None), ("entropy", None), ("margin", None), ("eig", None), ("eig", "ucb"), ("eig", "thompson"),
              ("eig", "eig"), ("eig", "eig-thompson"), ("kg", None), ("kg", "eig")]

#: worker rules compared on simulated crowds (task strategy ``eig`` for all)
WORKER_RULES = [None, "greedy", "epsilon", "ucb", "thompson", "eig", "eig-thompson"]


def synthetic_scenarios():
    """Simulated crowds where choosing the worker can matter: name -> (n_classes, worker groups)."""
    return {
        "hammers and spammers (K=2)": (2, [WorkerSpec.hammer(15, (0.85, 0.95)), WorkerSpec.spammer(35)]),
        "graded skills (K=2)": (2, [WorkerSpec.one_coin(50, (0.5, 0.9))]),
        "class-dependent skills (K=4)": (4, [WorkerSpec.diligent(40, (0.4, 0.9)), WorkerSpec.spammer(10)]),
        "mostly good, few bad (K=3)": (3, [WorkerSpec.one_coin(40, (0.7, 0.9)),
                                           WorkerSpec.fixed_class(10)]),
    }


def run_synthetic(args) -> str:
    """Worker rules replayed on simulated crowds (gold = the planted truth)."""
    rows = []
    t0 = time.time()
    for name, (k, groups) in synthetic_scenarios().items():
        for rule in WORKER_RULES:
            sums = []
            for seed in range(args.seeds):
                data = crowd(400, k, groups, labels_per_task=10, seed=1000 + seed)
                target = gold_accuracy(get_method("ds")().fit(data).labels_, data)
                sums.append(budget_summary(replay(data, "eig", rule, random_state=seed), target))
            s = pd.DataFrame(sums)
            rows.append({"scenario": name, "worker rule": rule or "(none: random answerer)",
                         "AUC mean": s["auc"].mean(), "AUC sd": s["auc"].std(),
                         "share of answers to within 1 pt of ds": s["share_of_answers"].mean(),
                         "seeds reaching it": int(s["share_of_answers"].notna().sum())})
            print(f"{name} {rule}: AUC {s['auc'].mean():.4f} share {s['share_of_answers'].mean():.3f} "
                  f"({time.time() - t0:.0f}s)", flush=True)
    table = pd.DataFrame(rows)
    mean = table.groupby("worker rule", sort=False)["AUC mean"].mean().rename("mean AUC over scenarios")
    return (f"#### Worker rules on simulated crowds (task strategy eig; 400 tasks, 10 of 50 workers per "
            f"task; {args.seeds} seeds; ds refit each round; {time.time() - t0:.0f}s)\n\n"
            + markdown_table(table, index=False) + "\n\n" + markdown_table(mean.reset_index(), index=False))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-root", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--datasets", nargs="+", default=["dog", "bluebirds"])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--plot", type=Path, default=None)
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument("--synthetic", action="store_true", help="worker rules on simulated crowds")
    ap.add_argument("--round", type=float, default=0.1,
                    help="tasks asked per round, as a share of the tasks (default 0.1, replay's default)")
    ap.add_argument("--strategies", nargs="+", default=None,
                    help="subset of the strategies, as labelled in the table (e.g. random eig+eig)")
    args = ap.parse_args(argv)
    if args.synthetic:
        md = run_synthetic(args)
        print(md)
        if args.write_results:
            write_section("active-worker-synthetic", md,
                          f"OMP_NUM_THREADS=1 python benchmarks/active.py --synthetic --seeds {args.seeds} --write-results")
        return 0
    rows, curves = [], {}
    t0 = time.time()
    for name in args.datasets:
        data = load_folder(args.data_root / name)
        target = gold_accuracy(get_method("ds")().fit(data).labels_, data)
        for task_s, worker_s in STRATEGIES:
            label = task_s + (f"+{worker_s}" if worker_s else "")
            if args.strategies and label not in args.strategies:
                continue
            sums, cs = [], []
            for seed in range(args.seeds):
                c = replay(data, task_s, worker_s, step=max(1, int(args.round * data.n_tasks)),
                           random_state=seed)
                sums.append(budget_summary(c, target))
                cs.append(c)
            s = pd.DataFrame(sums)
            curves[(name, label)] = cs
            rows.append({"dataset": name, "strategy": label, "ds on all answers": target,
                         "AUC mean": s["auc"].mean(), "AUC sd": s["auc"].std(),
                         "share of answers to within 1 pt (mean)": s["share_of_answers"].mean(),
                         "sd": s["share_of_answers"].std(),
                         "seeds reaching it": int(s["share_of_answers"].notna().sum())})
            print(f"{name} {label}: AUC {s['auc'].mean():.4f} share {s['share_of_answers'].mean():.3f} "
                  f"({time.time() - t0:.0f}s)", flush=True)
    table = pd.DataFrame(rows).set_index(["dataset", "strategy"])
    md = (f"#### Active labelling replayed on recorded answers ({args.seeds} seeds; rounds of "
          f"{args.round:.0%} of the tasks; ds refit each round; "
          f"{time.time() - t0:.0f}s)\n\n" + markdown_table(table.reset_index(), index=False))
    print(md)
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(args.datasets), figsize=(6 * len(args.datasets), 4))
        for ax, name in zip(np.atleast_1d(axes), args.datasets):
            for (dname, label), cs in curves.items():
                if dname != name:
                    continue
                grid = cs[0]["labels"].to_numpy()
                acc = np.mean([np.interp(grid, c["labels"], c["accuracy"]) for c in cs], axis=0)
                ax.plot(grid, acc, label=label)
            ax.axhline(table.loc[(name, "random"), "ds on all answers"], color="k", ls=":", label="ds, all answers")
            ax.set_title(name)
            ax.set_xlabel("answers revealed")
            ax.set_ylabel("accuracy")
            ax.legend(fontsize=7)
        fig.tight_layout()
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.plot, dpi=90)
        md += f"\n\nCurves: `{args.plot.relative_to(HERE.parent) if args.plot.is_absolute() else args.plot}`."
    if args.write_results:
        default_run = args.round == 0.1 and not args.strategies
        cmd = "OMP_NUM_THREADS=1 python benchmarks/active.py " + " ".join(
            ["--datasets", *args.datasets, "--seeds", str(args.seeds)]
            + ([] if default_run else ["--round", str(args.round), "--strategies", *(args.strategies or [])])
            + (["--plot", str(args.plot)] if args.plot else []) + ["--write-results"])
        # other round sizes or a subset of the strategies get their own section
        write_section("active-budget" if default_run else "active-budget-rounds", md, cmd)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
