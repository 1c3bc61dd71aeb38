"""The labelling loop: which task to send next, and to whom.

>>> loop = ActiveLoop(method="ds", strategy="eig").observe(answers_so_far)   # doctest: +SKIP
>>> loop.suggest(20)                      # task, worker, score: ask these next   # doctest: +SKIP
>>> loop.observe(new_answers).suggest(20)                                        # doctest: +SKIP

After every batch of answers the aggregator is refit on all answers so far (a batch fit, which
is what the scores need: posteriors and a worker model); a suggestion is ``k`` *distinct*
tasks, so a batch never asks the same task twice (batch-mode selection without redundant
picks), and, when workers can be chosen, a worker who has not answered that task yet.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd

from ..core.base import resolve_generator
from ..core.stats import keyed_uniforms
from ..core.data import CrowdLabels, as_crowd_labels
from ..core.ids import ids_like
from .strategies import (GAIN_STRATEGIES, JOINT_WORKER_STRATEGIES, TASK_STRATEGIES, WORKER_STRATEGIES,
                         answer_gain, task_scores, worker_confusion_counts, worker_confusion_draw, worker_scores)

__all__ = ["ActiveLoop"]


class ActiveLoop:
    """Suggest the next (task, worker) pairs to label from the answers so far.

    Parameters
    ----------
    method : str or aggregator, default "ds"
        Truth-inference method refit after each batch (a registered name or an unfitted
        aggregator).  ``eig``, ``kg`` and worker choice need its worker model (``confusions_`` or
        ``skills_``).
    strategy : {"entropy", "margin", "eig", "kg", "random", "activelab"}
        Task score (:mod:`crowdlearn.active.strategies`; ``activelab`` needs ``pred_probs``).
    worker_strategy : {None, "greedy", "ucb", "thompson", "epsilon", "eig", "eig-thompson"}
        How to pick a worker for each chosen task when ``suggest`` is given workers.  With
        ``eig`` or ``eig-thompson`` the worker is the one whose answer is expected to tell
        most about the task, and with ``strategy="eig"`` a task's score is that largest
        information gain among the workers who may answer it (task and worker chosen
        together; :mod:`crowdlearn.active.strategies`); with ``strategy="kg"`` the same with
        the knowledge gradient (gain in expected accuracy) in place of the information gain.  Costs O(candidate tasks x available
        workers x K^2) per suggestion.
    random_state : int
        Seed of the random strategy, of tie-breaking and of Thompson draws.
    pred_probs : DataFrame, optional
        A classifier's out-of-sample class probabilities (index: task ids, one column per
        class; may cover tasks nobody answered yet).  The posteriors that the task scores read
        are then those of :func:`crowdlearn.diagnostics.model_consensus` (the classifier as a
        calibrated prior, the crowd as Dawid-Skene workers), which also scores unanswered
        tasks.  With ``strategy="activelab"``, the score is ``1 - max_c P(y = c | answers,
        model)``: the ActiveLab idea (Goh & Mueller, 2023) of relabelling where model and crowd
        together are least sure, with the model's weight learned rather than set.

    Attributes
    ----------
    answers_ : CrowdLabels
        Every answer observed so far.
    estimator_ : aggregator
        The method fitted on ``answers_`` (refit lazily when new answers arrive).
    """

    def __init__(self, method: Any = "ds", strategy: str = "entropy", worker_strategy: str | None = None,
                 random_state: int | None = 0, pred_probs: pd.DataFrame | None = None) -> None:
        if strategy == "activelab" and pred_probs is None:
            raise ValueError("strategy 'activelab' needs pred_probs (a classifier's probabilities per task)")
        if strategy not in TASK_STRATEGIES + ("activelab",):
            raise ValueError(f"unknown strategy {strategy!r}; use one of {', '.join(TASK_STRATEGIES)}")
        if worker_strategy is not None and worker_strategy not in WORKER_STRATEGIES:
            raise ValueError(
                f"unknown worker_strategy {worker_strategy!r}; use one of {', '.join(WORKER_STRATEGIES)}")
        self.method = method
        self.strategy = strategy
        self.worker_strategy = worker_strategy
        self.random_state = random_state
        self.pred_probs = pred_probs
        self._rng = resolve_generator(random_state)
        self._frames: list[pd.DataFrame] = []
        self._stale = self._consensus_stale = True

    # ----------------------------------------------------------------- answers
    def observe(self, answers: Any) -> "ActiveLoop":
        """Add answers (a ``task, worker, label`` frame or CrowdLabels); returns self."""
        frame = answers.to_frame() if isinstance(answers, CrowdLabels) else pd.DataFrame(answers)
        missing = [c for c in ("task", "worker", "label") if c not in frame.columns]
        if missing:
            raise ValueError(f"answers need the columns task, worker, label; missing {missing}")
        if len(frame):
            frame = frame[["task", "worker", "label"]]
            if self._frames:
                # a later batch may name the same task or worker with another type (17 from
                # Parquet, "17" from a CSV): spelled as first seen, as ``partial_fit`` does, not
                # refused as one id of two types
                for col in ("task", "worker"):
                    seen = pd.unique(pd.concat([f[col] for f in self._frames]))
                    kind = pd.api.types.infer_dtype
                    if kind(frame[col], skipna=True) != kind(seen, skipna=True):
                        frame = frame.assign(**{col: ids_like(frame[col], seen, col).to_numpy()})
            self._frames.append(frame)
            self._stale = self._consensus_stale = True
        return self

    @property
    def answers_(self) -> CrowdLabels:
        if not self._frames:
            raise ValueError("no answers observed yet: call observe(answers) first")
        if self._stale or "_answers" not in self.__dict__:
            self._answers = as_crowd_labels(pd.concat(self._frames, ignore_index=True))
        return self._answers

    @property
    def estimator_(self):
        if self._stale or "_estimator" not in self.__dict__:
            from ..aggregation.base import label_aggregator

            self._estimator = label_aggregator(self.method, random_state=self.random_state).fit(self.answers_)
            self._stale = False
        return self._estimator

    # --------------------------------------------------------------- suggestion
    def suggest(self, k: int, tasks: Iterable | None = None, workers: Iterable | None = None,
                workers_for: Callable[[Any], Iterable] | None = None) -> pd.DataFrame:
        """The ``k`` tasks to ask next (distinct), best first, with a worker when workers are given.

        Parameters
        ----------
        k : int
            How many (task, worker) pairs, >= 0 (``ValueError`` otherwise, naming the value);
            0 gives an empty frame with the same columns, as ``crowdlearn next --budget 0``
            writes a header-only table.
        tasks : iterable, optional
            The candidate tasks (default: every task observed).  Tasks without answers yet
            are scored with the class prior.
        workers : iterable, optional
            Workers available to ask (any task); a chosen task's worker is the best-scored
            available worker who has not answered it yet.
        workers_for : callable, optional
            ``task -> workers`` who may answer that task (e.g. a replay of recorded data);
            takes precedence over ``workers``.

        Returns
        -------
        DataFrame with columns ``task``, ``worker`` (None when no workers were given) and
        ``score`` (the task score).  Fewer than ``k`` rows when there are fewer candidates.
        """
        # a non-number (None) or a non-finite one must get this message too, not the
        # TypeError / OverflowError of int()
        if not isinstance(k, (int, float, np.integer, np.floating)) or not np.isfinite(k) \
                or int(k) != k or k < 0:
            raise ValueError(f"k must be a non-negative integer, got {k!r}")
        est, data = self.estimator_, self.answers_
        # ids given as numbers name the tasks and workers of answers read as text, and back
        cand = data.tasks if tasks is None else ids_like(list(tasks), data.tasks, "the candidate tasks")
        if cand.has_duplicates:
            cand = cand.drop_duplicates()
        if workers_for is not None:
            given_for = workers_for

            def workers_for(task):
                return ids_like(list(given_for(task)), data.workers, "the workers of a task")
        post = self._posteriors(est, data, cand) if self.pred_probs is None else self._model_posteriors(data, cand)
        if self.strategy == "activelab":
            scores = 1.0 - post.max(axis=1)
        else:
            scores = task_scores(self.strategy, post, self._crowd_confusion(est, data), self._rng, ids=cand)
        avail = None if workers is None else ids_like(list(workers), data.workers, "the available workers")
        if self.worker_strategy in JOINT_WORKER_STRATEGIES and (avail is not None or workers_for is not None):
            return self._suggest_joint(int(k), est, data, cand, post, scores, avail, workers_for)
        # ties (e.g. every prior-only task) broken at random, not by input order (nor by the
        # order of the ids, which differs between ids read as text and as numbers)
        order = np.lexsort((keyed_uniforms(cand, self._rng), -scores))
        if workers is None and workers_for is None:
            top = order[: int(k)]
            return pd.DataFrame({"task": cand[top], "worker": [None] * len(top), "score": scores[top]})
        rows = []
        for i in order:
            if len(rows) >= k:
                break
            pool = pd.Index(list(workers_for(cand[i]))) if workers_for is not None else avail
            pool = pool.difference(self._answered(data, cand[i]), sort=False)
            if len(pool) == 0:
                continue
            w = self._pick_worker(est, data, pool)
            rows.append((cand[i], w, scores[i]))
        return pd.DataFrame(rows, columns=["task", "worker", "score"])

    def _suggest_joint(self, k: int, est, data: CrowdLabels, cand: pd.Index, post: np.ndarray,
                       scores: np.ndarray, avail: pd.Index | None, workers_for) -> pd.DataFrame:
        """Each candidate task's most informative available worker; with ``strategy="eig"``
        the tasks are ranked by that worker's information gain."""
        alpha = worker_confusion_counts(self._posteriors(est, data, data.tasks), data.task, data.worker,
                                        data.label, data.n_workers + 1)  # last row: a worker never seen
        rng = self._rng if self.worker_strategy == "eig-thompson" else None
        conf = worker_confusion_draw(alpha, rng)
        # every (candidate task, available worker) pair, then one vectorised gain; ids go
        # through plain dicts, since pandas Index operations per task dominate otherwise
        worker_code = {w: i for i, w in enumerate(data.workers)}
        task_code = {t: i for i, t in enumerate(data.tasks)}
        by_task = pd.Series(np.asarray(data.worker)).groupby(np.asarray(data.task)).unique().to_dict()
        pair_task, pair_worker, pools = [], [], []
        for i, task in enumerate(cand):
            done = by_task.get(task_code.get(task, -1), ())
            done = {data.workers[c] for c in done}
            pool = [w for w in (workers_for(task) if workers_for is not None else avail) if w not in done]
            pools.append(pool)
            pair_task.append(np.full(len(pool), i))
            pair_worker.append(np.fromiter((worker_code.get(w, data.n_workers) for w in pool), np.int64, len(pool)))
        pair_task = np.concatenate(pair_task) if pair_task else np.zeros(0, np.int64)
        pair_worker = np.concatenate(pair_worker) if pair_worker else np.zeros(0, np.int64)
        # the task strategy's own gain when it has one (eig, kg), else the information gain
        gain_of = self.strategy if self.strategy in GAIN_STRATEGIES else "eig"
        gain = answer_gain(gain_of, post[pair_task], conf[pair_worker]) if len(pair_task) else np.zeros(0)
        best_gain = np.full(len(cand), -np.inf)
        np.maximum.at(best_gain, pair_task, gain)
        best_w = [None] * len(cand)
        start = 0
        for i, pool in enumerate(pools):  # the first worker reaching the task's best gain
            if pool:
                best_w[i] = pool[int(np.argmax(gain[start:start + len(pool)]))]
            start += len(pool)
        if self.strategy in GAIN_STRATEGIES:
            scores = best_gain
        has_pool = np.array([w is not None for w in best_w], dtype=bool)
        order = np.lexsort((keyed_uniforms(cand, self._rng), -np.where(has_pool, scores, -np.inf)))
        top = [i for i in order if has_pool[i]][:k]
        return pd.DataFrame({"task": cand[top], "worker": [best_w[i] for i in top], "score": scores[top]},
                            columns=["task", "worker", "score"])

    # ---------------------------------------------------------------- helpers
    @staticmethod
    def _posteriors(est, data: CrowdLabels, cand: pd.Index) -> np.ndarray:
        proba = est.probas_.reindex(columns=data.classes)
        prior = getattr(est, "priors_", None)
        if prior is None:
            prior = proba.mean(axis=0)
        prior = np.asarray(pd.Series(prior).reindex(data.classes).fillna(0.0), float)
        prior = prior / prior.sum() if prior.sum() > 0 else np.full(data.n_classes, 1.0 / data.n_classes)
        out = proba.reindex(cand).to_numpy(float, copy=True)
        unseen = np.isnan(out).any(axis=1)
        out[unseen] = prior
        return out

    def _model_posteriors(self, data: CrowdLabels, cand: pd.Index) -> np.ndarray:
        from ..diagnostics import model_consensus

        probs = pd.DataFrame(self.pred_probs)
        probs.index = ids_like(probs.index, data.tasks, "pred_probs")
        missing = cand.difference(probs.index)
        if len(missing):
            raise ValueError(f"pred_probs has no row for task {missing[0]!r} (and {len(missing) - 1} more)")
        if self._consensus_stale:
            self._consensus = model_consensus(data, probs, random_state=self.random_state)
            self._consensus_stale = False
        return self._consensus.probas.reindex(index=cand, columns=data.classes).to_numpy(float)

    @staticmethod
    def _crowd_confusion(est, data: CrowdLabels) -> np.ndarray | None:
        """Answer-weighted mean confusion of the crowd (the worker an unchosen answer comes from)."""
        weights = np.bincount(data.worker, minlength=data.n_workers).astype(float)
        conf = getattr(est, "confusions_", None)
        if conf is not None:
            return np.einsum("w,wca->ca", weights / weights.sum(), np.asarray(conf))
        skills = getattr(est, "skills_", None)
        if skills is None:
            return None
        from ..core.stats import one_coin_confusions

        acc = float(np.average(np.clip(np.asarray(skills, float), 0, 1), weights=weights))
        return one_coin_confusions(np.array([acc]), data.n_classes)[0]

    @staticmethod
    def _answered(data: CrowdLabels, task) -> pd.Index:
        code = data.tasks.get_indexer([task])[0]
        if code < 0:
            return pd.Index([])
        return data.workers[np.unique(data.worker[data.task == code])]

    def _pick_worker(self, est, data: CrowdLabels, pool: pd.Index):
        skills = getattr(est, "skills_", None)
        n_all = np.bincount(data.worker, minlength=data.n_workers)
        if skills is None:  # no worker model: every worker alike, the least-asked first
            acc = np.full(len(pool), 0.5)
        else:
            s = pd.Series(np.asarray(skills, float), index=data.workers)
            acc = s.reindex(pool).fillna(float(np.average(s, weights=np.maximum(n_all, 1)))).to_numpy()
        n = pd.Series(n_all, index=data.workers).reindex(pool).fillna(0).to_numpy()
        if self.worker_strategy is None:  # workers can be given without a strategy: uniform
            return pool[int(self._rng.integers(len(pool)))]
        sc = worker_scores(self.worker_strategy, acc, n, self._rng)
        return pool[int(np.argmax(sc))]
