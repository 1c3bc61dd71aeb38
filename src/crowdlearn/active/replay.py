"""Replay evaluation of a labelling strategy on a recorded dataset.

Only answers that were really given can be revealed: a round asks :class:`ActiveLoop` for
``step`` tasks among those with unrevealed answers, and for each reveals one recorded answer
of that task — the one of the worker the loop chose, which must be one of the workers who
answered it, or a random unrevealed one when workers are not chosen.  Every task starts with
``start`` revealed answers (so that every task is in the output from the first round), and the
curve reports the accuracy against gold of the aggregator refit on the revealed answers after
every round.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..benchmarking import gold_accuracy
from ..core.base import resolve_generator
from ..core.data import CrowdLabels, as_crowd_labels
from .loop import ActiveLoop

__all__ = ["replay", "budget_summary"]


def replay(labels: Any, strategy: str = "entropy", worker_strategy: str | None = None, method: Any = "ds",
           start: int = 1, step: int | None = None, budget: int | None = None,
           random_state: int | None = 0) -> pd.DataFrame:
    """Budget curve of one strategy replayed on recorded answers with gold.

    Parameters
    ----------
    labels : CrowdLabels with gold (or anything :func:`as_crowd_labels` reads)
    strategy, worker_strategy, method :
        As :class:`ActiveLoop`.
    start : int
        Answers revealed per task before the first round (at random).
    step : int, optional
        Answers revealed per round (default: a tenth of the tasks, at least 1).
    budget : int, optional
        Stop after this many answers in all (default: every answer).  A budget above the
        number of answers is capped at it; the ``start`` answers of every task are revealed
        whatever the budget, so the first point of the curve may exceed a smaller one.  With ``worker_strategy``, a worker's second
        answer to a task (a repeated task, worker row) is never asked for, so the curve may
        end before every answer is revealed.
    random_state : int

    Returns
    -------
    DataFrame with one row per round: ``labels`` (answers revealed) and ``accuracy``.
    """
    data = as_crowd_labels(labels)
    if data.truth is None or not np.any(data.truth >= 0):
        raise ValueError("replay needs gold labels to draw the budget curve")
    if start < 1:
        raise ValueError(f"start must be >= 1 (every task needs an answer to be in the output), got {start}")
    rng = resolve_generator(random_state)
    n = data.n_labels
    budget = n if budget is None else min(int(budget), n)
    step = max(1, data.n_tasks // 10) if step is None else int(step)
    if step < 1:
        raise ValueError(f"step must be >= 1, got {step}")

    # recorded answers grouped by task, in a random order per task
    order = rng.permutation(n)
    order = order[np.argsort(data.task[order], kind="stable")]
    bounds = np.searchsorted(data.task[order], np.arange(data.n_tasks + 1))
    revealed = np.zeros(n, dtype=bool)
    for t in range(data.n_tasks):
        revealed[order[bounds[t]: bounds[t] + start]] = True
    frame = data.to_frame()
    gold = data  # accuracy is measured on the full data's gold
    loop = ActiveLoop(method=method, strategy=strategy, worker_strategy=worker_strategy,
                      random_state=int(rng.integers(2**31)))
    loop.observe(frame[revealed])
    curve = [(int(revealed.sum()), _accuracy(loop, gold))]
    while revealed.sum() < budget:
        left = ~revealed
        open_tasks = np.unique(data.task[left])
        if len(open_tasks) == 0:
            break
        k = min(step, budget - int(revealed.sum()))
        by_task = {data.tasks[t]: order[bounds[t]: bounds[t + 1]] for t in open_tasks}

        def unrevealed_workers(task):
            idx = by_task[task]
            return data.workers[data.worker[idx[~revealed[idx]]]]

        pick = loop.suggest(k, tasks=data.tasks[open_tasks],
                            workers_for=unrevealed_workers if worker_strategy else None)
        if len(pick) == 0:
            # every answer left repeats a worker on a task whose answer of theirs is already
            # revealed (duplicate rows): the loop never asks a worker twice about a task, so
            # no round can reveal them, and the curve ends here rather than looping forever
            break
        new = []
        for task, worker in zip(pick["task"], pick["worker"]):
            idx = by_task[task]
            idx = idx[~revealed[idx]]
            if worker is not None:
                idx = idx[data.workers[data.worker[idx]] == worker]
            i = idx[0]
            revealed[i] = True
            new.append(i)
        loop.observe(frame.iloc[np.sort(new)])
        curve.append((int(revealed.sum()), _accuracy(loop, gold)))
    return pd.DataFrame(curve, columns=["labels", "accuracy"])


def _accuracy(loop: ActiveLoop, data: CrowdLabels) -> float:
    return gold_accuracy(loop.estimator_.labels_.reindex(data.tasks), data)


def budget_summary(curve: pd.DataFrame, target: float) -> dict:
    """Area under the budget curve (mean accuracy over the revealed-answer range, trapezoids)
    and the first budget within 1 point of ``target`` (NaN if never)."""
    x, y = curve["labels"].to_numpy(float), curve["accuracy"].to_numpy(float)
    auc = float(np.trapezoid(y, x) / (x[-1] - x[0])) if len(x) > 1 else float(y[0])
    hit = np.flatnonzero(y >= target - 0.01)
    return {"auc": auc, "labels_to_within_1pt": float(x[hit[0]]) if len(hit) else np.nan,
            "share_of_answers": float(x[hit[0]] / x[-1]) if len(hit) else np.nan}
