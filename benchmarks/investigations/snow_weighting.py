"""Why does no continuous method beat the plain mean on snow_emotion's RMSE?

One-off investigation (RESULTS section ``continuous-snow-weighting``, issue 14).  The issue asks
the best continuous method to beat the mean and the median of the answers on MAE and RMSE;
on snow_emotion (700 headline x emotion tasks, 10 ratings each, 38 workers) every worker-
weighting method loses to the mean on RMSE.  This script measures how much any per-worker
weighting could give and where the estimated weights go wrong:

* the bound: each worker's bias and noise measured *on the gold*, answers combined with
  those weights (in sample, so optimistic);
* how reproducible that gold-measured noise is: Spearman correlation of each worker's noise
  on two halves of its answers;
* ``gaussian-em`` (defaults, and without scales) and a leave-one-out variant that measures
  each worker's noise against the other workers' weighted mean of the task, less that mean's
  own variance (so a worker cannot vouch for itself), each with the range of the estimated
  noise beside the gold-measured range;
* the same methods fitted per emotion dimension (valence is on a scale twice as wide).

Run from the repository root::

    OMP_NUM_THREADS=1 python benchmarks/investigations/snow_weighting.py [--write-results]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from results_md import markdown_table, write_section  # noqa: E402

from crowdlearn.continuous import GaussianEM  # noqa: E402

ROOT = HERE.parents[1].parent / "shared" / "data" / "snow_emotion"


def leave_one_out(frame: pd.DataFrame, n_iter: int = 50, prior: float = 2.0) -> tuple[pd.Series, np.ndarray]:
    """Precision-weighted mean with each worker's noise measured against the others' mean.

    ``sigma_w^2 = mean_t[(x_tw - m_{t,-w})^2 - 1 / P_{t,-w}]`` (floored), with ``prior``
    pseudo-answers at half the pooled squared residual.
    """
    t, tasks = pd.factorize(frame["task"])
    w, _ = pd.factorize(frame["worker"])
    x = frame["label"].to_numpy(float)
    n_t, n_w = len(tasks), w.max() + 1
    s2 = np.full(n_w, x.var())
    for _ in range(n_iter):
        prec = 1.0 / s2[w]
        num, den = np.bincount(t, prec * x, n_t), np.bincount(t, prec, n_t)
        rest = den[t] - prec
        ok = rest > 0
        m_rest = np.where(ok, (num[t] - prec * x) / np.where(ok, rest, 1.0), np.nan)
        r2 = (x - m_rest) ** 2
        pooled = np.nanmean(r2)
        excess = np.where(ok, r2 - 1.0 / np.where(ok, rest, 1.0), 0.0)
        s2 = (np.bincount(w[ok], excess[ok], n_w) + prior * pooled / 2) / (np.bincount(w[ok], minlength=n_w) + prior)
        s2 = np.maximum(s2, 0.05 * pooled)
    prec = 1.0 / s2[w]
    return pd.Series(np.bincount(t, prec * x, n_t) / np.bincount(t, prec, n_t), index=tasks), np.sqrt(s2)


def scores(est: pd.Series, truth: pd.Series) -> dict:
    err = est - truth.reindex(est.index)
    return {"MAE": float(np.mean(np.abs(err))), "RMSE": float(np.sqrt(np.mean(err**2)))}


def run() -> str:
    answers = pd.read_csv(ROOT / "labels.csv")
    truth = pd.read_csv(ROOT / "truth.csv").set_index("task")["truth"]
    answers["dimension"] = answers["task"].str.split(":").str[0]
    resid = answers["label"] - answers["task"].map(truth)
    gold_sd = resid.groupby(answers["worker"]).std()
    gold_bias = resid.groupby(answers["worker"]).mean()
    half = answers.groupby("worker").cumcount() % 2
    halves = resid.groupby([answers["worker"], half]).std().unstack()
    rho = spearmanr(halves[0], halves[1]).statistic

    rows = []

    def add(name, est, noise=None):
        rows.append({"method": name, **scores(est, truth),
                     "estimated noise sd, min-max": "" if noise is None
                     else f"{np.min(noise):.1f}-{np.max(noise):.1f}"})

    add("mean", answers.groupby("task")["label"].mean())
    for bias in (False, True):
        x = answers["label"] - (answers["worker"].map(gold_bias) if bias else 0.0)
        wt = 1.0 / answers["worker"].map(gold_sd) ** 2
        est = (x * wt).groupby(answers["task"]).sum() / wt.groupby(answers["task"]).sum()
        add(f"(bound) noise{' and bias' if bias else ''} measured on the gold", est, gold_sd.to_numpy())
    frame = answers[["task", "worker", "label"]]
    for label, kw in (("gaussian-em", {}), ("gaussian-em (scale=False)", {"scale": False})):
        fit = GaussianEM(**kw).fit(frame)
        add(label, fit.estimates_, fit.worker_noise_.to_numpy())
        per_dim = pd.concat([GaussianEM(**kw).fit(g[["task", "worker", "label"]]).estimates_
                             for _, g in answers.groupby("dimension")])
        add(f"{label}, per dimension", per_dim)
    est, noise = leave_one_out(frame)
    add("leave-one-out noise", est, noise)
    per_dim = pd.concat([leave_one_out(g[["task", "worker", "label"]])[0] for _, g in answers.groupby("dimension")])
    add("leave-one-out noise, per dimension", per_dim)
    return (f"#### snow_emotion: worker weighting against the mean (gold-measured noise sd of the "
            f"workers {gold_sd.min():.1f}-{gold_sd.max():.1f}; its split-half Spearman "
            f"{rho:.2f})\n\n" + markdown_table(pd.DataFrame(rows), floatfmt=".3f", index=False))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)
    md = run()
    print(md)
    if args.write_results:
        write_section("continuous-snow-weighting", md,
                      "OMP_NUM_THREADS=1 python benchmarks/investigations/snow_weighting.py --write-results")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
