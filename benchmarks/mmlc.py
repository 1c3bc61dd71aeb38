"""MMLC-owf and MMLC-df on the crowd datasets with item features (transductive truth inference).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/mmlc.py [--seeds 5] [--datasets music labelme]

As in the paper (Han et al., AAAI 2025), accuracy is measured on the tasks that carry crowd
answers (music: the 700 training songs; labelme: the 1000 training images), against gold.
One MMLC network (default, data-driven configuration; nothing tuned on gold) is fitted per
seed; every oracle estimator and every MMLC-df base aggregator reuses it.
Prints markdown tables: (1) MMLC-owf per estimator beside label-only methods, mean ± sd over
seeds; (2) MMLC-df (default b = median answers per worker, and b = 0: every worker filled) vs
the same aggregator on the raw answers, and MMLCFill's default, where the gate
(``crowdlearn.mmlc.fill.fill_gate``, one more MMLC fit per seed) keeps the filling or not.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from crowdlearn.benchmarking import gold_accuracy
from crowdlearn.core.io import load_folder
from crowdlearn.mmlc.fill import density_threshold, fill_gate, fill_labels
from crowdlearn.mmlc.oracle import MMLCOracle
from crowdlearn.registry import REGISTRY, get_method

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_md import recording  # noqa: E402  (benchmarks/ is on sys.path)

#: the real data sets: $CROWDLEARN_SHARED_DATA, else ../shared/data beside the checkout
DATA = Path(os.environ.get("CROWDLEARN_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
ESTIMATORS = ["kde", "kde-multivariate", "mean", "median", "weighted-kde", "weighted-mean"]
BASES = ["mv", "ds", "onecoin", "glad", "zbs", "spectral-ds", "multispa-ds", "multispa-kl"]


def _agg(name, data, seed):
    est = get_method(name)()
    if "random_state" in est.get_params():
        est.set_params(random_state=seed)
    return gold_accuracy(est.fit(data).labels_, data)


def run(dataset: str, seeds: int, bases=None, fill_all: bool = True,
        root: Path = DATA) -> tuple[pd.DataFrame, pd.DataFrame, float]:
    d = load_folder(Path(root) / dataset, with_features=True)
    d = d.subset(d.tasks[d.labels_per_task() > 0])  # transductive: the answered tasks
    bases = [b for b in (bases or BASES) if b in REGISTRY]
    owf, df_rows = [], []
    t0 = time.perf_counter()
    for seed in range(seeds):
        t = time.perf_counter()
        est = MMLCOracle(random_state=seed).fit(d)
        fit_s = time.perf_counter() - t
        for e in ESTIMATORS:
            acc = float(np.mean(est.predict_oracle(d.features, e).argmax(1) == d.truth))
            owf.append({"seed": seed, "method": f"mmlc-owf ({e})", "accuracy": acc, "seconds": fit_s})
        filled = fill_labels(est.model_, d)  # default threshold: b = median answers per worker
        filled_all = fill_labels(est.model_, d, b=0) if fill_all else None
        # MMLCFill's default: the filling is kept per base only if it passes the held-out check
        gate = fill_gate(d, base=list(bases), random_state=seed)["fill"]
        for b in bases:
            try:
                raw = _agg(b, d, seed)
                fil = _agg(b, filled, seed)
                fil_all = _agg(b, filled_all, seed) if fill_all else np.nan
            except (ValueError, NotImplementedError) as exc:
                print(f"# {dataset} {b}: {str(exc).splitlines()[0]}", file=sys.stderr)
                continue
            df_rows.append({"seed": seed, "base": b, "raw": raw, "filled": fil, "filled b=0": fil_all,
                            "gated": fil if gate[b] else raw, "gate kept": bool(gate[b])})
            if b in ("zbs", "ds", "mv"):
                owf.append({"seed": seed, "method": b, "accuracy": raw, "seconds": np.nan})
        print(f"# {dataset} seed {seed} done ({time.perf_counter() - t:.0f}s)", file=sys.stderr, flush=True)
    fill = pd.DataFrame(df_rows)
    fill.attrs["b"] = density_threshold(d, "median")  # the default threshold, in answers
    return pd.DataFrame(owf), fill, time.perf_counter() - t0


def _pm(x: pd.Series) -> str:
    """Mean ± sd in percent; the value alone for one seed."""
    if len(x) == 1:
        return f"{100 * x.iloc[0]:.2f}"
    return f"{100 * x.mean():.2f} ± {100 * x.std(ddof=1):.2f}"


def main() -> None:
    args = _parser().parse_args()
    default = "mmlc-sweep" if args.sweep is not None else "mmlc"
    section = default if args.write_results is True else args.write_results
    with recording(section or "", enabled=bool(section)):
        _main(args)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--datasets", nargs="+", default=["music", "labelme"])
    ap.add_argument("--data-root", type=Path, default=DATA,
                    help="folder of the shared datasets (default $CROWDLEARN_SHARED_DATA or "
                         "../shared/data beside the checkout)")
    ap.add_argument("--sweep", nargs="*", type=int, default=None,
                    help="instead: MMLC-df density sweep over these b thresholds (base ds, mv; seed 0)")
    ap.add_argument("--bases", nargs="+", default=None, help=f"aggregators for MMLC-df (default {' '.join(BASES)})")
    ap.add_argument("--no-fill-all", action="store_true",
                    help="skip the b = 0 filling (every worker on every task: 37M answers on cifar10n)")
    ap.add_argument("--write-results", nargs="?", const=True, metavar="SECTION",
                    help="also write the output to this RESULTS.md section (default mmlc, or mmlc-sweep)")
    return ap


def _main(args) -> None:
    if args.sweep is not None:
        return sweep(args.datasets, args.sweep or [0, 25, 50, 100, 200, 400], args.data_root)
    fill_all = not args.no_fill_all
    seeds = f"{args.seeds} seed{'s' if args.seeds != 1 else ''}"
    acc = "accuracy % (mean ± sd)" if args.seeds > 1 else "accuracy %"
    for name in args.datasets:
        owf, fill, total = run(name, args.seeds, args.bases, fill_all, args.data_root)
        print(f"\n### {name}: MMLC-owf (transductive, {seeds}; total {total:.0f}s)\n")
        print(f"| method | {acc} | fit s |\n|---|---|---|")
        for m, g in owf.groupby("method", sort=False):
            s = g["seconds"].mean()
            print(f"| {m} | {_pm(g['accuracy'])} | {'' if np.isnan(s) else f'{s:.0f}'} |")
        b = fill.attrs.get("b")
        median = "b = median answers per worker" + (f" = {b}" if b is not None else "")
        print(f"\n### {name}: MMLC-df (default {median}{'; and b = 0' if fill_all else ''}) vs raw answers\n")
        print("| base | raw % | filled % | Δ (points) | seeds improved |" + (" filled b=0 % | Δ b=0 |" if fill_all else "")
              + " mmlc-df default (gate) % | Δ gate | gate kept filling |"
              + "\n|---|---|---|---|---|" + ("---|---|" if fill_all else "") + "---|---|---|")
        n_imp = 0
        for b, g in fill.groupby("base", sort=False):
            delta = 100 * (g["filled"] - g["raw"])
            delta0 = 100 * (g["filled b=0"] - g["raw"])
            imp = int(np.sum(delta > 0))
            n_imp += delta.mean() > 0
            delta_g = 100 * (g["gated"] - g["raw"])
            print(f"| {b} | {_pm(g['raw'])} | {_pm(g['filled'])} | {delta.mean():+.2f} | {imp}/{len(g)} |"
                  + (f" {_pm(g['filled b=0'])} | {delta0.mean():+.2f} |" if fill_all else "")
                  + f" {_pm(g['gated'])} | {delta_g.mean():+.2f} | {int(g['gate kept'].sum())}/{len(g)} seeds |")
        print(f"\nfilling improves {n_imp}/{fill['base'].nunique()} aggregators on {name} (mean over seeds)")


def sweep(datasets, bs, root: Path = DATA) -> None:
    from crowdlearn.mmlc import MMLC

    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    for name in datasets:
        d = load_folder(Path(root) / name, with_features=True)
        d = d.subset(d.tasks[d.labels_per_task() > 0])
        model = MMLC(random_state=0).fit(d)
        per_worker = np.bincount(d.worker, minlength=d.n_workers)
        rows = []
        for b in [None, *bs]:
            data = d if b is None else fill_labels(model, d, b)
            row = {"b": "raw" if b is None else b, "dense workers": 0 if b is None else int(np.sum(per_worker > b)),
                   "density": data.n_labels / (d.n_tasks * d.n_workers)}
            for base in ("mv", "ds"):
                row[base] = _agg(base, data, 0)
            rows.append(row)
        table = pd.DataFrame(rows)
        print(f"\n### {name}: MMLC-df density sweep (seed 0)\n")
        print("| b | dense workers | density | mv % | ds % |\n|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['b']} | {r['dense workers']} | {r['density']:.3f} | {100 * r['mv']:.1f} | {100 * r['ds']:.1f} |")
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            fig, ax = plt.subplots(figsize=(5, 4))
            filled = table[table["b"] != "raw"]
            for base in ("mv", "ds"):
                line, = ax.plot(filled["density"], filled[base], "o-", label=f"{base} on filled")
                ax.axhline(table[base].iloc[0], ls="--", c=line.get_color(), label=f"{base} raw")
            ax.set_xlabel("density (answers / tasks x workers)")
            ax.set_ylabel("accuracy")
            ax.set_title(f"MMLC-df on {name}")
            ax.legend()
            fig.savefig(out / f"mmlc_density_{name}.png", dpi=100, bbox_inches="tight")
        except ImportError:
            pass


if __name__ == "__main__":
    main()
