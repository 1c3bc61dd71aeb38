"""How NoisyBT's worker prior was chosen: a scan over synthetic crowds (never the real sets).

NoisyBT (``crowdlearn.pairwise.noisy_bt``) puts a Gaussian prior on each worker's position
bias ``q_w`` and skill logit ``g_w``.  This script compares, on synthetic crowds with
planted scores, Kendall tau-b against the planted scores of

* ``bt`` (no worker model), for reference;
* ``noisy-bt`` with the prior of crowdlearn 0.1.0 (``q_w, g_w ~ N(0, 10)``,
  ``population=False, worker_prior=0.1``);
* the hierarchical prior ``q_w ~ N(mu_q, 1/lambda)``, ``g_w ~ N(mu_g, 1/lambda)`` with the
  population means fitted, at fixed ``lambda`` in {0.1, 1, 10, 100};
* the same with ``lambda_bias``, ``lambda_skill`` by empirical Bayes (``worker_prior="auto"``,
  the default).

Scenarios (each x ``--seeds`` seeds), drawn by :func:`crowd` below:

* worker kinds -- ``reversers``: 30% of workers report the reverse outcome with probability
  0.65-0.95 (Crowd-BT's model); ``bias``: 30% near-random workers (eta 0.5-0.6) and every
  worker's answers shifted by a position bias N(0, 1) (``pairwise_crowd``'s model);
  ``guessers``: NoisyBT's own model, 30% of workers guess with probability 0.5-0.9, the
  others 0-0.15, guesses follow a bias N(0, 1.5^2); ``reliable``: every worker eta 0.85-1;
* worker activity -- uniform, or skewed (answers per worker ~ lognormal, sigma 1.5: a few
  workers give most answers, many give a handful, as on real platforms);
* presentation -- random sides, or ``confounded``: the better item shown on the right
  2/3 of the time (designs built by insertion/sorting procedures do this);
* size -- dense (200 items, 50 workers, 5,000 comparisons) or sparse (120 items, 80
  workers, 1,500 comparisons).

Usage::

    python benchmarks/pairwise_noisybt.py [--seeds 3] [--jobs 2] [--write-results]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import itertools
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from results_md import markdown_table, write_section  # noqa: E402

from crowdlearn.diagnostics.pairwise_metrics import kendall_tau  # noqa: E402
from crowdlearn.pairwise.bt import BradleyTerry  # noqa: E402
from crowdlearn.pairwise.data import Comparisons  # noqa: E402
from crowdlearn.pairwise.noisy_bt import NoisyBT  # noqa: E402

KINDS = ("reversers", "bias", "guessers", "reliable")
SIZES = {"dense": (200, 50, 5000), "sparse": (120, 80, 1500)}

#: method label -> estimator factory
METHODS = {
    "bt": lambda: BradleyTerry(),
    "noisy-bt 0.1.0 prior (N(0,10))": lambda: NoisyBT(worker_prior=0.1, population=False),
    "hier lambda=0.1": lambda: NoisyBT(worker_prior=0.1),
    "hier lambda=1": lambda: NoisyBT(worker_prior=1.0),
    "hier lambda=10": lambda: NoisyBT(worker_prior=10.0),
    "hier lambda=100": lambda: NoisyBT(worker_prior=100.0),
    "hier auto (EB, default)": lambda: NoisyBT(),
}


def crowd(kind: str, n_items: int, n_workers: int, n_comparisons: int, skewed: bool,
          confounded: bool, seed: int) -> Comparisons:
    """One synthetic crowd (no ties); see the module docstring."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(0.0, 1.5, n_items)
    bad = np.zeros(n_workers, dtype=bool)
    if kind != "reliable":
        bad[rng.permutation(n_workers)[:int(round(0.3 * n_workers))]] = True
    eta = np.where(bad, rng.uniform(0.05, 0.35, n_workers) if kind == "reversers"
                   else rng.uniform(0.5, 0.6, n_workers), rng.uniform(0.85, 1.0, n_workers))
    if kind == "guessers":
        eta = np.ones(n_workers)
    shift = rng.normal(0.0, 1.0, n_workers) if kind == "bias" else np.zeros(n_workers)
    guess = (np.where(bad, rng.uniform(0.5, 0.9, n_workers), rng.uniform(0.0, 0.15, n_workers))
             if kind == "guessers" else np.zeros(n_workers))
    guess_bias = rng.normal(0.0, 1.5, n_workers)
    weights = rng.lognormal(0.0, 1.5, n_workers) if skewed else np.ones(n_workers)
    worker = rng.choice(n_workers, n_comparisons, p=weights / weights.sum())
    i = rng.integers(0, n_items, n_comparisons)
    j = (i + rng.integers(1, n_items, n_comparisons)) % n_items
    better, worse = np.where(scores[i] >= scores[j], i, j), np.where(scores[i] >= scores[j], j, i)
    on_right = rng.random(n_comparisons) < (2.0 / 3.0 if confounded else 0.5)
    left, right = np.where(on_right, worse, better), np.where(on_right, better, worse)
    p_left = expit(scores[left] - scores[right] + shift[worker])
    truth_left = rng.random(n_comparisons) < p_left
    flip = rng.random(n_comparisons) >= eta[worker]
    answer = truth_left ^ flip
    guessing = rng.random(n_comparisons) < guess[worker]
    answer = np.where(guessing, rng.random(n_comparisons) < expit(guess_bias[worker]), answer)
    outcome = np.where(answer, 0, 1).astype(np.int8)
    return Comparisons(worker, left, right, outcome,
                       pd.Index([f"w{k}" for k in range(n_workers)], name="worker"),
                       pd.Index([f"i{k}" for k in range(n_items)], name="item"), truth=scores)


def run_one(args) -> list[dict]:
    kind, size, skewed, confounded, seed = args
    data = crowd(kind, *SIZES[size], skewed, confounded, seed)
    truth = data.truth_series()
    rows = []
    for label, make in METHODS.items():
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = make().fit(data)
        rows.append({"kind": kind, "size": size, "activity": "skewed" if skewed else "uniform",
                     "sides": "confounded" if confounded else "random", "seed": seed,
                     "method": label, "kendall_tau": kendall_tau(est.scores_, truth),
                     "time_s": time.perf_counter() - t0})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--write-results", action="store_true")
    p.add_argument("--csv", default=None, help="also save the per-seed rows here")
    args = p.parse_args(argv)
    grid = list(itertools.product(KINDS, SIZES, (False, True), (False, True), range(args.seeds)))
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = [r for chunk in pool.map(run_one, grid) for r in chunk]
    frame = pd.DataFrame(rows)
    if args.csv:
        frame.to_csv(args.csv, index=False)
    keys = ["kind", "size", "activity", "sides"]
    wide = frame.pivot_table(index=keys, columns="method", values="kendall_tau", aggfunc="mean")
    wide = wide[list(METHODS)]
    overall = wide.mean().to_frame("mean over scenarios").T
    worst = (wide.sub(wide["noisy-bt 0.1.0 prior (N(0,10))"], axis=0).min()
             .to_frame("worst change vs 0.1.0 prior").T)
    per_kind = frame.pivot_table(index="kind", columns="method", values="kendall_tau",
                                 aggfunc="mean")[list(METHODS)]
    times = frame.pivot_table(index="size", columns="method", values="time_s",
                              aggfunc="mean")[list(METHODS)]
    wide_md = markdown_table(wide.reset_index().set_index("kind"), floatfmt=".4f")
    summary_md = markdown_table(pd.concat([per_kind, overall, worst]), floatfmt=".4f")
    times_md = markdown_table(times, floatfmt=".3f")
    print(wide_md, summary_md, times_md, sep="\n\n")
    if args.write_results:
        intro = (f"NoisyBT's worker prior, chosen on synthetic crowds only (Kendall tau-b "
                 f"against the planted scores, mean of {args.seeds} seeds per scenario; "
                 "scenarios in the docstring of `benchmarks/pairwise_noisybt.py`). Columns: "
                 "`bt`; NoisyBT with crowdlearn 0.1.0's prior `q_w, g_w ~ N(0, 10)`; the "
                 "hierarchical prior `q_w ~ N(mu_q, 1/lambda)`, `g_w ~ N(mu_g, 1/lambda)` "
                 "(population means fitted) at fixed `lambda` and with `lambda_bias`, "
                 "`lambda_skill` by empirical Bayes (the default).")
        write_section("pairwise-noisybt-prior",
                      intro + "\n\nPer scenario:\n\n" + wide_md + "\n\nPer worker kind, "
                      "overall mean, and the worst per-scenario change against the 0.1.0 "
                      "prior:\n\n" + summary_md + "\n\nFit time (s, mean):\n\n" + times_md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
