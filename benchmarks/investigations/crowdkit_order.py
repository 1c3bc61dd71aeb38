"""Does crowd-kit 1.4.2's MACE (and GLAD) depend on the order in which ids first appear?

crowd-kit's ``MACE._e_step`` builds each worker's spamming-strategy counts with a pandas
``groupby(["worker", "label"])...unstack()``, whose rows and columns come out *sorted*, and
its M-step writes them by position into ``thetas_``, whose rows and columns follow the order
of *first appearance* (``pd.factorize``).  Whenever the two orders differ, strategies land on
the wrong worker and the wrong class.  ``_crowdkit_order.py`` (run in crowd-kit's venv) tests
this directly: it fits crowd-kit's MACE (``em`` and ``vb``) and GLAD twice on every data set,

* ``as-is``: the answers as they are;
* ``renamed``: the same answers with task, worker and label ids renamed so that the order of
  first appearance equals the sorted order (``w0``, ``w1``, ... zero-padded);

which is a pure relabelling, so a correct implementation gives the same posteriors (after
mapping the names back).  Reported per set: gold accuracy of both fits, the largest
difference between their posteriors, the marginal log-likelihood of each fit under the model
(uniform class prior, at the fitted parameters; for VB at crowd-kit's normalised
geometric-mean weights), and, for reference, crowdlearn's ``mace`` (``fit_priors=False``,
``tol=0``, the same iterations) and ``glad`` (``log_beta_prior_mean=1``, crowd-kit's prior;
``fit_priors=False``): accuracy, log-likelihood and largest posterior difference from the
renamed crowd-kit fit.

Data: every categorical set under ``--data-root`` and one simulated crowd (Dawid-Skene,
500 tasks, 25 workers, 2 classes, 5 answers per task, accuracy 0.5-0.85, seed 7; ids
``t<n>``, ``w<n>``, ``c<n>``, whose string sort differs from their first appearance).
crowd-kit's GLAD is skipped above ``--skip-glad-above`` answers (it takes minutes there).

Usage (from the repository root)::

    python benchmarks/investigations/crowdkit_order.py [--data-root ../shared/data]
        [--datasets ...] [--mace-iter 50] [--write-results]

``--write-results`` writes the output to section ``crowdkit-order-dependence`` of
``benchmarks/RESULTS.md``; nothing else is written (the CSV exchange lives in a temporary
directory).  About 6 minutes, almost all of it crowd-kit (its GLAD took 5 minutes more on the
five sets of 20,000-30,000 answers that the default ``--skip-glad-above 15000`` leaves out).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(HERE))
from crowdkit_bridge import VENV_PY, available  # noqa: E402
from results_md import markdown_table, recording  # noqa: E402
from _crowdkit_order import METHODS, glad_loglik, mace_loglik  # noqa: E402  (numpy/pandas only)

import crowdlearn  # noqa: E402
from crowdlearn.benchmarking import categorical_datasets, gold_accuracy  # noqa: E402
from crowdlearn.core.data import CrowdLabels  # noqa: E402
from crowdlearn.simulate import dawid_skene  # noqa: E402

#: $CROWDLEARN_SHARED_DATA, else ../shared/data beside the checkout
DEFAULT_DATA = Path(os.environ.get("CROWDLEARN_SHARED_DATA") or BENCH.parent.parent / "shared" / "data")
SIM = "simulated (DS, K=2)"
TITLES = {"mace_em": "crowd-kit `MACE(method='em')` vs crowdlearn `mace(method='em')`",
          "mace_vb": "crowd-kit `MACE(method='vb')` vs crowdlearn `mace(method='vb')`",
          "glad": "crowd-kit `GLAD()` vs crowdlearn `glad`"}


def read_strings(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def write_simulated(folder: Path) -> None:
    """The simulated crowd of the audit, as ``labels.csv`` / ``truth.csv`` with string ids."""
    d = dawid_skene(500, 25, 2, labels_per_task=5, seed=7, accuracy=(0.5, 0.85))
    df = d.to_frame()[["task", "worker", "label"]]
    for col, prefix in (("task", "t"), ("worker", "w"), ("label", "c")):
        df[col] = prefix + df[col].astype(str)
    folder.mkdir(parents=True)
    df.to_csv(folder / "labels.csv", index=False)
    truth = d.truth_series()
    pd.DataFrame({"task": "t" + truth.index.astype(str), "truth": "c" + truth.astype(str).to_numpy()}
                 ).to_csv(folder / "truth.csv", index=False)


def read_probas(path: Path) -> pd.DataFrame:
    df = read_strings(path)
    return df.set_index(df.columns[0]).astype(float)


def crowdlearn_reference(df: pd.DataFrame, truth: pd.DataFrame, method: str, mace_iter: int):
    """crowdlearn's fit at crowd-kit's settings: accuracy, log-likelihood, posteriors."""
    data = CrowdLabels.from_frame(df, truth=truth.set_index("task")["truth"])
    workers, classes = data.workers.astype(str), data.classes.astype(str)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method.startswith("mace"):
            m = crowdlearn.get_method("mace")(method=method[5:], fit_priors=False,
                                              max_iter=mace_iter, tol=0).fit(data)
            ll = mace_loglik(df, workers, classes, m.skills_.to_numpy(), m.strategies_.to_numpy())
        else:
            m = crowdlearn.get_method("glad")(log_beta_prior_mean=1.0, fit_priors=False).fit(data)
            alphas = pd.Series(m.skills_.to_numpy(), index=workers)
            log_betas = pd.Series(np.log(m.difficulties_.to_numpy()), index=data.tasks.astype(str))
            ll = glad_loglik(df, alphas, log_betas, list(classes))
    probas = m.probas_.copy()
    probas.index, probas.columns = probas.index.astype(str), probas.columns.astype(str)
    return gold_accuracy(m.labels_, data), ll, probas


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--data-root", type=Path, default=DEFAULT_DATA)
    p.add_argument("--datasets", nargs="+")
    p.add_argument("--mace-iter", type=int, default=50, help="EM iterations of MACE (crowd-kit's default)")
    p.add_argument("--skip-glad-above", type=int, default=15000,
                   help="answers; crowd-kit's GLAD takes 0.5-2 minutes per fit pair above this")
    p.add_argument("--no-simulated", action="store_true")
    p.add_argument("--write-results", action="store_true",
                   help="also write the output to section crowdkit-order-dependence of benchmarks/RESULTS.md")
    args = p.parse_args(argv)
    if not available():
        raise SystemExit("crowd-kit venv missing: run bash benchmarks/setup_crowdkit.sh")
    names = args.datasets or categorical_datasets(args.data_root)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        folders = {n: args.data_root / n for n in names}
        if not args.no_simulated:
            folders[SIM] = tmp / "simulated"
            write_simulated(folders[SIM])
        cmd = [str(VENV_PY), str(HERE / "_crowdkit_order.py"), "--out", str(tmp / "out"),
               "--mace-iter", str(args.mace_iter), "--skip-glad-above", str(args.skip_glad_above),
               *map(str, folders.values())]
        ck = json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout)
        rows = {m: [] for m in METHODS}
        skipped = {m: [] for m in METHODS}
        for name, folder in folders.items():
            res = ck["sets"][folder.name]
            df = read_strings(folder / "labels.csv")[["task", "worker", "label"]]
            truth = read_strings(folder / "truth.csv")
            truth = truth[truth["task"].isin(df["task"])]
            order = ("w" if not res["workers_in_sorted_order"] else "") + \
                    ("l" if not res["labels_in_sorted_order"] else "")
            for method in METHODS:
                r = res["methods"][method]
                if "skipped" in r:
                    skipped[method].append(f"{name} ({r['skipped']})")
                    continue
                acc, ll, probas = crowdlearn_reference(df, truth, method, args.mace_iter)
                renamed = read_probas(tmp / "out" / folder.name / f"{method}_renamed.csv")
                probas = probas.reindex(index=renamed.index, columns=renamed.columns)
                rows[method].append({
                    "dataset": name, "answers": res["answers"], "unsorted ids": order or "-",
                    "ck acc as-is": 100 * r["acc_asis"], "ck acc renamed": 100 * r["acc_renamed"],
                    "renamed - as-is (pts)": 100 * (r["acc_renamed"] - r["acc_asis"]),
                    "max abs dpost": r["max_abs_posterior_diff"],
                    "ck loglik as-is": r["loglik_asis"], "ck loglik renamed": r["loglik_renamed"],
                    "cl acc": 100 * acc, "cl loglik": ll,
                    "max abs (cl - ck renamed)": float(np.abs(probas.to_numpy() - renamed.to_numpy()).max()),
                    "ck s": r["time"],
                })
    with recording("crowdkit-order-dependence", enabled=args.write_results):
        print(f"crowd-kit {ck['crowdkit']}: each model fitted on the answers as they are (`as-is`) "
              "and with task, worker and label ids renamed so that first appearance = sorted order "
              "(`renamed`, a pure relabelling; posteriors mapped back before comparing).  "
              "`unsorted ids`: whose first-appearance order differs from the sorted one "
              "(w workers, l labels).  Accuracies on gold in %; log-likelihoods are marginal, "
              "uniform class prior, at the fitted parameters.  crowdlearn (`cl`) for reference at "
              f"crowd-kit's settings (MACE: {args.mace_iter} iterations, `tol=0`, `fit_priors=False`; "
              "GLAD: `log_beta_prior_mean=1`, `fit_priors=False`).  crowd-kit's MACE was run with "
              "`n_restarts=1`: its 10 default restarts all start from the same draw "
              f"(checked on every set: {all(s['restarts_identical'] for s in ck['sets'].values())}).\n")
        for method in METHODS:
            table = pd.DataFrame(rows[method]).set_index("dataset")
            print(f"#### {TITLES[method]}\n")
            shown = table.drop(columns=["ck s"])
            fmt = {c: ".2e" if c.startswith("max abs") else ".1f" if "loglik" in c else ".2f"
                   for c in shown.columns}
            fmt["answers"] = "d"
            print(markdown_table(shown.apply(lambda col: col.map(
                lambda v, f=fmt[col.name]: format(v, f) if not isinstance(v, str) else v)), index=True))
            print()
            if skipped[method]:
                print(f"_Skipped (crowd-kit too slow): {', '.join(skipped[method])}._\n")
            d = table["renamed - as-is (pts)"]
            moved = table[d.abs() > 1e-9]
            print(f"- accuracy changes under the relabelling on {len(moved)} of {len(table)} sets"
                  + (f" (by {d[d.abs() > 1e-9].min():+.2f} to {d[d.abs() > 1e-9].max():+.2f} points, "
                     f"mean |change| {d[d.abs() > 1e-9].abs().mean():.2f})" if len(moved) else ""))
            print(f"- posteriors differ by more than 1e-6 on {int((table['max abs dpost'] > 1e-6).sum())} sets, "
                  f"by more than 0.1 on {int((table['max abs dpost'] > 0.1).sum())}")
            gain = table["ck loglik renamed"] - table["ck loglik as-is"]
            print(f"- log-likelihood higher after renaming on {int((gain > 1e-6).sum())} sets, "
                  f"lower on {int((gain < -1e-6).sum())} (median change {gain.median():+.1f})")
            print(f"- crowdlearn within 1e-3 of the renamed crowd-kit posteriors on "
                  f"{int((table['max abs (cl - ck renamed)'] < 1e-3).sum())} of {len(table)} sets")
            print(f"- crowd-kit time (both fits): {table['ck s'].sum():.0f} s\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
