"""How far aggregators' confidences are from their accuracy, and what a few gold tasks fix.

Sections of RESULTS.md written with ``--write-results``:

* ``calibration-synthetic`` (the declared tuning set of ``CalibratedAggregator``'s ``mix``):
  simulated crowds on which Dawid-Skene's conditional independence fails in three ways
  (instance outliers, colluders, spammers among accurate workers); gold on 10% of the tasks;
  ECE and log-loss on the other 90% for the base alone and calibrated with and without the
  uniform mixture, mean of 3 seeds.
* ``calibration-real``: the categorical sets of ../shared/data.  ``no gold``: each method fitted
  on the answers alone, scored on every gold task.  ``10% gold``: a random tenth of the gold
  tasks is given to ``fit``, the rest scored: the base given that gold, then
  ``CalibratedAggregator(base)`` given the same gold (mean of 3 draws of the tenth).

* ``calibration-continuous``: the same for the standard errors of continuous answers
  (snow_emotion, movie_reviews): coverage of the 95% intervals, without gold, and with a
  tenth of the gold given to the method alone or to ``CalibratedContinuous``.

Usage::

    python benchmarks/calibration.py [--synthetic] [--real] [--continuous] [--write-results]
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
sys.path.insert(0, str(HERE))

from results_md import markdown_table, write_section  # noqa: E402

from crowdlearn.aggregation.calibration import CalibratedAggregator  # noqa: E402
from crowdlearn.benchmarking import categorical_datasets  # noqa: E402
from crowdlearn.core.io import load_folder  # noqa: E402
from crowdlearn.diagnostics.metrics import expected_calibration_error, log_loss  # noqa: E402
from crowdlearn.registry import get_method  # noqa: E402
from crowdlearn.simulate import WorkerSpec, crowd  # noqa: E402

DEFAULT_DATA = HERE.parent.parent / "shared" / "data"
METHODS = ("ds", "hds", "mv")
GOLD_SHARE = 0.1
DRAWS = 3


def _scores(proba: pd.DataFrame, truth: pd.Series) -> dict:
    p = proba.reindex(truth.index)
    acc = float((p.idxmax(axis=1) == truth).mean())
    return {"acc": acc, "conf": float(p.max(axis=1).mean()), "ece": expected_calibration_error(p, truth),
            "ll": log_loss(p, truth)}


def _with_gold(data, truth: pd.Series, method: str, seed: int, mix: bool = True) -> tuple[dict, dict]:
    """Base and calibrated base given a random share of the gold; scores on the rest."""
    gold = truth.sample(frac=GOLD_SHARE, random_state=seed)
    if len(gold) < 2:
        gold = truth.sample(2, random_state=seed)
    rest = truth.drop(gold.index)
    base = get_method(method)().fit(data, gold=gold)
    cal = CalibratedAggregator(method, mix=mix).fit(data, gold=gold)
    return _scores(base.probas_, rest), _scores(cal.probas_, rest)


def _scenarios() -> dict:
    """Crowds breaking DS's conditional independence (3,000 tasks, 3 classes, 5 answers)."""
    def outliers(seed):
        rng = np.random.default_rng(seed)
        looks_like = np.where(rng.random(3000) < 0.25, rng.integers(0, 3, 3000), -1)
        return crowd(3000, 3, [WorkerSpec.instance_dependent(30, outlier_prob=0.7)], labels_per_task=5,
                     seed=seed, outlier_class=looks_like)

    def colluders(seed):
        return crowd(3000, 3, [WorkerSpec.diligent(24, accuracy=(0.55, 0.8)), WorkerSpec.colluders(6)],
                     labels_per_task=5, seed=seed)

    def spammers(seed):
        return crowd(3000, 3, [WorkerSpec.diligent(20, accuracy=(0.6, 0.9)), WorkerSpec.spammer(10)],
                     labels_per_task=5, seed=seed)

    return {"instance outliers (25% of tasks)": outliers, "colluders (20% of workers)": colluders,
            "spammers (1/3 of workers)": spammers}


def synthetic(out) -> str:
    rows = []
    for name, make in _scenarios().items():
        for method in ("ds", "mv"):
            acc = {k: [] for k in ("base", "mix=False", "mix=True")}
            for seed in range(3):
                data = make(seed)
                truth = data.truth_series()
                base, cal = _with_gold(data, truth, method, seed, mix=True)
                _, cal_t = _with_gold(data, truth, method, seed, mix=False)
                acc["base"].append(base)
                acc["mix=True"].append(cal)
                acc["mix=False"].append(cal_t)
            row = {"crowd": name, "method": method,
                   "accuracy": np.mean([s["acc"] for s in acc["base"]])}
            for k, v in acc.items():
                row[f"ECE {k}"] = np.mean([s["ece"] for s in v])
            for k, v in acc.items():
                row[f"log-loss {k}"] = np.mean([s["ll"] for s in v])
            rows.append(row)
            out(str(row))
    table = pd.DataFrame(rows)
    mean = table.drop(columns=["crowd", "method"]).mean()
    return (
        "Gold on 10% of the tasks, scores on the other 90%; `base`: the method given that gold; "
        "`mix=False`: `CalibratedAggregator(method, mix=False)` (temperature alone); `mix=True`: "
        "the default (temperature and uniform mixture). Mean of seeds 0-2.\n\n"
        + markdown_table(table, ".4f", index=False)
        + "\n\nMean over the rows: " + ", ".join(f"{k} {v:.4f}" for k, v in mean.items()) + "\n"
    )


def real(root: Path, out) -> str:
    rows = []
    t0 = time.time()
    for name in categorical_datasets(root):
        data = load_folder(root / name)
        truth = data.truth_series()
        for method in METHODS:
            alone = _scores(get_method(method)().fit(data).probas_, truth)
            draws = [_with_gold(data, truth, method, seed) for seed in range(DRAWS)]
            row = {"dataset": name, "method": method, "accuracy": alone["acc"],
                   "confidence": alone["conf"], "ECE": alone["ece"], "log-loss": alone["ll"]}
            for label, i in (("base", 0), ("calibrated", 1)):
                row[f"ECE {label}, 10% gold"] = np.mean([d[i]["ece"] for d in draws])
            for label, i in (("base", 0), ("calibrated", 1)):
                row[f"log-loss {label}, 10% gold"] = np.mean([d[i]["ll"] for d in draws])
            rows.append(row)
            out(f"{name} {method}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items() if k not in ("dataset", "method")))
    table = pd.DataFrame(rows)
    means = table.groupby("method", sort=False).mean(numeric_only=True)
    means.index.name = "method (mean of the sets)"
    return (
        f"`no gold`: fitted on the answers alone, scored on every gold task (accuracy, mean "
        f"confidence of the label, top-label ECE with 10 bins, log-loss in nats, probabilities "
        f"clipped at 1e-15). `10% gold`: a random tenth of the gold tasks given to `fit`, the "
        f"other nine tenths scored: `base` is the method given that gold, `calibrated` is "
        f"`CalibratedAggregator(method)` given the same gold (mean of {DRAWS} draws of the tenth). "
        f"({time.time() - t0:.0f} s)\n\n"
        + markdown_table(table, ".4f", index=False)
        + "\n\nMeans over the sets:\n\n" + markdown_table(means, ".4f") + "\n"
    )


CONTINUOUS_SETS = ("snow_emotion", "movie_reviews")
CONTINUOUS_METHODS = ("mean", "median", "gaussian-em", "catd", "lrs-moments")


def _coverage(fit, truth: pd.Series) -> float:
    z = (truth - fit.estimates_.reindex(truth.index)).abs() / fit.stderr_.reindex(truth.index)
    return float((z <= 1.96).mean())


def continuous(root: Path, out) -> str:
    from crowdlearn.continuous.calibration import CalibratedContinuous
    from crowdlearn.datasets import load

    rows = []
    for name in CONTINUOUS_SETS:
        data = load(root / name, kind="continuous")
        truth = data.truth_series()
        for method in CONTINUOUS_METHODS:
            row = {"dataset": name, "method": method,
                   "coverage, no gold": _coverage(get_method(method, "continuous")().fit(data), truth)}
            base, cal = [], []
            for seed in range(DRAWS):
                gold = truth.sample(frac=GOLD_SHARE, random_state=seed)
                rest = truth.drop(gold.index)
                base.append(_coverage(get_method(method, "continuous")().fit(data, gold=gold), rest))
                cal.append(_coverage(CalibratedContinuous(method).fit(data, gold=gold), rest))
            row["coverage base, 10% gold"] = np.mean(base)
            row["coverage calibrated, 10% gold"] = np.mean(cal)
            rows.append(row)
            out(str(row))
    return (
        "Share of gold values inside the 95% intervals `estimate +- 1.96 stderr`. `no gold`: the "
        "method on the answers alone, every gold task. `10% gold`: a random tenth of the gold "
        "given to `fit`, the other nine tenths scored: the method given that gold (`base`), then "
        f"`CalibratedContinuous(method)` given the same gold (mean of {DRAWS} draws).\n\n"
        + markdown_table(pd.DataFrame(rows), ".3f", index=False) + "\n"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-root", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--synthetic", action="store_true")
    ap.add_argument("--real", action="store_true")
    ap.add_argument("--continuous", action="store_true")
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")  # the fits' convergence notes are not what is measured

    def out(s: str) -> None:
        print(s, flush=True)

    cmd = "OMP_NUM_THREADS=1 python benchmarks/calibration.py " + " ".join(
        f"--{k}" for k in ("synthetic", "real", "continuous") if getattr(args, k))
    if args.synthetic:
        md = synthetic(out)
        print(md)
        if args.write_results:
            write_section("calibration-synthetic", md, cmd + " --write-results")
    if args.real:
        md = real(args.data_root, out)
        print(md)
        if args.write_results:
            write_section("calibration-real", md, cmd + " --write-results")
    if args.continuous:
        md = continuous(args.data_root, out)
        print(md)
        if args.write_results:
            write_section("calibration-continuous", md, cmd + " --write-results")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
