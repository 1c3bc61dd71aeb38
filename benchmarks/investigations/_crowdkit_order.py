"""Does crowd-kit 1.4.2's MACE / GLAD depend on the order in which ids first appear?

Runs inside ``benchmarks/.venv-crowdkit`` (called by ``crowdkit_order.py``); never imports
crowdlearn; prints one JSON object.  :func:`mace_loglik`, :func:`glad_loglik` and
:func:`canonical` use numpy and pandas only, so the driver imports them too.

Every data set is fitted twice: as it is, and with task, worker and label ids renamed so that
their order of first appearance in ``labels.csv`` is also their sorted order (the i-th worker
to appear becomes ``w000i``, and so on).  That is a pure relabelling: a correct
implementation returns the same posteriors up to the renaming.

The suspected mechanism in ``MACE._e_step``: the spamming-strategy counts are
``annotation.groupby(["worker", "label"]).sum()...unstack()``, whose rows and columns come
out *sorted*, and ``_m_step`` takes their ``.values`` into ``thetas_``, which is indexed by
``pd.factorize`` codes (order of first appearance).  So unless both orders agree, worker
``w`` gets the strategy counted for another worker, over permuted classes.  (The
"knows" counts are assigned as a Series and aligned by name, so they are right.)

crowd-kit's MACE draws every restart's start with the same ``random_state``, so its
``n_restarts`` runs are identical; this script fits it with ``n_restarts=1`` and checks that
the start really is the same draw each time (``restarts_identical``).

Usage (in the crowd-kit venv)::

    python _crowdkit_order.py --out DIR [--mace-iter 50] [--skip-glad-above 40000] DATASET_DIR...

For each data set the posteriors of both fits (the renamed one mapped back to the original
names) are written to ``DIR/<set>/<method>_{asis,renamed}.csv`` for the driver.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

METHODS = ("mace_em", "mace_vb", "glad")


def canonical(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, dict]]:
    """``df`` with ids renamed so that first-appearance order == sorted order, and the maps
    {column: {old: new}}."""
    out, maps = df.copy(), {}
    for col, prefix in (("task", "t"), ("worker", "w"), ("label", "c")):
        uniq = pd.unique(df[col])
        width = len(str(len(uniq)))
        maps[col] = {old: f"{prefix}{i:0{width}d}" for i, old in enumerate(uniq)}
        out[col] = df[col].map(maps[col])
    return out, maps


def _codes(df: pd.DataFrame, workers, classes):
    """Integer codes of the answers against the given worker and class orders."""
    tasks, task_names = pd.factorize(df["task"])
    w = pd.Index(workers).get_indexer(df["worker"])
    lab = pd.Index(classes).get_indexer(df["label"])
    return tasks, len(task_names), w, lab


def _task_logsumexp(tasks, n_tasks, log_p: np.ndarray) -> float:
    """sum over tasks of log( (1/K) sum_t exp(sum of the task's answers' log_p[:, t]) )."""
    k = log_p.shape[1]
    per_task = np.zeros((n_tasks, k))
    np.add.at(per_task, tasks, log_p)
    mx = per_task.max(axis=1, keepdims=True)
    return float((np.log(np.exp(per_task - mx).sum(axis=1)) + mx[:, 0] - np.log(k)).sum())


def mace_loglik(df: pd.DataFrame, workers, classes, know, strategies) -> float:
    """Marginal log-likelihood of MACE with a uniform class prior.

    ``know[w]`` = P(worker w does not spam), ``strategies[w, l]`` its spamming distribution,
    rows in ``workers`` order, columns in ``classes`` order (each row normalised here, so
    VB's geometric-mean weights count as the point estimate they stand for)."""
    know = np.asarray(know, float)
    xi = np.asarray(strategies, float)
    xi = xi / xi.sum(axis=1, keepdims=True)
    tasks, n_tasks, w, lab = _codes(df, workers, classes)
    k = len(classes)
    p = (1 - know[w])[:, None] * xi[w, lab][:, None] + know[w][:, None] * (lab[:, None] == np.arange(k))
    return _task_logsumexp(tasks, n_tasks, np.log(np.maximum(p, 1e-300)))


def glad_loglik(df: pd.DataFrame, alphas: pd.Series, log_betas: pd.Series, classes) -> float:
    """Marginal log-likelihood of GLAD with a uniform class prior:
    P(right) = sigmoid(alpha_w exp(log_beta_n)), each wrong class (1 - that) / (K - 1)."""
    k = len(classes)
    tasks, task_names = pd.factorize(df["task"])
    lab = pd.Index(classes).get_indexer(df["label"])
    x = alphas.reindex(df["worker"]).to_numpy() * np.exp(log_betas.reindex(df["task"]).to_numpy())
    log_right = -(np.log1p(np.exp(-np.abs(x))) + np.maximum(-x, 0.0))
    log_wrong = -(np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0.0)) - np.log(k - 1)
    log_p = np.where(lab[:, None] == np.arange(k), log_right[:, None], log_wrong[:, None])
    return _task_logsumexp(tasks, len(task_names), log_p)


def fit(method: str, df: pd.DataFrame, args) -> dict:
    """Fit one crowd-kit model; its posteriors (tasks x labels, by name) and log-likelihood."""
    from crowdkit.aggregation import GLAD, MACE

    t0 = time.perf_counter()
    if method.startswith("mace"):
        model = MACE(method=method[5:], n_iter=args.mace_iter, n_restarts=1).fit(df)
        workers, classes = pd.unique(df["worker"]), pd.unique(df["label"])  # crowd-kit's order
        ll = mace_loglik(df, workers, classes, model.spamming_[:, 1], model.thetas_)
    else:
        model = GLAD(n_iter=args.glad_iter).fit(df)
        classes = list(model.probas_.columns)
        ll = glad_loglik(df, model.alphas_, model.betas_, classes)
    probas = model.probas_.astype(float)
    return {"probas": probas, "loglik": ll, "time": time.perf_counter() - t0}


def accuracy(probas: pd.DataFrame, truth: pd.Series) -> float:
    return float((probas.idxmax(axis=1).reindex(truth.index) == truth).mean())


def restarts_identical(df: pd.DataFrame) -> bool:
    """crowd-kit's MACE draws the same start for every restart (the same ``random_state``)."""
    from crowdkit.aggregation import MACE

    m = MACE()
    n_w, n_l = df["worker"].nunique(), df["label"].nunique()
    m._initialize(n_w, n_l)
    first = (m.spamming_.copy(), m.thetas_.copy())
    m._initialize(n_w, n_l)
    return bool(np.array_equal(first[0], m.spamming_) and np.array_equal(first[1], m.thetas_))


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--mace-iter", type=int, default=50)
    p.add_argument("--glad-iter", type=int, default=100)
    p.add_argument("--skip-glad-above", type=int, default=40000,
                   help="answers; crowd-kit's GLAD is skipped on larger sets")
    p.add_argument("--skip-mace-above", type=int, default=200000)
    p.add_argument("folders", nargs="+", type=Path)
    args = p.parse_args(argv)
    import crowdkit

    report = {"crowdkit": crowdkit.__version__, "sets": {}}
    for folder in args.folders:
        df = pd.read_csv(folder / "labels.csv", dtype=str, keep_default_na=False,
                         usecols=["task", "worker", "label"])
        truth = pd.read_csv(folder / "truth.csv", dtype=str, keep_default_na=False)
        truth = truth.set_index("task")["truth"]
        truth = truth[truth.index.isin(df["task"])]
        renamed, maps = canonical(df)
        back = {c: {v: k for k, v in m.items()} for c, m in maps.items()}
        info = {
            "answers": len(df),
            "workers_in_sorted_order": bool(pd.Index(pd.unique(df["worker"])).is_monotonic_increasing),
            "labels_in_sorted_order": bool(pd.Index(pd.unique(df["label"])).is_monotonic_increasing),
            "restarts_identical": restarts_identical(df),
            "methods": {},
        }
        (args.out / folder.name).mkdir(parents=True, exist_ok=True)
        for method in METHODS:
            limit = args.skip_glad_above if method == "glad" else args.skip_mace_above
            if len(df) > limit:
                info["methods"][method] = {"skipped": f"{len(df)} answers > {limit}"}
                continue
            a = fit(method, df, args)
            b = fit(method, renamed, args)
            pb = b["probas"].rename(index=back["task"], columns=back["label"])
            pb = pb.reindex(index=a["probas"].index, columns=a["probas"].columns)
            a["probas"].to_csv(args.out / folder.name / f"{method}_asis.csv")
            pb.to_csv(args.out / folder.name / f"{method}_renamed.csv")
            info["methods"][method] = {
                "acc_asis": accuracy(a["probas"], truth),
                "acc_renamed": accuracy(pb, truth),
                "max_abs_posterior_diff": float(np.abs(a["probas"].to_numpy() - pb.to_numpy()).max()),
                "loglik_asis": a["loglik"],
                "loglik_renamed": b["loglik"],
                "time": a["time"] + b["time"],
            }
            print(f"{folder.name} {method}: {a['time'] + b['time']:.1f}s", file=sys.stderr, flush=True)
        report["sets"][folder.name] = info
    sys.stdout.write(json.dumps(report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
