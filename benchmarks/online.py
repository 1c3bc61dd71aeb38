"""Online EM (``DawidSkene.partial_fit``, ``GLAD.partial_fit``) against the batch fit (issue 17, item 1).

``--real``: every categorical set of ../shared/data, answers shuffled and fed in 10 batches
(one pass): accuracy of the streamed posteriors (each task's evidence scored with the
parameters of its time) and of the final parameters re-scoring all answers
(``predict``), against batch ``ds``.  ``--speed``: a 10^7-answer stream in batches of 10^5
against one batch fit (time per answer; its own section, ``online-em-speed``).  ``--tune``: the grid on simulated crowds that chose
the defaults of ``partial_fit``.  ``--batches``: how the one-pass gap grows with the number of
batches the same answers are cut into, on simulated crowds (its own section,
``online-em-batches``).  ``--ceiling``: a reference for any method that keeps per-task evidence
instead of the answers (its own section, ``online-em-ceiling``): each batch's answers are scored
with a *batch* fit on every answer seen so far (unbounded memory for learning) and frozen, as a
one-pass method must.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/online.py --tune --real [--speed] [--write-results]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_md import markdown_table, write_section  # noqa: E402
from tune_defaults import crowds  # noqa: E402

from crowdlearn import GLAD, DawidSkene, get_method, simulate  # noqa: E402
from crowdlearn.core.data import CrowdLabels  # noqa: E402
from crowdlearn.benchmarking import categorical_datasets, gold_accuracy  # noqa: E402
from crowdlearn.core.io import load_folder  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data"


def stream(data, n_batches=10, seed=0, method=DawidSkene, **kw):
    frame = data.to_frame().sample(frac=1.0, random_state=seed)
    est = method()
    for part in np.array_split(np.arange(len(frame)), n_batches):
        est.partial_fit(frame.iloc[part], classes=list(data.classes), **kw)
    return est


#: statistics variants of the tuning grid: label -> partial_fit keywords
STATISTICS = {"plain": {"leave_one_out": False}, "loo, anchor 2": {"anchor": 2.0},
              "loo, anchor 5": {"anchor": 5.0}, "loo, anchor 20": {"anchor": 20.0}}


def tune(seeds=(0, 1)) -> str:
    """The grid that chose the defaults of ``partial_fit``: statistics (plain stepwise or
    leave-one-out with its anchor) x alpha x t0 x inner rounds, on the simulated crowds of
    ``tune_defaults.py``; the criterion is the mean of the streamed and the final-parameter
    gaps to batch ``ds`` (the posteriors a stream publishes, and the worker model it leaves)."""
    rows = []
    for (scen, seed), d in crowds(seeds=seeds).items():
        truth = d.classes.take(d.truth)
        batch = np.mean(DawidSkene().fit(d).labels_.to_numpy() == truth)
        for (stats, kw), power, offset, inner in itertools.product(STATISTICS.items(), [0.8, 1.0], [1.0, 4.0],
                                                                   [2, 3, 5]):
            est = stream(d, seed=seed, step_power=power, step_offset=offset, inner_iter=inner, **kw)
            acc = np.mean(est.labels_.reindex(d.tasks).to_numpy() == truth)
            final = np.mean(est.predict(d).reindex(d.tasks).to_numpy() == truth)
            rows.append({"statistics": stats, "alpha": power, "t0": offset, "inner_iter": inner, "scenario": scen,
                         "gap": 100 * (acc - batch), "final gap": 100 * (final - batch)})
    df = pd.DataFrame(rows)
    keys = ["statistics", "alpha", "t0", "inner_iter"]
    table = df.pivot_table(index=keys, columns="scenario", values="gap")
    table["streamed mean"] = table.mean(axis=1)
    table["final mean"] = df.pivot_table(index=keys, values="final gap")["final gap"]
    table["criterion"] = (table["streamed mean"] + table["final mean"]) / 2
    table = table.sort_values("criterion", ascending=False)
    return (f"#### Streamed accuracy minus batch `ds` (points) on simulated crowds, one pass in 10 batches, "
            f"mean of {len(seeds)} seeds; `final mean`: the final parameters re-scoring every answer; sorted by "
            f"the mean of the two\n\n" + markdown_table(table.reset_index(), floatfmt=".2f", index=False))


def real(root: Path) -> str:
    parts = []
    for method in (DawidSkene, GLAD):
        rows = []
        for name in categorical_datasets(root):
            d = load_folder(root / name)
            batch = gold_accuracy(method().fit(d).labels_, d)
            est = stream(d, method=method)
            rows.append({"dataset": name, "batch": batch,
                         "streamed": gold_accuracy(est.labels_.reindex(d.tasks), d),
                         "final parameters": gold_accuracy(est.predict(d), d)})
        df = pd.DataFrame(rows)
        df["streamed - batch (points)"] = 100 * (df["streamed"] - df["batch"])
        df["final - batch (points)"] = 100 * (df["final parameters"] - df["batch"])
        ok = int((df["streamed - batch (points)"] >= -0.5).sum())
        label = "ds" if method is DawidSkene else "glad"
        parts.append(f"#### `{label}`: one pass in 10 shuffled batches vs the batch fit (gold accuracy)\n\n"
                     + markdown_table(df, floatfmt=".4f", index=False)
                     + f"\n\nStreamed within 0.5 points of batch on {ok} of {len(df)} sets.")
    return "\n\n".join(parts)


def speed(n_answers: int = 10_000_000, batch: int = 100_000) -> str:
    """The acceptance case: a 10^7-answer stream (shuffled) in batches of 10^5 against one
    batch fit of the same answers, CPU seconds on one core; the default statistics and plain
    stepwise EM (``leave_one_out=False``), in one run.

    The stream reads DataFrame batches, so its time includes turning each into codes.  The
    batch fit is timed on the same DataFrame (the like-for-like ratio: both start from the
    same answers) and on a prepared :class:`CrowdLabels` (parsing excluded for the batch fit
    only); both ratios are reported.
    """
    data = simulate.dawid_skene(n_answers // 5, n_answers // 100, 4, labels_per_task=5, seed=0)
    frame = data.to_frame().sample(frac=1.0, random_state=0)
    DawidSkene().fit(data.subset(tasks=data.tasks[:1000]))  # numba loaded before any timing
    t0 = time.process_time()
    DawidSkene().fit(frame)
    t_frame = time.process_time() - t0
    t0 = time.process_time()
    DawidSkene().fit(data)
    t_table = time.process_time() - t0
    rows = []
    for label, kw in (("default (leave-one-out)", {}), ("leave_one_out=False", {"leave_one_out": False})):
        t0 = time.process_time()
        est = DawidSkene()
        for i in range(0, len(frame), batch):
            est.partial_fit(frame.iloc[i:i + batch], classes=list(data.classes), **kw)
        t_stream = time.process_time() - t0
        rows.append({"partial_fit": label, "answers": data.n_labels, "workers": data.n_workers,
                     "tasks": data.n_tasks, f"stream ({len(frame) // batch} batches) s": t_stream,
                     "batch fit (DataFrame) s": t_frame, "ratio": t_stream / t_frame,
                     "batch fit (CrowdLabels) s": t_table, "ratio to CrowdLabels fit": t_stream / t_table})
    return (f"#### {n_answers:.0e} answers, shuffled, one pass in batches of {batch:,} against one batch fit "
            "(CPU seconds, one core)\n\nThe stream reads DataFrame batches; `ratio` compares it with the batch "
            "fit of the same answers as one DataFrame, `ratio to CrowdLabels fit` with the batch fit of an "
            "already-coded table (whose parsing is then not timed).\n\n"
            + markdown_table(pd.DataFrame(rows), floatfmt=".2f", index=False))


def batches(n_batches=(1, 2, 5, 10), seeds=(0, 1, 2)) -> str:
    """Streamed and final-parameter accuracy minus batch ``ds`` when one shuffled pass is cut
    into 1 to 10 batches (1 batch = the batch E-step/M-step rounds of ``partial_fit`` on all
    answers at once)."""
    rows = []
    for (scen, seed), d in crowds(seeds=seeds).items():
        truth = d.classes.take(d.truth)
        batch = np.mean(DawidSkene().fit(d).labels_.to_numpy() == truth)
        for nb in n_batches:
            est = stream(d, n_batches=nb, seed=seed)
            rows.append({"scenario": scen, "batches": nb,
                         "streamed": 100 * (np.mean(est.labels_.reindex(d.tasks).to_numpy() == truth) - batch),
                         "final parameters": 100 * (np.mean(est.predict(d).reindex(d.tasks).to_numpy() == truth) - batch)})
    df = pd.DataFrame(rows)
    table = df.pivot_table(index="batches", columns="scenario", values="streamed")
    table["mean"] = table.mean(axis=1)
    final = df.pivot_table(index="batches", columns="scenario", values="final parameters")
    final["mean"] = final.mean(axis=1)
    return (f"#### One pass cut into more batches: streamed accuracy minus batch `ds` (points), simulated crowds, "
            f"mean of {len(seeds)} seeds\n\n" + markdown_table(table.reset_index(), floatfmt=".2f", index=False)
            + "\n\n#### The same, final parameters re-scoring every answer (`predict`)\n\n"
            + markdown_table(final.reset_index(), floatfmt=".2f", index=False))


#: the learners of the ceiling: batch fits on every answer seen so far
CEILING_LEARNERS = {"ds": lambda: DawidSkene(), "ds (alpha=1)": lambda: DawidSkene(alpha=1.0),
                    "hds": lambda: get_method("hds")()}


def frozen_evidence_labels(data, learner, n_batches=10, seed=0) -> pd.Series:
    """Labels of a one-pass stream whose learner is a batch fit on all answers seen so far:
    each batch's answers are scored with the fit of their time, and that evidence is frozen."""
    frame = data.to_frame().sample(frac=1.0, random_state=seed)
    parts = np.array_split(np.arange(len(frame)), n_batches)
    evidence = np.zeros((data.n_tasks, data.n_classes))
    for i, part in enumerate(parts):
        seen = CrowdLabels.from_frame(frame.iloc[np.concatenate(parts[:i + 1])], classes=list(data.classes))
        est = learner().fit(seen)
        log_conf = np.log(np.clip(est.confusions_, 1e-300, None))  # [worker, true, answered]
        rows = frame.iloc[part]
        np.add.at(evidence, data.tasks.get_indexer(rows["task"]),
                  log_conf[est.workers_.get_indexer(rows["worker"]), :, data.classes.get_indexer(rows["label"])])
        log_prior = np.log(est.priors_.reindex(data.classes).to_numpy())
    return pd.Series(data.classes.take((evidence + log_prior).argmax(axis=1)), index=data.tasks)


def ceiling(root: Path) -> str:
    rows = []
    for name in categorical_datasets(root):
        d = load_folder(root / name)
        batch = gold_accuracy(DawidSkene().fit(d).labels_, d)
        row = {"dataset": name, "batch ds": batch,
               "partial_fit": gold_accuracy(stream(d).labels_.reindex(d.tasks), d) - batch}
        for label, learner in CEILING_LEARNERS.items():
            row[f"frozen, {label} fits"] = gold_accuracy(frozen_evidence_labels(d, learner), d) - batch
        rows.append(row)
        print(name, flush=True)
    df = pd.DataFrame(rows)
    gaps = [c for c in df.columns if c.startswith("frozen")]
    df["best frozen"] = df[gaps].max(axis=1)
    for c in ["partial_fit", *gaps, "best frozen"]:
        df[c] = 100 * df[c]
    df["batch ds"] = df["batch ds"].map(lambda a: f"{a:.4f}")
    ok = int((df["best frozen"] >= -0.5).sum())
    return ("#### Accuracy minus batch `ds` (points) of one pass in 10 shuffled batches whose per-task evidence is "
            "scored with a batch fit on all answers seen so far, then frozen\n\n"
            + markdown_table(df, floatfmt=".2f", index=False)
            + f"\n\nThe best of the three learners is within 0.5 points of batch `ds` on {ok} of {len(df)} sets.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-root", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--tune", action="store_true")
    ap.add_argument("--real", action="store_true")
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--batches", action="store_true")
    ap.add_argument("--ceiling", action="store_true")
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)
    parts = []
    if args.tune:
        parts.append(tune())
    if args.real:
        parts.append(real(args.data_root))
    if args.speed:
        table = speed()
        print(table)
        if args.write_results:
            write_section("online-em-speed", table,
                          "OMP_NUM_THREADS=1 python benchmarks/online.py --speed --write-results")
    if args.batches:
        sweep = batches()
        print(sweep)
        if args.write_results:
            write_section("online-em-batches", sweep,
                          "OMP_NUM_THREADS=1 python benchmarks/online.py --batches --write-results")
    if args.ceiling:
        table = ceiling(args.data_root)
        print(table)
        if args.write_results:
            write_section("online-em-ceiling", table,
                          "OMP_NUM_THREADS=1 python benchmarks/online.py --ceiling --write-results")
    md = "\n\n".join(parts)
    if md:
        print(md)
    if args.write_results and parts:
        flags = " ".join(f"--{k}" for k in ("tune", "real") if getattr(args, k))
        write_section("online-em", md, f"OMP_NUM_THREADS=1 python benchmarks/online.py {flags} --write-results")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
