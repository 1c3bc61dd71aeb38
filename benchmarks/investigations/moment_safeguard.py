"""The moment-only safeguard: moment methods at ``n_em_iter=0`` with and without it.

With ``n_em_iter=0`` (the default of ``multispa``, ``multispa-kl``, ``cnmf``,
``tensor-admm``, ``eigenratio``) a moment method returns its moment posteriors.  With
``compare_with_mv=True`` (the default) one DS EM round from those posteriors and one from
majority vote are compared by log-likelihood and majority vote's round replaces the moment
estimate when it ends higher (:mod:`crowdlearn.aggregation.moments`).
``compare_with_mv=False`` is the moment estimate alone, i.e. the behaviour before the
safeguard, so one run measures both.

The rule was chosen on the simulated crowds (first table); the real sets of ../shared/data
(second table) are reported after, not used.  Accuracy against the planted truth / the gold.

    python benchmarks/investigations/moment_safeguard.py [--large] [--write-results]

``--large`` adds the 200,000-task crowd (about 10 minutes more).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

from results_md import markdown_table, recording  # noqa: E402

from crowdlearn import simulate  # noqa: E402
from crowdlearn.core.io import load_folder  # noqa: E402
from crowdlearn.registry import get_method  # noqa: E402

METHODS = ["multispa", "multispa-kl", "cnmf", "tensor-admm", "eigenratio"]
DATA = HERE.parent.parent.parent / "shared" / "data"
REAL = ["bluebirds", "cifar10n", "dog", "duchenne", "face", "imagenet15n", "labelme", "music", "product",
        "recidivism_race", "sentiment_polarity", "trec2010", "wsd", "zencrowd_all", "zencrowd_in", "zencrowd_us"]

SCENARIOS = {
    "sparse: 20k tasks, 200 workers, K=3, 5 per task": lambda s: simulate.dawid_skene(20000, 200, 3, labels_per_task=5, seed=s),
    "sparse: 8k tasks, 200 workers": lambda s: simulate.dawid_skene(8000, 200, 3, labels_per_task=5, seed=s),
    "imbalance 99/1, 3 per task": lambda s: simulate.dawid_skene(5000, 50, 2, labels_per_task=3, class_prior=[0.99, 0.01], seed=s),
    "imbalance 90/8/2": lambda s: simulate.dawid_skene(5000, 50, 3, labels_per_task=3, class_prior=[0.9, 0.08, 0.02], seed=s),
    "30% adversaries": lambda s: simulate.dawid_skene(3000, 50, 3, labels_per_task=6, adversaries=0.3, seed=s),
    "one-coin, 25% adversaries": lambda s: simulate.one_coin(3000, 40, 2, labels_per_task=5, accuracy=(0.6, 0.9), adversaries=0.25, seed=s),
    "hammers and spammers": lambda s: simulate.hammer_spammer(2000, 100, 2, labels_per_task=5, hammers=0.3, hammer_accuracy=0.9, seed=s),
    "50% spammers": lambda s: simulate.dawid_skene(3000, 50, 3, labels_per_task=5, spammers=0.5, seed=s),
    "40% fixed-class workers": lambda s: simulate.dawid_skene(2000, 40, 3, labels_per_task=5, fixed_class=0.4, seed=s),
    "dense: 400 tasks, 10 workers": lambda s: simulate.dawid_skene(400, 10, 3, labels_per_task=10, seed=s),
    "dense: 100 tasks, 6 workers": lambda s: simulate.dawid_skene(100, 6, 2, labels_per_task=6, seed=s),
    "moderate: 4000 tasks, 50 workers": lambda s: simulate.dawid_skene(4000, 50, 3, labels_per_task=5, seed=s),
}
LARGE = {"sparse: 200k tasks, 1000 workers, K=3": lambda s: simulate.dawid_skene(200000, 1000, 3, labels_per_task=5, seed=s)}


def accuracy(est, data) -> float:
    truth = data.truth_series()
    return float(np.mean(est.labels_.loc[truth.index].to_numpy() == truth.to_numpy()))


def compare(data) -> dict:
    """``{method: (alone, with safeguard, init_)}`` and majority vote's accuracy."""
    out = {"mv": accuracy(get_method("mv")().fit(data), data)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in METHODS:
            alone = get_method(name)(compare_with_mv=False).fit(data)
            guarded = get_method(name)().fit(data)
            how = "fallback" if guarded.fallback_ is not None else guarded.init_
            out[name] = (accuracy(alone, data), accuracy(guarded, data), how)
    return out


def table(rows: list[tuple[str, dict]]) -> pd.DataFrame:
    recs = []
    for name, res in rows:
        rec = {"crowd": name, "mv": res["mv"]}
        for m in METHODS:
            alone, guarded, how = res[m]
            rec[m] = f"{alone:.4f}" if guarded == alone and how != "majority vote" else f"{alone:.4f} -> {guarded:.4f}"
            if how == "majority vote":
                rec[m] += " (mv)"
        recs.append(rec)
    return pd.DataFrame(recs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--large", action="store_true")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)
    cmd = "python benchmarks/investigations/moment_safeguard.py" + " --large" * args.large + " --write-results"
    scenarios = {**SCENARIOS, **(LARGE if args.large else {})}
    with recording("moment-safeguard", args.write_results, cmd):
        rows = []
        for name, make in scenarios.items():
            for seed in range(args.seeds):
                rows.append((f"{name} (seed {seed})", compare(make(seed))))
                print(f"  done: {name} seed {seed}", file=sys.stderr, flush=True)
        print("#### Moment methods at `n_em_iter=0`: the moment estimate alone -> with the safeguard "
              "(accuracy against the planted truth; `(mv)`: majority vote's DS round replaced the moment "
              "estimate; one value: unchanged)\n")
        print(markdown_table(table(rows), ".4f", index=False))
        real = [(name, compare(load_folder(DATA / name))) for name in REAL if (DATA / name / "labels.csv").exists()]
        print("\n#### The same on the real sets (gold accuracy; reported after the rule was chosen)\n")
        print(markdown_table(table(real), ".4f", index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
