"""Ordinal methods against categorical aggregators: trec2010, simulated crowds, time at 10^6.

Sections of RESULTS.md written with ``--write-results``:

* ``ordinal-trec2010``: graded relevance (0 < 1 < 2) of ../shared/data/trec2010; the
  answers "-2" (broken link, never the truth; SOURCE.md) are dropped, every method fits the
  same 91,783 answers; accuracy, MAE in classes (of ``labels_``, and of the posterior
  median, the decision that minimises the expected absolute error), quadratic-weighted
  kappa on the 3,277 gold tasks; Krippendorff's ordinal alpha of the crowd; each method's
  MAE minus ``ds``'s with the 95% interval of that paired difference (normal approximation
  of the mean of the per-task differences of absolute error, over the same gold tasks).
* ``ordinal-synthetic``: crowds of :func:`crowdlearn.simulate.ordinal.ordinal_crowd`
  (800 tasks, 40 workers, 4 grades, 5 answers per task), mean MAE over 3 seeds.
* ``ordinal-speed``: fit time at 10^6 answers (200,000 tasks, 1,000 workers, 5 grades).

Usage::

    python benchmarks/ordinal.py [--write-results] [--skip-speed]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from results_md import markdown_table, recording  # noqa: E402

from crowdlearn.core.data import CrowdLabels  # noqa: E402
from crowdlearn.core.io import load_folder  # noqa: E402
from crowdlearn.diagnostics.ordinal_metrics import krippendorff_alpha, ordinal_mae, quadratic_kappa  # noqa: E402
from crowdlearn.ordinal.base import ordinal_order  # noqa: E402
from crowdlearn.registry import get_method  # noqa: E402
from crowdlearn.simulate.ordinal import ordinal_crowd  # noqa: E402

DATA = HERE.parent.parent / "shared" / "data"
METHODS = [("mv", {}), ("ds", {}), ("ordinal-cumulative", {}), ("ordinal-cumulative", {"method": "mv"}),
           ("ordinal-ds", {}), ("ordinal-ds", {"link": "probit"}), ("ordinal-ds", {"worker_thresholds": True}),
           ("ordinal-ds", {"center_bias": False}), ("ordinal-ds", {"worker_thresholds": True, "center_bias": True})]


def _name(method: str, params: dict) -> str:
    return method + ("" if not params else " (" + ", ".join(f"{k}={v}" for k, v in params.items()) + ")")


def posterior_median(est) -> pd.Series:
    """The class of each task at which the posterior's CDF (in ordinal order) reaches 1/2."""
    order = ordinal_order(est.classes_)
    p = est.probas_.to_numpy()[:, order]
    rank = (np.cumsum(p, axis=1) >= 0.5 - 1e-12).argmax(axis=1)
    return pd.Series(est.classes_.take(order).take(rank), index=est.probas_.index)


def trec() -> None:
    full = load_folder(DATA / "trec2010")
    df = full.to_frame()
    df = df[df["label"].astype(str) != "-2"]
    data = CrowdLabels.from_frame(df, truth=full.truth_series(), all_tasks=full.tasks)
    truth = data.truth_series()
    rows, errors = [], {}
    for method, params in METHODS:
        t0 = time.process_time()
        est = get_method(method)(**params).fit(data)
        secs = time.process_time() - t0
        labels = est.labels_
        grades = labels.loc[truth.index].to_numpy(float)
        errors[_name(method, params)] = np.abs(grades - truth.to_numpy(float))
        rows.append({
            "method": _name(method, params),
            "accuracy": float(np.mean(labels.loc[truth.index] == truth)),
            "MAE": ordinal_mae(labels, truth),
            "MAE (median)": ordinal_mae(posterior_median(est), truth),
            "QWK": quadratic_kappa(labels, truth),
            "CPU s": secs,
        })
    for row in rows:  # paired against ds on the same gold tasks
        d = errors[row["method"]] - errors["ds"]
        half = 1.96 * d.std(ddof=1) / np.sqrt(d.size)
        row["MAE - ds"] = d.mean()
        row["95% interval"] = "" if row["method"] == "ds" else f"[{d.mean() - half:+.4f}, {d.mean() + half:+.4f}]"
    print(f"trec2010 without the '-2' answers: {data.n_labels} answers, {data.n_tasks} tasks, "
          f"{data.n_workers} workers, {len(truth)} gold tasks; Krippendorff's ordinal alpha of "
          f"the crowd = {krippendorff_alpha(data):.3f} (nominal {krippendorff_alpha(data, 'nominal'):.3f}).\n")
    print(markdown_table(pd.DataFrame(rows), ".4f", index=False))
    # how the crowd errs on the gold tasks: an ordinal noise model expects errors to fall on
    # neighbouring grades
    order = ordinal_order(data.classes)
    true = data.truth[data.task]
    known = true >= 0
    table = pd.crosstab(pd.Series(data.classes.take(true[known]), name="gold grade"),
                        pd.Series(data.classes.take(data.label[known]), name="answer"), normalize="index")
    table = table.reindex(index=data.classes.take(order), columns=data.classes.take(order))
    table.index.name = "gold grade / answer"
    print("\nAnswers given the gold grade (row shares, answers on the gold tasks):\n")
    print(markdown_table(table, ".3f"))


def synthetic() -> None:
    scenarios = {
        "clean": {},
        "20% uniform spammers": {"spammers": 0.2},
        "20% constant workers": {"constant": 0.2},
        "wide spread, 10% + 10%": {"spread": (0.3, 1.5), "constant": 0.1, "spammers": 0.1},
        # the scale declares a grade that nobody answers (a Likert extreme)
        "unused top grade": {"declared": [0, 1, 2, 3, 4]},
        "unused bottom grade": {"declared": [-1, 0, 1, 2, 3]},
    }
    rows = []
    for method, params in METHODS:
        row = {"method": _name(method, params)}
        for name, kw in scenarios.items():
            maes = []
            for seed in range(3):
                crowd_kw = {key: v for key, v in kw.items() if key != "declared"}
                declared = kw.get("declared")
                data, _ = ordinal_crowd(n_tasks=800, n_workers=40, n_classes=4, labels_per_task=5,
                                        seed=seed, **crowd_kw)
                if declared is not None:
                    data = CrowdLabels.from_frame(data.to_frame(), classes=declared,
                                                  truth=data.truth_series())
                est = get_method(method)(**params).fit(data)
                truth = data.truth_series()
                grades = est.labels_.loc[truth.index].to_numpy(float)
                maes.append(np.mean(np.abs(grades - truth.to_numpy(float))))
            row[name] = float(np.mean(maes))
        rows.append(row)
    print("MAE in classes against the planted grades, mean of seeds 0-2 "
          "(800 tasks, 40 workers, 4 grades, 5 answers per task; the last two columns declare "
          "a fifth grade that no worker answers):\n")
    print(markdown_table(pd.DataFrame(rows), ".4f", index=False))


def speed() -> None:
    data, _ = ordinal_crowd(n_tasks=200_000, n_workers=1_000, n_classes=5, labels_per_task=5, seed=0)
    rows = []
    for method, params in METHODS:
        t0 = time.process_time()
        est = get_method(method)(**params).fit(data)
        rows.append({"method": _name(method, params), "answers": data.n_labels,
                     "iterations": est.n_iter_ if not hasattr(est, "estimators_") else
                     "/".join(str(e.n_iter_) for e in est.estimators_),
                     "CPU s": time.process_time() - t0,
                     "MAE": float(np.mean(np.abs(est.label_codes_ - data.truth)))})
    print("Fit time (process CPU seconds, defaults) on a simulated ordinal crowd of 10^6 answers "
          "(200,000 tasks, 1,000 workers, 5 grades):\n")
    print(markdown_table(pd.DataFrame(rows), ".3f", index=False))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    args = ap.parse_args(argv)
    cmd = "python benchmarks/ordinal.py --write-results"
    if (DATA / "trec2010" / "labels.csv").exists():
        with recording("ordinal-trec2010", args.write_results, cmd):
            trec()
    with recording("ordinal-synthetic", args.write_results, cmd):
        synthetic()
    if not args.skip_speed:
        with recording("ordinal-speed", args.write_results, cmd):
            speed()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
