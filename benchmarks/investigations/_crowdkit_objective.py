"""crowd-kit 1.4.2's EM stopping objective, as shipped and with its class-prior term fixed.

Runs inside ``benchmarks/.venv-crowdkit`` (called by ``crowdkit_objective.py``); prints JSON.

crowd-kit's ``DawidSkene`` and ``OneCoinDawidSkene`` stop EM when ``_evidence_lower_bound``
per answer gains less than ``tol`` (1e-5), *or goes down*.  Their objective adds the
log class prior ``log pi_j`` to every answer row, i.e. ``sum_answers sum_j q_tj log pi_j``,
whereas the evidence lower bound of the Dawid-Skene model has it once per task,
``sum_tasks sum_j q_tj log pi_j``.  The M-step (``pi = mean of q over tasks``) maximises the
latter, not the former, so crowd-kit's objective can fall between two EM iterations, and then
EM stops.  This runner re-fits both models with two objectives written here:

* ``per_answer``: the prior term once per answer.  It must equal crowd-kit's own objective at
  every iteration (checked: ``max_abs_diff_vs_crowdkit``), which shows the prior weighting
  is the only difference;
* ``per_task``: the prior term once per task, the actual lower bound.  EM never lowers it
  (``min_step`` >= 0), so the fits stop by the ``tol`` rule only.

Usage (in the crowd-kit venv)::

    python _crowdkit_objective.py DATASET_DIR [DATASET_DIR ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from crowdkit.aggregation import DawidSkene, OneCoinDawidSkene
from crowdkit.aggregation.classification import dawid_skene as ck_ds

SHIPPED = ck_ds.DawidSkene._evidence_lower_bound


def lower_bound(data, probas, priors, errors, prior_per_answer: bool) -> float:
    """E_q[log p(answers, truth | errors, priors)] + H(q), in crowd-kit's data layout.

    ``errors`` rows are (worker, answered label), columns true labels; ``probas`` rows are
    tasks.  ``prior_per_answer`` reproduces crowd-kit's weighting of the prior term.
    """
    classes = list(priors.index)
    joined = data.join(np.log(errors), on=["worker", "label"])
    q_answer = probas[classes].reindex(joined["task"]).to_numpy()
    log_prior = np.log(priors.clip(lower=ck_ds._EPS)).to_numpy()
    answers = float((q_answer * joined[classes].to_numpy()).sum())
    q_task = probas[classes].to_numpy()
    prior = float(((q_answer if prior_per_answer else q_task) * log_prior).sum())
    q = np.clip(q_task, ck_ds._EPS, None)
    return answers + prior - float((q * np.log(q)).sum())


def fit(cls, df: pd.DataFrame, objective: str) -> tuple[object, float]:
    """Fit ``cls`` with crowd-kit's objective replaced; also the largest deviation of the
    ``per_answer`` rewrite from crowd-kit's own value (0.0 for ``per_task``)."""
    worst = [0.0]

    def replaced(self, data, probas, priors, errors):
        ours = lower_bound(data, probas, priors, errors, objective == "per_answer")
        if objective == "per_answer":
            # crowd-kit clips ``probas`` in place inside its objective: give it copies
            theirs = SHIPPED(self, data, probas.copy(), priors.copy(), errors)
            worst[0] = max(worst[0], abs(ours - theirs) / len(data))
        return ours

    ck_ds.DawidSkene._evidence_lower_bound = replaced
    try:
        model = cls(n_iter=100).fit(df)
    finally:
        ck_ds.DawidSkene._evidence_lower_bound = SHIPPED
    return model, worst[0]


def main(argv: list[str]) -> int:
    out = {}
    for folder in map(Path, argv):
        df = pd.read_csv(folder / "labels.csv", dtype=str, keep_default_na=False,
                         usecols=["task", "worker", "label"])
        truth = pd.read_csv(folder / "truth.csv", dtype=str, keep_default_na=False)
        truth = truth.set_index("task")["truth"]
        truth = truth[truth.index.isin(df["task"])]
        res = {}
        for name, cls in (("DawidSkene", DawidSkene), ("OneCoinDawidSkene", OneCoinDawidSkene)):
            for objective in ("shipped", "per_answer", "per_task"):
                if objective == "shipped":
                    model, dev = cls(n_iter=100).fit(df), None
                else:
                    model, dev = fit(cls, df, objective)
                hist = np.asarray(model.loss_history_, dtype=float)
                res[f"{name}/{objective}"] = {
                    "accuracy": float((model.labels_.reindex(truth.index) == truth).mean()),
                    "n_iter": int(hist.size),
                    "min_step": float(np.diff(hist).min()) if hist.size > 1 else None,
                    "max_abs_diff_vs_crowdkit": dev,
                }
        out[folder.name] = res
        print(f"{folder.name}: done", file=sys.stderr, flush=True)
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
