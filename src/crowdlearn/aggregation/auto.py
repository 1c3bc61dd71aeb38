"""Choosing a truth-inference method per dataset without gold: :class:`AutoAggregator`.

No aggregator wins everywhere (one-coin models win on the zencrowd sets, full confusions on
bluebirds, vote-like methods on very sparse many-class sets).  Gold labels are what people do
not have, so the choice is made from the answers alone, by how well each method's
posteriors *predict answers it has not seen*:

1. withhold a random fraction ``holdout`` of the answers — only answers whose task and
   worker keep at least one other answer, so that no task or worker disappears — in each
   of ``n_folds`` seeded folds;
2. fit every candidate on the remaining answers and read its task posteriors ``q_j``;
3. score every candidate by one common predictive rule, whatever its own worker model: a
   smoothed Dawid-Skene confusion ``Pi_w[c, a]`` is estimated from the candidate's posteriors
   on the training answers (one M-step, pseudo-count ``smoothing`` per cell), and the score
   is the mean held-out log-likelihood ``log sum_c q_j(c) Pi_w[c, a_jw]``;
4. keep the first candidate (the reference, ``ds`` by default) unless some candidates predict
   the withheld answers *significantly* better — paired over the same answers, gain above
   ``min_z`` standard errors — and then take the best of those; refit it on all answers.
   Differences between methods are often within the noise of a hold-out estimate, and the
   reference is the method whose failure modes are best understood.

The candidate's labels enter as hard labels (``hard=True``): scored with soft posteriors the
rule favours whichever method is least confident (vote shares) rather than most accurate.
``scores_`` and ``reason_`` say why a method was chosen.  Gold labels given to ``fit`` are
not used for the choice (so that the choice is reproducible without them); they are passed to
the final fit.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Sequence

import numpy as np
import pandas as pd
from sklearn.base import clone

from ..core.base import Tags, get_tags, resolve_generator
from ..core.data import CrowdLabels
from ..registry import get_method
from .base import BaseAggregator

__all__ = ["AutoAggregator", "heldout_scores"]

#: default candidates, most robust first (ties go to the earlier one)
DEFAULT_CANDIDATES = ("ds", "onecoin", "mv", "wawa", "zbs", "glad", "mace", "bds", "bp")

#: candidates when there are more than ``MANY_CLASSES`` classes and none were given: the
#: confusion-matrix models need W x K^2 cells (4 GB for 5 workers and 10^4 classes) and
#: MACE/BP cost O(K^2) per answer, so only the methods linear in K compete (reference: mv)
MANY_CLASSES = 50
MANY_CLASS_CANDIDATES = ("mv", "wawa", "zbs", "glad")

#: largest dense worker x class x class scoring table (soft scoring only)
_DENSE_BYTES = 1e9


def _make(candidate: Any, random_state):
    if isinstance(candidate, str):
        est = get_method(candidate)()
        if "random_state" in est.get_params():
            est.set_params(random_state=random_state)
        return candidate, est
    return type(candidate).__name__, clone(candidate)


def _split(data: CrowdLabels, holdout: float, rng: np.random.Generator) -> np.ndarray:
    """Boolean mask of withheld answers: each task and worker keeps at least one answer."""
    n = data.n_labels
    order = rng.permutation(n)
    left_t = np.bincount(data.task, minlength=data.n_tasks)
    left_w = np.bincount(data.worker, minlength=data.n_workers)
    out = np.zeros(n, dtype=bool)
    budget = int(round(holdout * n))
    for i in order:  # greedy in a random order; O(n) Python only up to the budget
        if budget <= 0:
            break
        t, w = data.task[i], data.worker[i]
        if left_t[t] > 1 and left_w[w] > 1:
            out[i] = True
            left_t[t] -= 1
            left_w[w] -= 1
            budget -= 1
    return out


def _predictive_score(train: CrowdLabels, post: np.ndarray, test: CrowdLabels, smoothing: float) -> np.ndarray:
    """Per held-out answer: ``log sum_c q_j(c) Pi_w[c, a]`` with Pi from one DS M-step.

    ``Pi_w[c, a]`` (row: true class ``c``, column: answered class ``a``) is the smoothed
    confusion estimated from the posteriors ``post`` on the training answers.
    """
    k = train.n_classes
    need = 8.0 * train.n_workers * k * k
    if need > _DENSE_BYTES:
        raise ValueError(
            f"soft scoring needs a dense {train.n_workers} x {k} x {k} confusion table "
            f"({need / 1e9:.1f} GB); use hard=True, which counts only the cells that occur"
        )
    counts = np.full((train.n_workers, k, k), smoothing)
    np.add.at(counts, (train.worker, slice(None), train.label), post[train.task])
    conf = counts / counts.sum(axis=2, keepdims=True)  # [worker, true, answered]
    p = np.einsum("nc,nc->n", post[test.task], conf[test.worker, :, test.label])
    return np.log(np.maximum(p, 1e-300))


def _predictive_score_hard(train: CrowdLabels, pred: np.ndarray, test: CrowdLabels, smoothing: float) -> np.ndarray:
    """:func:`_predictive_score` for one-hot posteriors (``pred``: class code per task).

    Then ``sum_c q_j(c) Pi_w[c, a] = Pi_w[pred_j, a]``, and only the (worker, predicted,
    answered) cells that occur are counted: O(answers) memory whatever the number of classes
    (10^4 classes would need W x 10^8 cells densely).
    """
    k = np.int64(train.n_classes)
    cell_tr = (train.worker.astype(np.int64) * k + pred[train.task]) * k + train.label
    cell_te = (test.worker.astype(np.int64) * k + pred[test.task]) * k + test.label
    num = smoothing + _lookup_counts(cell_tr, cell_te)
    den = k * smoothing + _lookup_counts(cell_tr // k, cell_te // k)  # row totals (worker, predicted)
    return np.log(num / den)


def _lookup_counts(train_keys: np.ndarray, query: np.ndarray) -> np.ndarray:
    """How often each ``query`` key occurs among ``train_keys`` (0 when absent)."""
    keys, counts = np.unique(train_keys, return_counts=True)
    if len(keys) == 0:
        return np.zeros(len(query))
    pos = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
    return np.where(keys[pos] == query, counts[pos], 0).astype(float)


def heldout_scores(
    labels: Any,
    candidates: Sequence[Any] = DEFAULT_CANDIDATES,
    n_folds: int = 3,
    holdout: float = 0.1,
    smoothing: float = 1.0,
    random_state: int | None = 0,
    hard: bool = True,
) -> pd.DataFrame:
    """Held-out predictive log-likelihood of every candidate (see the module docstring).

    Returns a DataFrame indexed by candidate name with columns ``score`` (mean per held-out
    answer), ``sd`` (over folds), ``seconds`` (total fit time), ``error`` (message of a
    candidate that failed, which then scores ``-inf``), ``gain`` (mean paired difference of
    the per-answer score against the first candidate, over the same held-out answers) and
    ``z`` (that gain over its standard error).
    """
    from ..core.data import as_crowd_labels

    data = as_crowd_labels(labels)
    rng = resolve_generator(random_state)
    folds = [_split(data, holdout, rng) for _ in range(max(1, n_folds))]
    rows = {}
    per_answer = {}
    for cand in candidates:
        name, _ = _make(cand, random_state)
        fold_scores, seconds, error = [], 0.0, ""
        answers = []
        for mask in folds:
            if not mask.any():
                continue
            train = data._select_keep_ids(~mask)
            test = data._select_keep_ids(mask)
            _, est = _make(cand, random_state)
            t0 = time.process_time()
            try:
                est.fit(train)
            except Exception as exc:  # a failing candidate is reported, not fatal
                error = f"{type(exc).__name__}: {exc}"
                break
            finally:
                seconds += time.process_time() - t0
            post = est.probas_.reindex(index=data.tasks, columns=data.classes, fill_value=0.0).to_numpy()
            if hard:
                answers.append(_predictive_score_hard(train, np.argmax(post, axis=1), test, smoothing))
            else:
                answers.append(_predictive_score(train, post, test, smoothing))
            fold_scores.append(answers[-1].mean())
        if error or not fold_scores:
            rows[name] = (-np.inf, np.nan, seconds, error or "nothing could be withheld")
        else:
            rows[name] = (float(np.mean(fold_scores)), float(np.std(fold_scores)), seconds, "")
            per_answer[name] = np.concatenate(answers)
    table = pd.DataFrame.from_dict(rows, orient="index", columns=["score", "sd", "seconds", "error"])
    # paired comparison with the first candidate (the reference) over the same held-out answers
    ref = per_answer.get(table.index[0])
    gain = np.full(len(table), np.nan)
    z = np.full(len(table), np.nan)
    if ref is not None:
        for i, name in enumerate(table.index):
            if name in per_answer:
                diff = per_answer[name] - ref
                gain[i] = diff.mean()
                se = diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else np.inf
                z[i] = gain[i] / se if se > 0 else (0.0 if gain[i] == 0 else np.sign(gain[i]) * np.inf)
    table["gain"] = gain
    table["z"] = z
    return table


class AutoAggregator(BaseAggregator):
    """Pick the candidate whose posteriors best predict withheld answers, refit it on all.

    Parameters
    ----------
    candidates : sequence of str or estimators, optional
        Registered names or unfitted aggregators, most robust first (ties go to the earlier
        one).  Default :data:`DEFAULT_CANDIDATES`, or :data:`MANY_CLASS_CANDIDATES` above
        :data:`MANY_CLASSES` classes.
    n_folds : int
        Random hold-out folds.
    holdout : float
        Fraction of answers withheld per fold.
    min_z : float
        A candidate replaces the first one (the reference, ``ds`` by default) only if its
        paired gain over the same held-out answers exceeds ``min_z`` standard errors.
    smoothing : float
        Dirichlet pseudo-count of the common worker model used for scoring.
    random_state : int
        Seed of the folds and of every candidate.

    Attributes
    ----------
    chosen_ : str
        Name of the chosen candidate.
    best_ : estimator
        The chosen candidate fitted on all answers; its worker model (``confusions_``,
        ``skills_``, ...) is also reachable through this estimator's attributes.
    scores_ : DataFrame
        Held-out score per candidate (see :func:`heldout_scores`).
    reason_ : str
        One sentence saying why ``chosen_`` was chosen.
    """

    def __init__(
        self,
        candidates: Sequence[Any] | None = None,
        n_folds: int = 3,
        holdout: float = 0.1,
        min_z: float = 2.0,
        smoothing: float = 1.0,
        random_state: int | None = 0,
    ) -> None:
        self.candidates = candidates
        self.n_folds = n_folds
        self.holdout = holdout
        self.min_z = min_z
        self.smoothing = smoothing
        self.random_state = random_state

    def __crowd_tags__(self) -> Tags:
        # a fitted selector is its chosen estimator; before the fit it promises what every
        # candidate it may choose promises
        if "best_" in self.__dict__:
            chosen = [get_tags(self.best_)]
        elif self.candidates is not None:
            chosen = [get_tags(get_method(c) if isinstance(c, str) else c) for c in self.candidates]
        else:
            chosen = [get_tags(get_method(c)) for c in DEFAULT_CANDIDATES + MANY_CLASS_CANDIDATES]
        return dataclasses.replace(
            super().__crowd_tags__(),
            accepts_init=True,
            has_worker_model=all(t.has_worker_model for t in chosen),
            predict_matches_fit=all(t.predict_matches_fit for t in chosen),
            stochastic=any(t.stochastic for t in chosen),
        )

    def _predict_proba_codes(self, data: CrowdLabels) -> np.ndarray:
        # ``data`` is coded on the fitted workers and classes, which are the chosen one's
        return self.best_.predict_proba(data).to_numpy()

    def _fit(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None):
        if not 0.0 < self.holdout < 1.0:
            raise ValueError(f"holdout must lie in (0, 1), got {self.holdout!r}")
        if isinstance(self.candidates, str):  # one method name, not a sequence of letters
            cands = [self.candidates]
        elif self.candidates is not None:
            cands = list(self.candidates)
        elif data.n_classes > MANY_CLASSES:
            cands = list(MANY_CLASS_CANDIDATES)
        else:
            cands = list(DEFAULT_CANDIDATES)
        if not cands:
            raise ValueError("candidates is empty")
        scores = heldout_scores(
            data, cands, self.n_folds, self.holdout, self.smoothing, self.random_state
        )
        self.scores_ = scores
        finite = np.isfinite(scores["score"].to_numpy())
        if not finite.any():
            # nothing could be withheld (e.g. one answer per task): the first candidate
            name, est = _make(cands[0], self.random_state)
            self.reason_ = (
                f"chose {name!r} (the first candidate): no answer could be withheld to compare "
                "methods, every task or worker has a single answer"
            )
        else:
            ref_name, _ = _make(cands[0], self.random_state)
            z = scores["z"].to_numpy()
            better = np.flatnonzero(finite & (np.nan_to_num(z, nan=-np.inf) > self.min_z))
            if len(better):
                pick = int(better[np.argmax(scores["score"].to_numpy()[better])])
            else:
                pick = 0 if finite[0] else int(np.nanargmax(np.where(finite, scores["score"], -np.inf)))
            name, est = _make(cands[pick], self.random_state)
            row = scores.iloc[pick]
            if pick == 0:
                top = scores["score"].idxmax()
                self.reason_ = (
                    f"chose {name!r} (the reference candidate): no other candidate predicts the "
                    f"withheld answers significantly better (best: {top!r}, "
                    f"gain {scores.loc[top, 'gain']:+.4f} nats per answer, z = {scores.loc[top, 'z']:.1f} "
                    f"<= {self.min_z})"
                )
            else:
                self.reason_ = (
                    f"chose {name!r}: its labels predict the withheld answers better than "
                    f"{ref_name!r} by {row['gain']:+.4f} nats per answer (paired z = {row['z']:.1f} > "
                    f"{self.min_z}), the best score among {len(better)} such candidate(s)"
                )
        self.chosen_ = name
        kwargs = {}
        if gold is not None:
            g = gold >= 0
            kwargs["gold"] = pd.Series(data.classes.take(gold[g]), index=data.tasks[g])
        if init is not None and get_tags(est).accepts_init:
            kwargs["init"] = init
        est.fit(data, **kwargs)
        self.best_ = est
        self.history_ = list(getattr(est, "history_", []))
        self.n_iter_ = int(getattr(est, "n_iter_", 0))
        self.converged_ = bool(getattr(est, "converged_", True))
        return est.probas_.reindex(index=data.tasks, columns=data.classes, fill_value=0.0).to_numpy().copy()

    def __getattr__(self, name: str):
        # delegate fitted worker-model attributes (confusions_, skills_, priors_, ...) to best_
        if name.endswith("_") and not name.startswith("__") and "best_" in self.__dict__:
            return getattr(self.__dict__["best_"], name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
