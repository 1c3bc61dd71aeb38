"""Synthetic end-to-end settings: Max-MIG information structures, COINNet outliers, deepBP vs deepMF.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/learning_synthetic.py [--seeds 3] [--part maxmig coinnet deepbp]

* Max-MIG (Cao et al. 2019, Dogs-vs-Cats crowds on Gaussian-cluster features,
  :func:`crowdlearn.simulate.maxmig_structures` on :func:`crowdlearn.simulate.class_features`): accuracy of the data classifier on a
  held-out test set for the three information structures in low and high expertise, next to
  "MV then train" (same MLP on hard majority labels).
* COINNet: AUC of ``outlier_scores_`` against planted instance-dependent outliers and test
  accuracy (:func:`crowdlearn.simulate.instance_outliers`).
* deepBP vs deepMF (Kim et al. 2022 sec. 4.1): sparse (3, 4)-regular binary crowd with
  Beta(2, 1) one-coin workers, 0 / 1 / 3 extreme spammers, model prior Dir(2, b) with b in
  {1.0 (true), 1.5 (mis-specified)}; inference accuracy on the training tasks.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from sklearn.metrics import roc_auc_score

from crowdlearn.learning import get_method
from crowdlearn.core.stats import vote_fractions as soft_majority
from crowdlearn import simulate
from learning import fit_mlp  # benchmarks/ is on sys.path when this script runs
from results_md import recording  # noqa: E402  (benchmarks/ is on sys.path)


def feature_truth(n_tasks, k, separation, seed):
    """Balanced random truth and Gaussian class-cluster features for it (10 features)."""
    truth = np.random.default_rng(seed).integers(0, k, n_tasks)
    return truth, simulate.class_features(truth, k, 10, separation, seed + 1)[0]


def mv_then_train(labels, X, X_test, seed):
    """Soft-majority hard labels, then the fixed MLP of benchmarks/learning.py (30 epochs)."""
    return fit_mlp(X, soft_majority(labels).argmax(1), X_test, labels.n_classes, seed, epochs=30)


def part_maxmig(seeds):
    print("\n| expertise | structure | MV then train | Max-MIG KL | Max-MIG Pearson | Max-MIG JS |")
    print("|---|---|---|---|---|---|")
    for exp in ("low", "high"):
        for st in ("independent", "naive_majority", "correlated"):
            cols = {"mv": [], "kl": [], "pearson": [], "js": []}
            for seed in range(seeds):
                # train and test items share the class centres (feature seed) but not the crowd
                truth, X_all = feature_truth(4000, 2, 2.5, seed)
                labels = simulate.maxmig_structures(4000, st, exp, seed=seed + 2, truth=truth, features=X_all)
                tr, te = np.arange(2000), np.arange(2000, 4000)
                train = labels.subset(tasks=labels.tasks[tr])
                X, X_test, y_test = labels.features[tr], labels.features[te], labels.truth[te]
                cols["mv"].append(np.mean(mv_then_train(train, X, X_test, seed) == y_test))
                for div in ("kl", "pearson", "js"):
                    m = get_method("maxmig")(divergence=div, random_state=seed).fit(X, train)
                    cols[div].append(np.mean(m.predict_proba(X_test).argmax(1) == y_test))
            cells = " | ".join(f"{100 * np.mean(v):.1f} ± {100 * np.std(v):.1f}" for v in cols.values())
            print(f"| {exp} | {st} | {cells} |", flush=True)


def part_coinnet(seeds):
    print("\n| outlier fraction | outlier AUC | test accuracy COINNet | test accuracy AggNet |")
    print("|---|---|---|---|")
    for frac in (0.1, 0.2):
        auc, acc, acc_agg = [], [], []
        for seed in range(seeds):
            truth, X_all = feature_truth(3000, 4, 3.0, seed)
            labels = simulate.instance_outliers(truth, X_all, outlier_frac=frac, n_workers=20, labels_per_task=5,
                                                accuracy=(0.6, 0.9), outlier_prob=0.8, seed=seed)
            out = labels.planted.outlier_class >= 0
            tr, te = np.arange(1500), np.arange(1500, 3000)
            train = labels.subset(tasks=labels.tasks[tr])
            m = get_method("coinnet")(random_state=seed).fit(labels.features[tr], train)
            auc.append(roc_auc_score(out[tr], m.outlier_scores_.to_numpy()))
            acc.append(np.mean(m.predict_proba(labels.features[te]).argmax(1) == labels.truth[te]))
            a = get_method("aggnet")(random_state=seed).fit(labels.features[tr], train)
            acc_agg.append(np.mean(a.predict_proba(labels.features[te]).argmax(1) == labels.truth[te]))
        print(f"| {frac} | {np.mean(auc):.3f} ± {np.std(auc):.3f} | {100 * np.mean(acc):.1f} ± {100 * np.std(acc):.1f} "
              f"| {100 * np.mean(acc_agg):.1f} ± {100 * np.std(acc_agg):.1f} |", flush=True)


def part_deepbp(seeds):
    print("\n| extreme spammers | model prior | deepMF inference acc | deepBP inference acc | deepMF worst seed | deepBP worst seed |")
    print("|---|---|---|---|---|---|")
    for ne in (0, 1, 3):
        for b in (1.0, 1.5):
            mf, bp = [], []
            for seed in range(seeds):
                truth, X_all = feature_truth(1000, 2, 1.0, seed)
                labels = simulate.sparse_regular(1000, 3, 4, dense_spammers=ne, seed=seed, truth=truth, features=X_all)
                for name, acc in (("deepmf", mf), ("deepbp", bp)):
                    m = get_method(name)(alpha=2.0, beta=b, max_iter=10, random_state=seed).fit(labels.features, labels)
                    acc.append(np.mean(m.probas_.to_numpy().argmax(1) == labels.truth))
            print(f"| {ne} | Dir(2, {b}) | {100 * np.mean(mf):.1f} ± {100 * np.std(mf):.1f} | "
                  f"{100 * np.mean(bp):.1f} ± {100 * np.std(bp):.1f} | {100 * min(mf):.1f} | {100 * min(bp):.1f} |", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--part", nargs="+", default=["maxmig", "coinnet", "deepbp"])
    ap.add_argument("--write-results", nargs="?", const="learning-synthetic", metavar="SECTION",
                    help="also write the output to this RESULTS.md section (default learning-synthetic)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    with recording(args.write_results or "", enabled=bool(args.write_results)):
        for part in args.part:
            {"maxmig": part_maxmig, "coinnet": part_coinnet, "deepbp": part_deepbp}[part](args.seeds)


if __name__ == "__main__":
    main()
