"""Similarity annotations (crowdclustering): accuracy on simulated crowds and time at 10^6 answers.

Two tables, each written to its own RESULTS.md section with ``--write-results``:

* ``similarity-accuracy``: adjusted Rand index (mean over seeds) of every registered
  similarity method against the planted clusters, on crowds of
  :func:`crowdlearn.simulate.similarity.similarity_crowd` (1,000 items, K = 5, 50
  annotators, reliable ones with reliability uniform on [0.7, 0.95], uniformly random pairs),
  (a) by answers per item with 20% coin-flipping annotators, (b) by fraction of
  coin-flippers at 60 answers per item.  Methods get ``n_clusters=5``; the "estimated K" rows
  run ``symnmf`` with ``n_clusters=None`` (eigen-gap).  There is no real similarity set in
  ../shared/data, so no real-set table.
* ``similarity-features``: with Gaussian item features and few answers per item, every
  method including the end-to-end ``crowd-clustering`` learner.
* ``similarity-speed``: every method at 10^6 answers (20,000 items, 100 answers per item,
  K = 5), fit time (wall and process CPU seconds) and ARI; the learner for one epoch.

Usage::

    python benchmarks/similarity.py [--write-results] [--seeds 3] [--skip-speed]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

import crowdlearn  # noqa: E402
from crowdlearn.core.base import get_tags  # noqa: E402
from crowdlearn.diagnostics.similarity_metrics import adjusted_rand  # noqa: E402
from crowdlearn.simulate.similarity import similarity_crowd  # noqa: E402
from results_md import markdown_table, write_section  # noqa: E402

K = 5


def label_only() -> dict:
    """The registered similarity methods that need no item features."""
    return {name: cls for name, cls in crowdlearn.methods(kind="similarity").items()
            if not get_tags(cls).requires_features}


def _score(name, cls, data, planted, **params):
    est = cls(**params).fit(data)
    return adjusted_rand(planted.clusters, est.clusters_.to_numpy())


def accuracy(seeds: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    methods = label_only()
    by_answers, by_random = {}, {}
    grids = [("answers per item", [20, 40, 60, 100, 200], lambda v: dict(answers_per_item=v,
                                                                         random_fraction=0.2),
              by_answers),
             ("random annotators", [0.0, 0.2, 0.4, 0.6], lambda v: dict(answers_per_item=60,
                                                                       random_fraction=v),
              by_random)]
    for _, values, crowd_args, table in grids:
        for value in values:
            rows = {}
            for seed in range(seeds):
                data, planted = similarity_crowd(n_items=1000, n_clusters=K, n_workers=50,
                                                 seed=seed, **crowd_args(value))
                for name, cls in methods.items():
                    rows.setdefault(name, []).append(_score(name, cls, data, planted, n_clusters=K))
                rows.setdefault("symnmf (estimated K)", []).append(
                    _score("symnmf", methods["symnmf"], data, planted, n_clusters=None))
            table[value] = {name: float(np.mean(v)) for name, v in rows.items()}
            print(value, table[value], flush=True)
    a = pd.DataFrame(by_answers)
    a.columns = [f"{c} ({c * 1000 // 2:,} answers)" for c in a.columns]
    r = pd.DataFrame(by_random)
    r.columns = [f"{int(c * 100)}%" for c in r.columns]
    return a, r


def with_features(seeds: int) -> pd.DataFrame:
    """ARI with Gaussian item features (10 dimensions, centres at norm 3) and few answers:
    every method, the end-to-end learner included."""
    methods = crowdlearn.methods(kind="similarity")
    table = {}
    for api in (2, 4, 8, 20):
        rows = {}
        for seed in range(seeds):
            data, planted = similarity_crowd(n_items=1000, n_clusters=K, n_workers=50,
                                             answers_per_item=api, random_fraction=0.2,
                                             n_features=10, separation=3.0, seed=seed)
            for name, cls in methods.items():
                rows.setdefault(name, []).append(_score(name, cls, data, planted, n_clusters=K))
        table[f"{api} ({api * 1000 // 2:,} answers)"] = {n: float(np.mean(v)) for n, v in rows.items()}
        print(api, table, flush=True)
    return pd.DataFrame(table)


def speed() -> pd.DataFrame:
    data, planted = similarity_crowd(n_items=20_000, n_clusters=K, n_workers=500,
                                     answers_per_item=100, random_fraction=0.2, seed=0)
    assert data.n_answers == 1_000_000
    rows = {}
    for name, cls in label_only().items():
        t0, c0 = time.perf_counter(), time.process_time()
        est = cls(n_clusters=K).fit(data)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        rows[name] = {"wall s": wall, "cpu s": cpu,
                      "ARI": adjusted_rand(planted.clusters, est.clusters_.to_numpy())}
        print(name, rows[name], flush=True)
    # the end-to-end learner: one epoch over the 10^6 answers (its time is linear in epochs)
    feats, planted_f = similarity_crowd(n_items=20_000, n_clusters=K, n_workers=500,
                                        answers_per_item=100, random_fraction=0.2,
                                        n_features=10, separation=3.0, seed=0)
    for name, cls in crowdlearn.methods(kind="similarity").items():
        if name in rows:
            continue
        t0, c0 = time.perf_counter(), time.process_time()
        est = cls(n_clusters=K, epochs=1).fit(feats)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        rows[f"{name} (1 epoch)"] = {"wall s": wall, "cpu s": cpu,
                                     "ARI": adjusted_rand(planted_f.clusters, est.clusters_.to_numpy())}
        print(name, rows[f"{name} (1 epoch)"], flush=True)
    return pd.DataFrame(rows).T


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--write-results", action="store_true")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--skip-speed", action="store_true")
    p.add_argument("--skip-accuracy", action="store_true")
    args = p.parse_args()
    command = "python benchmarks/similarity.py " + " ".join(sys.argv[1:])
    if not args.skip_accuracy:
        by_answers, by_random = accuracy(args.seeds)
        md = ("Adjusted Rand index against the planted clusters, mean over "
              f"{args.seeds} seeds; 1,000 items, K = 5, 50 annotators (reliable ones: "
              "reliability uniform on [0.7, 0.95]), uniformly random pairs.\n\n"
              "By answers per item (20% coin-flipping annotators):\n\n"
              + markdown_table(by_answers, floatfmt=".3f")
              + "\n\nBy fraction of coin-flipping annotators (60 answers per item, 30,000 "
              "answers):\n\n" + markdown_table(by_random, floatfmt=".3f"))
        print(md)
        if args.write_results:
            write_section("similarity-accuracy", md, command)
        feat = with_features(args.seeds)
        md = ("Adjusted Rand index with item features (Gaussian clusters: centres at norm 3 in "
              f"10 dimensions, unit noise), mean over {args.seeds} seeds; 1,000 items, K = 5, "
              "20% coin-flipping annotators, few answers per item.  `crowd-clustering` learns "
              "f(x) end to end (defaults: 60 epochs); the others use the answers only.\n\n"
              + markdown_table(feat, floatfmt=".3f"))
        print(md)
        if args.write_results:
            write_section("similarity-features", md, command)
    if not args.skip_speed:
        table = speed()
        md = ("Fit at 10^6 answers (20,000 items, 500 annotators, 100 answers per item, "
              "K = 5 given, 20% coin-flippers), one BLAS thread; ARI against the planted "
              "clusters.  `crowd-clustering` is timed for one epoch (torch, CPU; its default "
              "is 60 epochs, time linear in epochs), on the same crowd with 10 Gaussian "
              "features.\n\n" + markdown_table(table, floatfmt=".3f"))
        print(md)
        if args.write_results:
            write_section("similarity-speed", md, command)


if __name__ == "__main__":
    main()
