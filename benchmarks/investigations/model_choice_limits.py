"""Why no likelihood criterion picks one-coin on zencrowd, and two hierarchical variants that were not kept.

One-off investigation for RESULTS section 9 (issue 15).  Three questions:

1. ``--own``: does any candidate's *own* worker model predict withheld answers better than
   the Dawid-Skene family on the sets where one-coin or GLAD wins on gold?  5-fold
   cross-validation over answers (the folds of ``auto``); the score of an answer is
   ``log sum_c q_j(c) P_w(answer | c)`` with ``q`` and ``P_w`` fitted without it.
2. ``--dense``: on zencrowd_us, the accuracy and DS confusion of the dense workers.
3. ``--variants``: two variants of ``hds`` prototyped here: a community model (a mixture of
   population Dirichlets, Venanzi et al. 2014) and the population strength chosen by an
   approximate leave-one-answer-out likelihood instead of the marginal likelihood.

Run from the repository root: ``python benchmarks/investigations/model_choice_limits.py --own --dense --variants``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar
from scipy.special import digamma, expit, gammaln

from crowdlearn.aggregation.auto import _folds
from crowdlearn.aggregation.hierarchical_ds import fit_dirichlet_rows
from crowdlearn.benchmarking import gold_accuracy
from crowdlearn.core.io import load_folder
from crowdlearn.core.stats import vote_fractions
from crowdlearn.registry import get_method

ROOT = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def own_model_scores(name: str, methods=("ds", "hds", "onecoin", "glad")) -> dict:
    data = load_folder(ROOT / name)
    folds = _folds(data, 5, np.random.default_rng(0))
    out = {}
    for m in methods:
        scores = []
        for mask in folds:
            train, test = data._select_keep_ids(~mask), data._select_keep_ids(mask)
            est = get_method(m)().fit(train)
            q = est.probas_.reindex(index=train.tasks, columns=train.classes, fill_value=0).to_numpy()[test.task]
            k = train.n_classes
            if m == "glad":
                s = expit(est.skills_.to_numpy()[test.worker] * est.difficulties_.reindex(train.tasks).to_numpy()[test.task])
                hit = np.eye(k)[test.label]
                p = (q * (hit * s[:, None] + (1 - hit) * ((1 - s) / (k - 1))[:, None])).sum(1)
            else:
                p = (q * est.confusions_[test.worker, :, test.label]).sum(1)
            scores.append(np.log(np.maximum(p, 1e-300)))
        out[m] = float(np.concatenate(scores).mean())
    return out


def dense_workers(name: str = "zencrowd_us", min_answers: int = 300) -> pd.DataFrame:
    data = load_folder(ROOT / name)
    ds = get_method("ds")().fit(data)
    g = data.truth
    rows = {}
    for w in np.flatnonzero(np.bincount(data.worker) >= min_answers):
        m = data.worker == w
        t, lab = data.task[m], data.label[m]
        ok = g[t] >= 0
        rows[data.workers[w]] = {
            "answers": int(m.sum()),
            "gold accuracy": float((g[t] == lab)[ok].mean()),
            "false positives (gold 0, says 1)": int(((g[t] == 0) & (lab == 1))[ok].sum()),
            "ds P(1|0)": float(ds.confusions_[w, 0, 1]),
            "ds P(1|1)": float(ds.confusions_[w, 1, 1]),
        }
    return pd.DataFrame(rows).T


# ---------------------------------------------------------------- the two variants
def _counts(data, post):
    c = np.zeros((data.n_workers, data.n_classes, data.n_classes))
    np.add.at(c, (data.worker, slice(None), data.label), post[data.task])
    return c


def _estep(data, log_conf, log_prior):
    lp = np.tile(log_prior, (data.n_tasks, 1))
    np.add.at(lp, data.task, log_conf[data.worker, :, data.label])
    lp -= lp.max(1, keepdims=True)
    p = np.exp(lp)
    return p / p.sum(1, keepdims=True)


def _dm_rows(n, a):
    return gammaln(a.sum(-1)) - gammaln(n.sum(-1) + a.sum(-1)) + (gammaln(n + a) - gammaln(a)).sum(-1)


def communities(data, n_comm: int = 2, n_iter: int = 100, seed: int = 0) -> np.ndarray:
    """EM with worker rows drawn from a mixture of ``n_comm`` population Dirichlets."""
    k, m = data.n_classes, data.n_workers
    post = vote_fractions(data)
    rng = np.random.default_rng(seed)
    a = np.stack([np.ones((k, k)) + (2 + 2 * i) * np.eye(k) for i in range(n_comm)])
    r = rng.dirichlet(np.ones(n_comm), size=m)
    rho = np.full(n_comm, 1.0 / n_comm)
    for _ in range(n_iter):
        n = _counts(data, post)
        for _ in range(3):
            lr = np.log(rho)[None] + np.stack([sum(_dm_rows(n[:, c], a[q, c][None]) for c in range(k)) for q in range(n_comm)], 1)
            lr -= lr.max(1, keepdims=True)
            r = np.exp(lr)
            r /= r.sum(1, keepdims=True)
            rho = r.mean(0) + 1e-9
            for q in range(n_comm):  # weighted Minka: rows of community q weighted by membership
                a[q] = fit_dirichlet_rows(n * r[:, q, None, None], a[q], max_iter=30)
        prior_counts = np.einsum("wq,qck->wck", r, a)
        conf = (n + prior_counts) / (n + prior_counts).sum(2, keepdims=True)
        cc = post.sum(0) + 1.0
        post = _estep(data, np.log(conf), np.log(cc / cc.sum()))
    return post


def loo_strength(data, n_iter: int = 100) -> np.ndarray:
    """EM with the population strength maximising an approximate leave-one-answer-out likelihood."""
    k = data.n_classes
    post = vote_fractions(data)
    t, w, lab = data.task, data.worker, data.label
    n = _counts(data, post)
    mu = n.sum(0) / n.sum((0, 2))[:, None]
    conf = (n + 4 * mu) / (n + 4 * mu).sum(2, keepdims=True)
    for _ in range(n_iter):
        n = _counts(data, post)
        mu = (n.sum(0) + 1e-3) / (n.sum((0, 2))[:, None] + k * 1e-3)

        def neg_loo(log_s):
            s = np.exp(log_s)
            f = conf[w, :, lab]
            cav = post[t] / np.maximum(f, 1e-300)
            cav /= cav.sum(1, keepdims=True)
            q = post[t]
            p = (cav * np.maximum(n[w, :, lab] - q + s * mu[:, lab].T, 1e-12) / (n[w].sum(2) - q + s)).sum(1)
            return -np.log(np.maximum(p, 1e-300)).sum()

        s = np.exp(minimize_scalar(neg_loo, bounds=(np.log(0.05), np.log(1e4)), method="bounded").x)
        conf = (n + s * mu) / (n + s * mu).sum(2, keepdims=True)
        cc = post.sum(0) + 1.0
        post = _estep(data, np.log(conf), np.log(cc / cc.sum()))
    return post


def variants(names=("music", "duchenne", "trec2010", "labelme", "imagenet15n")) -> pd.DataFrame:
    rows = {}
    for name in names:
        data = load_folder(ROOT / name)
        acc = lambda post: gold_accuracy(pd.Series(data.classes.take(post.argmax(1)), index=data.tasks), data)
        rows[name] = {"hds": gold_accuracy(get_method("hds")().fit(data).labels_, data),
                      "2 communities": acc(communities(data)), "LOO strength": acc(loo_strength(data))}
    return pd.DataFrame(rows).T


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--own", action="store_true")
    ap.add_argument("--dense", action="store_true")
    ap.add_argument("--variants", action="store_true")
    args = ap.parse_args()
    if args.own:
        for name in ("zencrowd_us", "zencrowd_all", "zencrowd_in", "bluebirds", "duchenne"):
            print(name, {k: round(v, 4) for k, v in own_model_scores(name).items()}, flush=True)
    if args.dense:
        print(dense_workers().round(3).to_string())
    if args.variants:
        print(variants().round(4).to_string())


if __name__ == "__main__":
    main()
