"""Continuous answers: every registered continuous method on the real sets, on synthetic
crowds, and its time at 10^6 answers.

Three tables, each written to its own RESULTS.md section with ``--write-results``:

* ``continuous-accuracy``: MAE, RMSE, Pearson and Spearman against the gold on
  ``snow_emotion`` (700 tasks, 38 workers), ``movie_reviews`` (the 1,500 training reviews
  with crowd answers; the 3,506 test reviews have no answers) and ``snow_wordsim`` (gold on a
  0-4 scale against answers on 0-10: correlations only).  Every method with its defaults.
* ``continuous-synthetic``: MAE against the planted truth on
  :func:`crowdlearn.simulate.continuous.continuous_crowd` crowds (1,000 tasks, 50 workers,
  5 answers per task, 100 per worker), mean over seeds, in three scenarios; the rows
  ``gaussian-em (scale=False)`` and ``catd (residuals=in-sample)`` document the choice of
  ``GaussianEM``'s and ``CATD``'s defaults.
* ``continuous-speed``: process CPU seconds of one fit at 10^5 and 10^6 answers (5 answers
  per task, 2,000 workers), after building the table, and per answer and round.  The Crowd Layer head
  (``crowd-layer-regression``, a torch network on item features) is timed separately, on
  the same answers with 16 synthetic features.
* ``continuous-crowd-layer``: end-to-end learning on ``movie_reviews``: the Crowd Layer
  regression heads S, B, S+B (linear and MLP backbones) trained on the 1,500 training reviews'
  answers and their bag-of-words (LSA, 50 dimensions), scored on the 3,506 test reviews,
  which have no answers, beside two-stage baselines (a ridge regression, penalty chosen by
  leave-one-out, trained on the mean or the gaussian-em estimates of the training reviews).

Usage::

    python benchmarks/continuous.py [--write-results] [--seeds 3] [--speed-answers 100000 1000000]
        [--skip-speed] [--skip-crowd-layer]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from results_md import markdown_table, write_section  # noqa: E402

import crowdlearn  # noqa: E402
from crowdlearn.core.base import get_tags  # noqa: E402
from crowdlearn.datasets import load as load_folder  # noqa: E402
from crowdlearn.diagnostics.continuous_metrics import continuous_scores  # noqa: E402
from crowdlearn.simulate.continuous import continuous_crowd  # noqa: E402

#: the real data sets: $CROWDLEARN_SHARED_DATA, else ../shared/data beside the checkout (as
#: crowdlearn.datasets looks; a worktree's checkout has no such sibling)
DATA = Path(os.environ.get("CROWDLEARN_SHARED_DATA") or HERE.parent.parent / "shared" / "data")
#: methods on answers alone (the end-to-end heads need features: their own table)
METHODS = [name for name, cls in crowdlearn.methods(kind="continuous").items()
           if not get_tags(cls).requires_features]
REAL = {"snow_emotion": True, "movie_reviews": True, "snow_wordsim": False}  # absolute scale?
SCENARIOS = {
    "unit scales, bias +-0.5, noise 0.2-1.5": dict(),
    "scales 0.6-1.4": dict(scale=(0.6, 1.4)),
    "scales 0.6-1.4, 20% spammers": dict(scale=(0.6, 1.4), spammers=0.2),
}


def _variants():
    for name in METHODS:
        yield name, crowdlearn.get_method(name)()
    yield "gaussian-em (scale=False)", crowdlearn.get_method("gaussian-em")(scale=False)
    yield "catd (residuals=in-sample)", crowdlearn.get_method("catd")(residuals="in-sample")


REFERENCE = "(reference) worker model fitted on the gold"


def gold_fitted_weighting(data) -> pd.Series:
    """Each task's answers combined with per-worker bias and noise fitted on the gold (all
    tasks): ``sum_w (x - b_w) / s_w^2 / sum_w 1 / s_w^2``.  Uses the gold; a bound, not a
    method."""
    em = crowdlearn.get_method("gaussian-em")(scale=False).fit(data, gold=data.truth_series())
    b = em.worker_bias_.to_numpy()
    prec_w = 1.0 / em.worker_noise_.to_numpy() ** 2
    w = data.worker
    num = np.bincount(data.task, prec_w[w] * (data.value - b[w]), minlength=data.n_tasks)
    den = np.bincount(data.task, prec_w[w], minlength=data.n_tasks)
    return pd.Series(num / den, index=data.tasks)


def accuracy_table() -> str:
    rows = []
    for set_name, absolute in REAL.items():
        folder = DATA / set_name
        if not (folder / "labels.csv").exists():
            print(f"skipping {set_name}: {folder} missing", file=sys.stderr)
            continue
        data = load_folder(folder, kind="continuous")
        for name in METHODS:
            t0 = time.process_time()
            est = crowdlearn.get_method(name)().fit(data)
            cpu = time.process_time() - t0
            s = continuous_scores(est, data)
            rows.append({"set": set_name, "method": name,
                         "MAE": s["mae"] if absolute else np.nan,
                         "RMSE": s["rmse"] if absolute else np.nan,
                         "Pearson": s["pearson"], "Spearman": s["spearman"],
                         "fit s": cpu})
        if absolute:
            s = continuous_scores(gold_fitted_weighting(data), data)
            rows.append({"set": set_name, "method": REFERENCE, "MAE": s["mae"], "RMSE": s["rmse"],
                         "Pearson": s["pearson"], "Spearman": s["spearman"], "fit s": np.nan})
    df = pd.DataFrame(rows)
    parts = [f"`{REFERENCE}`: not a method but a bound of what worker weighting can give "
             "under the Gaussian model: bias and noise of every worker fitted *on the gold* "
             "(`gaussian-em`, scale=False, all tasks clamped), then each task's answers "
             "combined with those parameters, in sample."]
    for set_name, block in df.groupby("set", sort=False):
        methods = block[block["method"] != REFERENCE]
        best = methods.loc[methods["MAE"].idxmin(), "method"] if methods["MAE"].notna().any() else None
        note = f" (lowest MAE: {best})" if best else " (gold on another scale: correlations only)"
        parts.append(f"**{set_name}**{note}\n\n"
                     + markdown_table(block.drop(columns="set").set_index("method"), floatfmt=".4f"))
    return "\n\n".join(parts)


def synthetic_table(seeds: int) -> str:
    out = {}
    for label, kw in SCENARIOS.items():
        maes: dict[str, list[float]] = {}
        for seed in range(seeds):
            data, _ = continuous_crowd(1000, 50, 5, seed=seed, **kw)
            for name, est in _variants():
                maes.setdefault(name, []).append(continuous_scores(est.fit(data), data)["mae"])
        out[label] = {name: float(np.mean(v)) for name, v in maes.items()}
    df = pd.DataFrame(out)
    df.index.name = "method"
    return (f"MAE against the planted truth (truth sd 1), mean of {seeds} seeds; 1,000 tasks, "
            "50 workers, 5 answers per task (regular design, 100 answers per worker).\n\n"
            + markdown_table(df, floatfmt=".4f"))


def speed_table(sizes: list[int]) -> str:
    rows = []
    for n_answers in sizes:
        rows.extend(_speed_rows(n_answers))
    df = pd.DataFrame(rows).set_index("method")
    return ("One fit per method and size (tasks x 5 answers, 2,000 workers, random design, "
            "scales 0.6-1.4, 10% spammers), defaults, one core; the table built before the "
            "clock starts.  Time per answer roughly constant from one size to the next: linear "
            "in the answers.\n\n" + markdown_table(df, floatfmt=".2f"))


def _speed_rows(n_answers: int) -> list[dict]:
    per_task = 5
    n_tasks = n_answers // per_task
    data, _ = continuous_crowd(n_tasks, 2000, per_task, assignment="random", seed=0,
                               scale=(0.6, 1.4), spammers=0.1)
    rows = []
    for name in METHODS:
        est = crowdlearn.get_method(name)()
        t0, w0 = time.process_time(), time.perf_counter()
        est.fit(data)
        rows.append({"method": name, "answers": data.n_answers, "cpu s": time.process_time() - t0,
                     "wall s": time.perf_counter() - w0, "rounds": est.n_iter_,
                     "converged": est.converged_})
    feats, _ = continuous_crowd(n_tasks, 2000, per_task, assignment="random", seed=0,
                                scale=(0.6, 1.4), spammers=0.1, n_features=16)
    est = crowdlearn.get_method("crowd-layer-regression")(backbone="linear", epochs=10,
                                                          batch_size=1024)
    t0, w0 = time.process_time(), time.perf_counter()
    est.fit(feats)
    rows.append({"method": "crowd-layer-regression (linear, 10 epochs, batch 1024)",
                 "answers": feats.n_answers, "cpu s": time.process_time() - t0,
                 "wall s": time.perf_counter() - w0, "rounds": est.n_iter_,
                 "converged": est.converged_})
    for row in rows:
        row["cpu us / answer / round"] = 1e6 * row["cpu s"] / row["answers"] / max(row["rounds"], 1)
    return rows


def crowd_layer_table() -> str | None:
    from sklearn.linear_model import RidgeCV
    from sklearn.preprocessing import StandardScaler

    from crowdlearn.continuous.data import ContinuousAnswers
    from crowdlearn.continuous.features import read_ldac, text_features
    from crowdlearn.core.tables import read_table

    folder = DATA / "movie_reviews"
    if not (folder / "bow.txt").exists():
        print(f"skipping the Crowd Layer table: {folder} missing", file=sys.stderr)
        return None
    tasks = read_table(folder / "tasks.csv")["task"].to_numpy()  # row order of bow.txt
    feats = pd.DataFrame(text_features(read_ldac(folder / "bow.txt"), 50), index=tasks)
    truth = read_table(folder / "truth.csv").set_index("task")["truth"]
    data = ContinuousAnswers.from_frame(read_table(folder / "labels.csv"), all_tasks=tasks,
                                        features=feats, truth=truth)
    test = data.labels_per_task() == 0
    gold = data.truth[test]

    def row(label, pred, seconds):
        err = pred - gold
        return {"model": label, "test MAE": float(np.mean(np.abs(err))),
                "test RMSE": float(np.sqrt(np.mean(err**2))),
                "test Pearson": float(np.corrcoef(pred, gold)[0, 1]), "fit s": seconds}

    rows = []
    z = StandardScaler().fit(data.features[~test]).transform(data.features)
    for base in ("mean", "gaussian-em"):
        t0 = time.process_time()
        target = crowdlearn.get_method(base)().fit(data).estimates_.to_numpy()
        ridge = RidgeCV(alphas=np.logspace(-2, 4, 13)).fit(z[~test], target[~test])
        rows.append(row(f"two-stage: ridge on {base}", ridge.predict(z[test]),
                        time.process_time() - t0))
    for mode in ("S", "B", "S+B"):
        for backbone in ("linear", None):
            t0 = time.process_time()
            est = crowdlearn.get_method("crowd-layer-regression")(mode=mode, backbone=backbone)
            est.fit(data)
            rows.append(row(f"crowd layer {mode} ({backbone or 'mlp'})",
                            est.estimates_.to_numpy()[test], time.process_time() - t0))
    df = pd.DataFrame(rows).set_index("model")
    return ("movie_reviews: trained on the 1,500 training reviews (answers + LSA-50 features of "
            "bow.txt), scored on the 3,506 test reviews (no answers; gold ratings in [0, 1]). "
            "Defaults of the trainer (Adam, lr 1e-3, batch 64, 10% held out for early "
            "stopping on the crowd criterion, refit), seed 0, one torch thread.\n\n"
            + markdown_table(df, floatfmt=".4f"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--write-results", action="store_true")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--speed-answers", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--skip-speed", action="store_true")
    p.add_argument("--skip-crowd-layer", action="store_true")
    args = p.parse_args()
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        args.skip_crowd_layer = True
    acc = accuracy_table()
    print(acc, "\n")
    syn = synthetic_table(args.seeds)
    print(syn, "\n")
    speed = None if args.skip_speed else speed_table(args.speed_answers)
    if speed:
        print(speed, "\n")
    layer = None if args.skip_crowd_layer else crowd_layer_table()
    if layer:
        print(layer)
    if args.write_results:
        if layer:
            write_section("continuous-crowd-layer", layer)
        write_section("continuous-accuracy", acc)
        write_section("continuous-synthetic", syn)
        if speed:
            write_section("continuous-speed", speed)


if __name__ == "__main__":
    main()
