"""Every end-to-end learner vs two-stage baselines: music / labelme test accuracy (+ Max-MIG structures).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/learning.py [--seeds 5] [--datasets music labelme]
        [--methods ...] [--synthetic] [--synthetic-only]

Real data: official splits from ``split.csv``; the learners see only the crowd answers of the
train-split tasks (and their features); the test-split truth is used only for the reported
accuracy; no method picks its epoch on the test set.  Every learner runs at its defaults on
the same default backbone (MLP, hidden = clip(4·sqrt(d·K), 32, 256), dropout 0.5, Adam 1e-3,
weight decay 1e-4, batch 64); trainer-based methods stop early on the *crowd* criterion of 10%
of the training tasks, custom-loop methods (EM family, Max-MIG, COINNet, DoctorNet) train for
their fixed budgets.  Two kinds of two-stage baseline ("aggregate, then train"):

``two-stage-mv`` / ``two-stage-ds``
    :class:`~crowdlearn.learning.two_stage.TwoStage`: MV / DS hard labels, then the default
    backbone with the trainer's early stopping;
``mv+mlp`` / ``ds+mlp``
    MV / DS hard labels, then a fixed 128-unit MLP (dropout 0.5, Adam 1e-3) for 60 epochs —
    a stronger baseline on music than the early-stopped one.

Synthetic (``--synthetic``): sklearn's digits (1797 x 64, 10 classes; 1200 train / 597 test)
annotated by :func:`crowdlearn.simulate.maxmig_structures` in the three information
structures x {high, low} expertise.

Prints markdown tables: mean ± sd test accuracy over seeds and mean training time (s).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from crowdlearn.core.io import load_folder
from crowdlearn.learning import get_method

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_md import recording  # noqa: E402  (benchmarks/ is on sys.path)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"  # ../shared beside the repo
BASELINES = ["mv+mlp", "ds+mlp", "two-stage-mv", "two-stage-ds"]
METHODS = BASELINES + ["crowd-layer", "conal", "doctornet", "ccem", "geocrowdnet-f", "geocrowdnet-w", "tracereg",
                       "raykar", "aggnet", "deepmf", "deepbp", "bayesdgc", "maxmig", "coinnet"]


def load_split(name: str):
    """(train CrowdLabels, X_train rows = train.tasks, X_test, y_test as str)."""
    folder = DATA / name
    full = load_folder(folder, with_features=True)
    split = pd.read_csv(folder / "split.csv").set_index("task")["split"]
    counts = np.diff(full.task_ptr)
    train_tasks = [t for t, c in zip(full.tasks, counts) if c > 0 and split.get(t) == "train"]
    train = full.subset(tasks=train_tasks)
    feats = pd.DataFrame(full.features, index=full.tasks)
    truth = pd.read_csv(folder / "truth.csv").set_index("task")["truth"]
    test = [t for t in split[split == "test"].index if t in feats.index and t in truth.index]
    return (train, feats.loc[train.tasks].to_numpy(float), feats.loc[test].to_numpy(float),
            truth.loc[test].astype(str).to_numpy())


def fit_mlp(X, y, X_test, n_classes: int, seed: int, epochs: int = 60) -> np.ndarray:
    """A fixed 128-unit MLP (dropout 0.5, Adam 1e-3, batch 64) on hard labels ``y``; class codes of X_test."""
    torch.manual_seed(seed)
    mu, sd = X.mean(0), np.where(X.std(0) > 1e-12, X.std(0), 1)
    Xt = torch.as_tensor((X - mu) / sd, dtype=torch.float32)
    yt = torch.as_tensor(y)
    net = torch.nn.Sequential(torch.nn.Linear(X.shape[1], 128), torch.nn.ReLU(), torch.nn.Dropout(0.5),
                              torch.nn.Linear(128, n_classes))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        net.train()
        for b in np.array_split(rng.permutation(len(X)), max(1, len(X) // 64)):
            loss = torch.nn.functional.cross_entropy(net(Xt[b]), yt[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        return net(torch.as_tensor((X_test - mu) / sd, dtype=torch.float32)).argmax(1).numpy()


def fixed_mlp_baseline(agg: str, train, X, X_test, seed: int) -> np.ndarray:
    """Aggregate with a registered aggregator, then :func:`fit_mlp` for 60 epochs."""
    from crowdlearn.registry import get_method as get_aggregator

    y = get_aggregator(agg)().fit(train).probas_.to_numpy().argmax(1)
    return np.asarray(train.classes)[fit_mlp(X, y, X_test, train.n_classes, seed)]


def make(method: str, seed: int):
    if method.startswith("two-stage-"):
        return get_method("two-stage")(aggregator=method.split("-")[-1], random_state=seed)
    return get_method(method)(random_state=seed)


def run(method, train, X, X_test, y_test, seeds):
    accs, times = [], []
    for seed in range(seeds):
        t0 = time.perf_counter()
        if method.endswith("+mlp"):
            pred = fixed_mlp_baseline(method.split("+")[0], train, X, X_test, seed)
        else:
            pred = make(method, seed).fit(X, train).predict(X_test)
        times.append(time.perf_counter() - t0)
        accs.append(float(np.mean(np.asarray(pred).astype(str) == y_test)))
    return 100 * np.mean(accs), 100 * np.std(accs), float(np.mean(times))


def real(args):
    print("| dataset | method | test accuracy % (mean ± sd) | train time s |")
    print("|---|---|---|---|")
    for ds in args.datasets:
        train, X, X_test, y_test = load_split(ds)
        for m in args.methods:
            mean, sd, t = run(m, train, X, X_test, y_test, args.seeds)
            print(f"| {ds} | {m} | {mean:.2f} ± {sd:.2f} | {t:.1f} |", flush=True)


def synthetic(args):
    from sklearn.datasets import load_digits

    from crowdlearn.simulate import maxmig_structures

    X, y = load_digits(return_X_y=True)
    perm = np.random.default_rng(0).permutation(len(y))
    X, y = X[perm], y[perm]
    tr, te = slice(0, 1200), slice(1200, None)
    print("| structure | expertise | method | test accuracy % (mean ± sd) | MV accuracy on train % |")
    print("|---|---|---|---|---|")
    for expertise in ["high", "low"]:
        for structure in ["independent", "naive_majority", "correlated"]:
            labels = maxmig_structures(1200, structure, expertise, n_classes=10, seed=0, truth=y[tr])
            mv = 100 * np.mean(labels.vote_counts().argmax(1) == y[tr])
            for m in args.methods:
                mean, sd, _ = run(m, labels, X[tr], X[te], y[te].astype(str), args.seeds)
                print(f"| {structure} | {expertise} | {m} | {mean:.2f} ± {sd:.2f} | {mv:.1f} |", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--datasets", nargs="+", default=["music", "labelme"])
    ap.add_argument("--methods", nargs="+", default=METHODS)
    ap.add_argument("--synthetic", action="store_true", help="also run the Max-MIG structures on digits")
    ap.add_argument("--synthetic-only", action="store_true")
    ap.add_argument("--write-results", nargs="?", const="learning", metavar="SECTION",
                    help="also write the output to this RESULTS.md section (default learning)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    with recording(args.write_results or "", enabled=bool(args.write_results)):
        if not args.synthetic_only:
            real(args)
        if args.synthetic or args.synthetic_only:
            synthetic(args)


if __name__ == "__main__":
    main()
