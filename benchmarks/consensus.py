"""Consensus with a classifier: crowdlearn's ``model_consensus`` vs cleanlab's CROWDLAB.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/consensus.py [--datasets music labelme] [--seeds 3]
        [--folds 5] [--write-results]

For each dataset folder (``../shared/data/NAME`` with labels.csv, truth.csv, features.npy,
tasks.csv) and each seed:

1. out-of-sample class probabilities for every answered task by cross-fitting: the answered
   tasks are split into ``--folds`` folds; a scikit-learn logistic regression (standardised
   features, default C = 1, never tuned) is trained on the majority-vote labels of the other
   folds and predicts the held-out fold.  Tasks nobody answered (the test split) get a model
   trained on all answered tasks.  The seed changes the fold split.
2. the same probabilities go to ``crowdlearn.diagnostics.model_consensus`` (defaults,
   ``variant="auto"``: chosen by held-out answer likelihood, no gold) and to
   ``cleanlab.multiannotator.get_label_quality_multiannotator`` (its defaults); plain
   majority vote and Dawid-Skene and the classifier alone are listed for reference.
3. scores against gold on the answered tasks (cleanlab needs at least one answer per task):
   consensus accuracy, and the Spearman correlation between each method's annotator quality
   and the annotators' true accuracy (share of their answers equal to the gold label).

``--synthetic`` instead runs the simulated crowds on which ``model_consensus``'s smoothing
default for full confusion matrices (``alpha`` = 0.5) was chosen: for each alpha, the held-out
answer log-likelihood of each variant (what ``variant="auto"`` maximises), the variant it
picks and the accuracy against the planted truth.

cleanlab is a benchmark-only dependency (``pip install cleanlab``, the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from crowdlearn import DawidSkene, MajorityVote
from crowdlearn.core.data import CrowdLabels
from crowdlearn.core.io import load_folder
from crowdlearn.diagnostics import model_consensus

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_md import markdown_table, recording  # noqa: E402  (benchmarks/ is on sys.path)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"  # ../shared beside the repo


def classifier():
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))


def cross_fitted_probs(X, y_train, answered, k, n_folds, seed) -> np.ndarray:
    """(n_tasks, k) probabilities: out-of-fold for answered tasks, full fit for the others."""
    rng = np.random.default_rng(seed)
    idx = np.flatnonzero(answered)
    folds = rng.permutation(len(idx)) % n_folds
    probs = np.zeros((len(X), k))

    def fit_predict(train_rows, test_rows):
        model = classifier().fit(X[train_rows], y_train[train_rows])
        out = np.zeros((len(test_rows), k))
        out[:, model.classes_] = model.predict_proba(X[test_rows])  # a class absent from a fold keeps 0
        return out

    for f in range(n_folds):
        probs[idx[folds == f]] = fit_predict(idx[folds != f], idx[folds == f])
    rest = np.flatnonzero(~answered)
    if rest.size:
        probs[rest] = fit_predict(idx, rest)
    return probs


def run(name: str, seed: int, n_folds: int) -> tuple[dict, dict]:
    from cleanlab.multiannotator import get_label_quality_multiannotator

    data = load_folder(DATA / name, with_features=True)
    k = data.n_classes
    n_ans = data.labels_per_task()
    answered = n_ans > 0
    X = np.asarray(data.features, dtype=float)
    mv = MajorityVote(random_state=seed).fit(data.subset(tasks=data.tasks[answered]))
    y_mv = np.full(data.n_tasks, -1)
    y_mv[answered] = data.classes.get_indexer(mv.labels_.reindex(data.tasks[answered]))
    probs = cross_fitted_probs(X, y_mv, answered, k, n_folds, seed)

    truth = data.truth
    gold_ans = answered & (truth >= 0)
    # annotators' true accuracy (gold is used only here, to score)
    has_gold = truth[data.task] >= 0
    right = (data.label == truth[data.task]) & has_gold
    n_gold = np.bincount(data.worker, weights=has_gold, minlength=data.n_workers)
    true_acc = np.divide(np.bincount(data.worker, weights=right, minlength=data.n_workers), n_gold,
                         out=np.full(data.n_workers, np.nan), where=n_gold > 0)
    scored = n_gold > 0

    def acc(codes):  # codes aligned with data.tasks
        return float(np.mean(codes[gold_ans] == truth[gold_ans]))

    def rho(quality):
        q = np.asarray(quality, float)
        ok = scored & np.isfinite(q)
        return float(spearmanr(q[ok], true_acc[ok])[0])

    row, times = {"dataset": name, "seed": seed}, {}
    row["model alone"] = acc(np.argmax(probs, axis=1))
    row["mv"] = acc(y_mv)
    ds = DawidSkene().fit(data.subset(tasks=data.tasks[answered]))
    ds_codes = np.full(data.n_tasks, -1)
    ds_codes[answered] = data.classes.get_indexer(ds.labels_.reindex(data.tasks[answered]))
    row["ds"] = acc(ds_codes)

    frame = pd.DataFrame(probs, index=data.tasks, columns=data.classes)
    t0 = time.perf_counter()
    res = model_consensus(data, frame, random_state=seed)
    times["crowdlearn"] = time.perf_counter() - t0
    codes = data.classes.get_indexer(res.consensus.reindex(data.tasks))
    row["crowdlearn model_consensus"] = acc(codes)

    # cleanlab: wide (answered tasks x annotators) matrix of class codes, NaN = no answer
    wide = np.full((int(answered.sum()), data.n_workers), np.nan)
    pos = np.cumsum(answered) - 1
    wide[pos[data.task], data.worker] = data.label
    t0 = time.perf_counter()
    out = get_label_quality_multiannotator(
        pd.DataFrame(wide, columns=np.arange(data.n_workers)), probs[answered], verbose=False,
    )
    times["cleanlab"] = time.perf_counter() - t0
    cl_codes = np.full(data.n_tasks, -1)
    cl_codes[answered] = out["label_quality"]["consensus_label"].to_numpy()
    row["cleanlab crowdlab"] = acc(cl_codes)

    cl_quality = out["annotator_stats"]["annotator_quality"].reindex(np.arange(data.n_workers))
    corr = {
        "dataset": name, "seed": seed,
        "crowdlearn quality": rho(res.annotators["quality"].reindex(data.workers)),
        "crowdlearn accuracy": rho(res.annotators["accuracy"].reindex(data.workers)),
        "cleanlab annotator_quality": rho(cl_quality),
        "ds skills_": rho(ds.skills_.reindex(data.workers)),
    }
    # tasks nobody answered (the test split): the calibrated classifier vs the raw one
    gold_rest = ~answered & (truth >= 0)
    if gold_rest.any():
        row["no-answer tasks: model alone"] = float(np.mean(np.argmax(probs, axis=1)[gold_rest] == truth[gold_rest]))
        row["no-answer tasks: model_consensus"] = float(np.mean(codes[gold_rest] == truth[gold_rest]))
    row["variant"] = f"{res.worker_model}/{res.calibration}"
    row["model weight"] = res.model_weight
    row["crowdlearn s"] = times["crowdlearn"]
    row["cleanlab s"] = times["cleanlab"]
    return row, corr


def simulated(structured: bool, n=600, k=5, m=20, r=3, model_acc=0.6, seed=1):
    """A crowd of 20 annotators (accuracy 0.4-0.9; ``structured``: each confuses class j with
    j+1 or j+2, else errors spread evenly) and a classifier right on ``model_acc`` of the tasks."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    conf = np.empty((m, k, k))
    for w in range(m):
        a = rng.uniform(0.4, 0.9)
        if structured:
            c = np.full((k, k), 0.02)
            np.fill_diagonal(c, a)
            for j in range(k):
                c[j, (j + 1 + w % 2) % k] += 1 - a
        else:
            c = np.full((k, k), (1 - a) / (k - 1))
            np.fill_diagonal(c, a)
        conf[w] = c / c.sum(axis=1, keepdims=True)
    task = np.repeat(np.arange(n), r)
    worker = np.concatenate([rng.choice(m, r, replace=False) for _ in range(n)])
    label = (rng.random(len(task))[:, None] > conf[worker, y[task]].cumsum(axis=1)).sum(axis=1)
    pred = np.where(rng.random(n) < model_acc, y, (y + rng.integers(1, k, n)) % k)
    logits = rng.normal(0, 1, (n, k))
    logits[np.arange(n), pred] += 2.0
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    data = CrowdLabels.from_codes(task, worker, np.minimum(label, k - 1), n_tasks=n, n_workers=m, n_classes=k)
    return data, p, y


def synthetic() -> None:
    rows = []
    for structured in (True, False):
        for seed in (1, 2):
            data, p, y = simulated(structured, seed=seed)
            for alpha in (0.0, 0.1, 0.5, 1.0):
                res = model_consensus(data, p, alpha=alpha, random_state=seed)
                row = {"crowd": "structured" if structured else "one-coin", "seed": seed, "alpha": alpha}
                for _, s in res.selection.iterrows():
                    row[f"{s.worker_model}/{s.calibration}"] = s.held_out_loglik
                row["picked"] = f"{res.worker_model}/{res.calibration}"
                row["accuracy"] = float(np.mean(data.classes.get_indexer(res.consensus) == y))
                rows.append(row)
    print("### Simulated crowds: held-out answer log-likelihood per answer of each variant, by alpha\n")
    print(markdown_table(pd.DataFrame(rows), floatfmt=".3f", index=False))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=["music", "labelme"])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--synthetic", action="store_true", help="the simulated crowds of the alpha default")
    p.add_argument("--write-results", nargs="?", const="consensus", metavar="SECTION")
    args = p.parse_args(argv)
    if args.synthetic:
        with recording(args.write_results or "consensus-synthetic", enabled=bool(args.write_results)):
            synthetic()
        return
    with recording(args.write_results or "consensus", enabled=bool(args.write_results)):
        rows, corrs = [], []
        for name in args.datasets:
            for seed in range(args.seeds):
                row, corr = run(name, seed, args.folds)
                rows.append(row)
                corrs.append(corr)
        import cleanlab

        print(f"cleanlab {cleanlab.__version__}, scikit-learn logistic regression, "
              f"{args.folds}-fold cross-fitting\n")
        acc = pd.DataFrame(rows)
        num = ["model alone", "mv", "ds", "cleanlab crowdlab", "crowdlearn model_consensus",
               "no-answer tasks: model alone", "no-answer tasks: model_consensus",
               "model weight", "crowdlearn s", "cleanlab s"]
        num = [c for c in num if c in acc.columns]
        print("### Consensus accuracy against gold on the answered tasks, per seed "
              "(seed = cross-fitting fold split)\n")
        print(markdown_table(acc, floatfmt=".3f", index=False))
        print("\n### Mean over seeds\n")
        print(markdown_table(acc.groupby("dataset", sort=False)[num].mean(), floatfmt=".3f"))
        wins = (acc["crowdlearn model_consensus"] >= acc["cleanlab crowdlab"]).groupby(acc["dataset"], sort=False).mean()
        print("\nShare of runs where crowdlearn's consensus accuracy >= cleanlab's: "
              + ", ".join(f"{d} {v:.0%}" for d, v in wins.items()))
        print("\n### Annotator quality vs true annotator accuracy (Spearman), mean over seeds\n")
        cor = pd.DataFrame(corrs)
        print(markdown_table(cor.groupby("dataset", sort=False).mean().drop(columns="seed"), floatfmt=".3f"))


if __name__ == "__main__":
    main()
