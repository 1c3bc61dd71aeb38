"""Test accuracy of the Max-MIG / COINNet / EM-family / DoctorNet learners on music and labelme.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/learning_em.py [--seeds 5] [--datasets music labelme]
        [--methods maxmig coinnet raykar aggnet deepmf deepbp bayesdgc doctornet]

Official splits from ``split.csv`` (train tasks carry the crowd answers, test tasks are only
used for the accuracy).  No epoch is chosen on the test set: every method trains for its
fixed default budget.  Baselines "mv+mlp" and "ds+mlp" aggregate the crowd first and train
the same MLP (128 hidden units, dropout 0.5, Adam 1e-3, 60 epochs) on the hard labels.
Prints a markdown table: mean ± std test accuracy over seeds and mean training time.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from crowdlearn.io import load_folder
from crowdlearn.learning import get_method
from crowdlearn.registry import get_method as get_aggregator

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"  # ../shared beside the repo
METHODS = ["maxmig", "coinnet", "raykar", "aggnet", "deepmf", "deepbp", "bayesdgc", "doctornet"]


def load_split(name: str):
    folder = DATA / name
    full = load_folder(folder, with_features=True)
    split = pd.read_csv(folder / "split.csv").set_index("task")["split"]
    train_tasks = [t for t in full.tasks if split.get(t) == "train" and full.task_ptr[full.tasks.get_loc(t) + 1] > full.task_ptr[full.tasks.get_loc(t)]]
    train = full.subset(tasks=train_tasks)
    feats = pd.DataFrame(full.features, index=full.tasks)
    X_train = feats.loc[train.tasks].to_numpy(float)
    test_tasks = split[split == "test"].index
    truth = pd.read_csv(folder / "truth.csv").set_index("task")["truth"]
    test_tasks = [t for t in test_tasks if t in feats.index and t in truth.index]
    X_test = feats.loc[test_tasks].to_numpy(float)
    y_test = truth.loc[test_tasks].astype(str).to_numpy()
    return train, X_train, X_test, y_test


def two_stage(agg: str, train, X, X_test, seed: int):
    """Aggregate with a registered aggregator, then train the default MLP on hard labels."""
    y = get_aggregator(agg)().fit(train).probas_.to_numpy().argmax(1)
    torch.manual_seed(seed)
    mu, sd = X.mean(0), np.where(X.std(0) > 1e-12, X.std(0), 1)
    Xt = torch.as_tensor((X - mu) / sd, dtype=torch.float32)
    yt = torch.as_tensor(y)
    net = torch.nn.Sequential(torch.nn.Linear(X.shape[1], 128), torch.nn.ReLU(), torch.nn.Dropout(0.5),
                              torch.nn.Linear(128, train.n_classes))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    rng = np.random.default_rng(seed)
    for _ in range(60):
        net.train()
        for b in np.array_split(rng.permutation(len(X)), max(1, len(X) // 64)):
            loss = torch.nn.functional.cross_entropy(net(Xt[b]), yt[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        p = net(torch.as_tensor((X_test - mu) / sd, dtype=torch.float32)).argmax(1).numpy()
    return np.asarray(train.classes)[p]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--datasets", nargs="+", default=["music", "labelme"])
    ap.add_argument("--methods", nargs="+", default=["mv+mlp", "ds+mlp"] + METHODS)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for ds in args.datasets:
        train, X, X_test, y_test = load_split(ds)
        for meth in args.methods:
            accs, times = [], []
            for seed in range(args.seeds):
                t0 = time.perf_counter()
                if meth.endswith("+mlp"):
                    pred = two_stage(meth.split("+")[0], train, X, X_test, seed)
                else:
                    model = get_method(meth)(random_state=seed).fit(X, train)
                    pred = model.predict(X_test)
                times.append(time.perf_counter() - t0)
                accs.append(float(np.mean(pred.astype(str) == y_test)))
            rows.append((ds, meth, 100 * np.mean(accs), 100 * np.std(accs), np.mean(times)))
            print(f"| {ds} | {meth} | {rows[-1][2]:.2f} ± {rows[-1][3]:.2f} | {rows[-1][4]:.1f} |", flush=True)
    return rows


if __name__ == "__main__":
    print("| dataset | method | test accuracy % (mean ± std) | train time s |")
    print("|---|---|---|---|")
    main()
