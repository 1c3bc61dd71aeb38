"""Choosing a truth-inference method per dataset without gold: :class:`AutoAggregator`.

No aggregator wins everywhere (one-coin models win on the zencrowd sets, full confusions on
bluebirds, vote-like methods on very sparse many-class sets).  Gold labels are what people do
not have, so the choice is made from the answers alone, by how well each method's
posteriors *predict answers it has not seen*:

1. split the answers into ``n_folds`` seeded folds (K-fold cross-validation over answers:
   every answer is withheld in exactly one fold, unless withholding it would leave its task
   or its worker without a training answer, in which case it is never withheld); on large
   inputs the choice is made on a random subset of tasks holding about ``max_answers``
   answers, and the folds are fitted in turn only until ``max_withheld`` withheld answers
   have been scored (at least two folds);
2. fit every candidate on the answers outside a fold and read its task posteriors ``q_j``;
3. score every candidate by one common predictive rule, whatever its own worker model: the
   mean held-out log-likelihood ``log sum_c q_j(c) Pi_w[c, a_jw]`` under a Dawid-Skene
   confusion ``Pi_w[c, a]`` counted on the *other folds' withheld answers*, each paired with
   its task's label from the fit that did not see it (cross-fitting), with ``k * smoothing``
   pseudo-counts per row toward the crowd's pooled confusion (whose rows are shrunk the same
   way toward the answers' marginal).  Counting it on the training
   answers instead (crowdlearn 0.1.0) lets every answer help make the label it is scored
   against: with 2-3 answers per task the workers then look more reliable than they are, and
   any candidate whose labels follow the answers is penalised on withheld ones, while a
   method collapsed onto one class is not;
4. compare each candidate with the **null model**, every task one constant label (each
   worker's answer rate): only candidates whose paired gain over it exceeds ``min_z``
   standard errors take part.  If none does (typically 2-3 answers per task and few per
   worker, where EM methods collapse onto one class), ``fallback`` (the first candidate,
   ``ds``) is returned;
5. (``combine="stack"``, the default) average the candidates instead of betting on one: the
   weights ``w`` maximise the held-out log-likelihood of the mixture
   ``sum_i log sum_m w_m p_i^(m)`` over the withheld answers (stacking of predictive
   distributions, Yao, Vehtari, Simpson & Gelman, 2018, "Using stacking to average Bayesian
   predictive distributions", Bayesian Analysis 13(3)), and the output posteriors are
   ``sum_m w_m q^(m)`` of the candidates refit on all answers (those with a weight above 1%);
6. or (``combine="select"``) keep the first candidate (the reference, ``ds`` by default)
   unless some candidates predict the withheld answers *significantly* better — paired over
   the same answers, gain above ``min_z`` standard errors — and then take the best of those;
   refit it on all answers.  Differences between methods are often within the noise of a
   hold-out estimate, and the reference is the method whose failure modes are best
   understood.

Stacking was chosen as the default on simulated crowds (``benchmarks/model_choice.py
--synthetic``: best mean accuracy and smallest worst-case regret of ``ds``, ``hds``, select
and stack), not on the real sets.

The candidate's labels enter as hard labels (``hard=True``): scored with soft posteriors the
rule favours whichever method is least confident (vote shares) rather than most accurate.
``scores_`` and ``reason_`` say why a method was chosen.  Gold labels given to ``fit`` are
not used for the choice (so that the choice is reproducible without them); they are passed to
the final fit.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..core.base import Tags, get_tags, resolve_generator
from ..core.data import CrowdLabels
from ..registry import LABEL_KINDS, fresh_estimator, get_method
from .base import BaseAggregator

__all__ = ["AutoAggregator", "heldout_scores", "stacking_weights"]

#: default candidates, most robust first (ties go to the earlier one)
DEFAULT_CANDIDATES = ("ds", "hds", "onecoin", "mv", "wawa", "zbs", "glad", "mace", "bds", "bp")

#: candidates when there are more than ``MANY_CLASSES`` classes and none were given: the
#: confusion-matrix models need W x K^2 cells (4 GB for 5 workers and 10^4 classes) and
#: MACE/BP cost O(K^2) per answer, so only the methods linear in K compete (reference: mv)
MANY_CLASSES = 50
MANY_CLASS_CANDIDATES = ("mv", "wawa", "zbs", "glad")

#: largest dense worker x class x class scoring table (soft scoring only)
_DENSE_BYTES = 1e9


def _make(candidate: Any, random_state):
    name = candidate if isinstance(candidate, str) else type(candidate).__name__
    return name, fresh_estimator(candidate, LABEL_KINDS, random_state=random_state)


def _folds(data: CrowdLabels, n_folds: int, rng: np.random.Generator) -> list[np.ndarray]:
    """K-fold masks over answers: answer ``i`` may be withheld only in fold ``i mod K`` of a
    random order, and only if its task and worker keep a training answer in that fold."""
    n = data.n_labels
    # a random order of the answers taken in (task, worker, label) order, so the folds do not
    # depend on the order of the rows they were read from
    order = data.canonical_order()[rng.permutation(n)]
    fold_of = np.empty(n, dtype=np.int64)
    fold_of[order] = np.arange(n) % n_folds
    task, worker = np.asarray(data.task), np.asarray(data.worker)
    cnt_t = np.bincount(task, minlength=data.n_tasks)
    cnt_w = np.bincount(worker, minlength=data.n_workers)
    out = []
    for f in range(n_folds):
        left_t, left_w = cnt_t.copy(), cnt_w.copy()
        mask = np.zeros(n, dtype=bool)
        for i in order[fold_of[order] == f]:  # greedy in the random order: one pass over answers
            t, w = task[i], worker[i]
            if left_t[t] > 1 and left_w[w] > 1:
                mask[i] = True
                left_t[t] -= 1
                left_w[w] -= 1
        out.append(mask)
    return out


def stacking_weights(predictive: np.ndarray, max_iter: int = 500, tol: float = 1e-10) -> np.ndarray:
    """Simplex weights maximising ``sum_i log sum_m w_m predictive[i, m]``.

    ``predictive``: (answers, candidates) held-out probabilities.  The objective is concave
    in ``w``; the multiplicative (EM) update for mixture weights increases it monotonically.
    """
    p = np.maximum(np.asarray(predictive, float), 1e-300)
    m = p.shape[1]
    w = np.full(m, 1.0 / m)
    prev = -np.inf
    for _ in range(max_iter):
        mix = p @ w
        obj = float(np.log(mix).sum())
        w = w * (p.T @ (1.0 / mix)) / len(p)  # mean of p / mix over answers, without the n x m array
        w /= w.sum()
        if obj - prev < tol * len(p):
            break
        prev = obj
    return w


def _child_generators(random_state: Any, n: int) -> list[np.random.Generator]:
    """``n`` independent generators derived from ``random_state`` (an int gives the children
    of ``SeedSequence(seed)``; a RandomState or Generator gives one draw to seed them)."""
    if random_state is None or isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        seq = np.random.SeedSequence(None if random_state is None else int(random_state))
    else:
        seq = np.random.SeedSequence(int(resolve_generator(random_state).integers(2**63)))
    return [np.random.default_rng(child) for child in seq.spawn(n)]


def _subsample_tasks(data: CrowdLabels, max_answers: int | None, rng: np.random.Generator) -> CrowdLabels:
    """The answers of a random subset of tasks holding about ``max_answers`` answers."""
    if max_answers is None or data.n_labels <= max_answers:
        return data
    keep_tasks = rng.random(data.n_tasks) < max_answers / data.n_labels
    # the subset drops the other tasks' ids: fitting on 10^5 empty tasks would cost as much
    # as fitting on their answers
    return data.subset(tasks=data.tasks[keep_tasks])


def _dense_confusions(n_workers: int, k: int) -> np.ndarray:
    """A zero worker x class x class table, refused above :data:`_DENSE_BYTES`."""
    need = 8.0 * n_workers * k * k
    if need > _DENSE_BYTES:
        raise ValueError(
            f"soft scoring needs a dense {n_workers} x {k} x {k} confusion table "
            f"({need / 1e9:.1f} GB); use hard=True, which counts only the cells that occur"
        )
    return np.zeros((n_workers, k, k))


def _predictive_score(train: CrowdLabels, post: np.ndarray, test: CrowdLabels, smoothing: float) -> np.ndarray:
    """Per held-out answer: ``log sum_c q_j(c) Pi_w[c, a]`` with Pi from one DS M-step.

    ``Pi_w[c, a]`` (row: true class ``c``, column: answered class ``a``) is the smoothed
    confusion estimated from the posteriors ``post`` on the training answers.
    """
    counts = _dense_confusions(train.n_workers, train.n_classes) + smoothing
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


def _fold_scores(fitted: list, hard: bool, crossfit: bool, smoothing: float) -> list[np.ndarray]:
    """Per fold, the held-out log-likelihood of each withheld answer (module docstring, step 3).

    ``fitted``: (train, test, posteriors) per fold; with ``hard`` the posteriors may be given
    as one class code per task.  With ``crossfit`` the scoring confusion ``Pi_w`` of fold ``f``
    is counted on the withheld answers of the *other* folds, each paired with its task's label
    from the fit that did not see it; otherwise on fold ``f``'s training answers paired with
    the labels of the fit that saw them.
    """
    if hard:
        fitted = [(tr, te, post if post.ndim == 1 else np.argmax(post, axis=1)) for tr, te, post in fitted]
    if not crossfit:
        score = _predictive_score_hard if hard else _predictive_score
        return [score(tr, post, te, smoothing) for tr, te, post in fitted]
    if not fitted:
        return []
    # the withheld answers of every fold, each with the label of the fit that did not see it
    worker = np.concatenate([te.worker for _, te, _ in fitted])
    label = np.concatenate([te.label for _, te, _ in fitted])
    q = np.concatenate([post[te.task] for _, te, post in fitted])
    fold_of = np.repeat(np.arange(len(fitted)), [te.n_labels for _, te, _ in fitted])
    score = _score_from_pairs_hard if hard else _score_from_pairs
    return [score(worker[fold_of != f], label[fold_of != f], q[fold_of != f], test, post, smoothing)
            for f, (_, test, post) in enumerate(fitted)]


def _score_from_pairs_hard(worker: np.ndarray, label: np.ndarray, src_pred: np.ndarray, test: CrowdLabels,
                           pred: np.ndarray, smoothing: float) -> np.ndarray:
    """``log Pi_w[pred_j, a]`` for the answers of ``test``, with ``Pi_w`` counted on pairs.

    The pairs are answers (``worker``, ``label``) each with its own label ``src_pred`` (one
    per answer, not per task: each comes from the fit that did not see that answer).
    """
    k = np.int64(test.n_classes)
    cell_src = (worker.astype(np.int64) * k + src_pred) * k + label
    cell_te = (test.worker.astype(np.int64) * k + pred[test.task]) * k + test.label
    # pseudo-counts toward the crowd's pooled confusion (k * smoothing per row), so that a
    # worker with few answers is scored with the crowd's confusion rather than a uniform row;
    # the pooled rows in turn shrink toward the answers' marginal, so that a label no pair
    # carries predicts what the crowd answers overall, as the null model does
    marginal = (1.0 + np.bincount(label, minlength=k)) / (k + len(label))
    pool_src = src_pred.astype(np.int64) * k + label
    pool_te = pred[test.task].astype(np.int64) * k + test.label
    pooled = ((k * smoothing * marginal[test.label] + _lookup_counts(pool_src, pool_te))
              / (k * smoothing + _lookup_counts(pool_src // k, pool_te // k)))
    num = k * smoothing * pooled + _lookup_counts(cell_src, cell_te)
    den = k * smoothing + _lookup_counts(cell_src // k, cell_te // k)
    return np.log(num / den)


def _score_from_pairs(worker: np.ndarray, label: np.ndarray, src_post: np.ndarray, test: CrowdLabels,
                      post: np.ndarray, smoothing: float) -> np.ndarray:
    """Soft :func:`_score_from_pairs_hard`: ``log sum_c q_j(c) Pi_w[c, a]``."""
    k = test.n_classes
    counts = _dense_confusions(test.n_workers, k)
    np.add.at(counts, (worker, slice(None), label), src_post)
    # the crowd's confusion, shrunk toward the answers' marginal, as in the hard rule
    marginal = (1.0 + np.bincount(label, minlength=k)) / (k + len(label))
    pooled = k * smoothing * marginal[None, :] + counts.sum(axis=0)
    counts += k * smoothing * pooled / pooled.sum(axis=1, keepdims=True)
    conf = counts / counts.sum(axis=2, keepdims=True)
    p = np.einsum("nc,nc->n", post[test.task], conf[test.worker, :, test.label])
    return np.log(np.maximum(p, 1e-300))


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
    n_folds: int = 5,
    smoothing: float = 1.0,
    random_state: int | None = 0,
    hard: bool = True,
    max_answers: int | None = None,
    crossfit: bool = True,
    max_withheld: int | None = None,
) -> pd.DataFrame:
    """Cross-validated predictive log-likelihood of every candidate (see the module docstring).

    Returns a DataFrame indexed by candidate name with columns ``score`` (mean per held-out
    answer), ``sd`` (over folds), ``seconds`` (total fit time), ``error`` (message of a
    candidate that failed, which then scores ``-inf``), ``gain`` (mean paired difference of
    the per-answer score against the first candidate, over the same held-out answers) and
    ``z`` (that gain over its standard error), and ``gain_null`` and ``z_null``, the same
    against the null model (every task one constant label, i.e. each worker's answer rate).
    The per-answer scores are in ``table.attrs["per_answer"]`` (candidate -> array, the same
    withheld answers in the same order for every candidate that ran) and
    ``table.attrs["null"]``.  ``crossfit=False`` counts the scoring confusion on the training
    answers instead (crowdlearn 0.1.0's rule, biased toward methods that ignore the answers
    when tasks have few; kept for comparison).  ``max_withheld``: fit the folds in turn until
    at least this many withheld answers have been scored, and no more (at least two folds,
    so that cross-fitting has another fold; None: every fold).  Every fold still trains on
    the answers outside it, so the scores estimate the same quantity from fewer answers.
    """
    from ..core.data import as_crowd_labels

    if n_folds < 2:
        raise ValueError(f"n_folds must be >= 2 (cross-validation over answers), got {n_folds!r}")
    if max_withheld is not None and not max_withheld >= 1:
        raise ValueError(f"max_withheld must be a positive number of answers or None, got {max_withheld!r}")
    data = as_crowd_labels(labels)
    # child streams, not the seed's own: a crowd simulated with the same seed draws its truth
    # from ``default_rng(seed).random``, and a subsample drawn from that very stream keeps
    # the tasks of one class (found on ``simulate.dawid_skene(..., seed=0)`` at 10^6 answers)
    sub_rng, fold_rng = _child_generators(random_state, 2)
    data = _subsample_tasks(data, max_answers, sub_rng)
    folds = [m for m in _folds(data, n_folds, fold_rng) if m.any()]
    if max_withheld is not None:
        withheld = np.cumsum([m.sum() for m in folds])
        folds = folds[:max(2, int(np.searchsorted(withheld, max_withheld)) + 1)]
    # cross-fitting counts each fold's scoring confusion on the other folds' withheld answers:
    # with a single fold that withholds anything there are none, and the training answers serve
    crossfit = crossfit and len(folds) >= 2
    # the withheld answers of each fold, shared by every candidate and the null model (the
    # training answers are rebuilt per fit: n_folds copies of nearly all answers at once
    # would cost more memory than rebuilding them costs time)
    tests = [data._select_keep_ids(m) for m in folds]
    rows = {}
    per_answer = {}
    for cand in candidates:
        name, _ = _make(cand, random_state)
        seconds, error = 0.0, ""
        fitted = []  # (train, test, posteriors or labels) per fold
        for mask, test in zip(folds, tests):
            train = data._select_keep_ids(~mask)
            _, est = _make(cand, random_state)
            t0 = time.process_time()
            try:
                with warnings.catch_warnings():
                    # a fold fit's warnings (a collapse, slow convergence) concern a fit the
                    # user never sees; the null-model test below is what judges it
                    warnings.simplefilter("ignore")
                    est.fit(train)
            except Exception as exc:  # a failing candidate is reported, not fatal
                error = f"{type(exc).__name__}: {exc}"
                break
            finally:
                seconds += time.process_time() - t0
            post = est.probas_.reindex(index=data.tasks, columns=data.classes, fill_value=0.0).to_numpy()
            # keep only what scoring reads: the labels when hard, the training answers only
            # for the in-sample rule (n_folds dense tables of 10^4 classes would not fit)
            fitted.append((None if crossfit else train, test, np.argmax(post, axis=1) if hard else post))
            del post
        answers = [] if error else _fold_scores(fitted, hard, crossfit, smoothing)
        fold_scores = [a.mean() for a in answers]
        if error or not fold_scores:
            rows[name] = (-np.inf, np.nan, seconds, error or "nothing could be withheld")
        else:
            rows[name] = (float(np.mean(fold_scores)), float(np.std(fold_scores)), seconds, "")
            per_answer[name] = np.concatenate(answers)
    table = pd.DataFrame.from_dict(rows, orient="index", columns=["score", "sd", "seconds", "error"])
    # paired comparisons over the same held-out answers: with the first candidate (the
    # reference), and with the null model (every task one constant label: each worker's
    # answer rate), which a candidate whose labels carry information about the answers beats
    ref = per_answer.get(table.index[0])
    # (the training answers only for the in-sample rule, as for the candidates)
    pairs = [(None if crossfit else data._select_keep_ids(~m), test, np.zeros(data.n_tasks, np.int64))
             for m, test in zip(folds, tests)]
    null = np.concatenate(_fold_scores(pairs, True, crossfit, smoothing)) if pairs else None
    for prefix, base in (("", ref), ("_null", null)):
        gain, z = np.full(len(table), np.nan), np.full(len(table), np.nan)
        for i, name in enumerate(table.index):
            if base is not None and name in per_answer:
                gain[i], z[i] = _paired(per_answer[name] - base)
        table["gain" + prefix] = gain
        table["z" + prefix] = z
    table.attrs["per_answer"] = per_answer
    table.attrs["null"] = null
    table.attrs["crossfit"] = crossfit
    table.attrs["folds"] = len(folds)
    return table


def _paired(diff: np.ndarray) -> tuple[float, float]:
    """Mean of paired per-answer differences, and that mean over its standard error."""
    gain = float(diff.mean())
    se = diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else np.inf
    return gain, (gain / se if se > 0 else (0.0 if gain == 0 else float(np.sign(gain) * np.inf)))


class AutoAggregator(BaseAggregator):
    """Pick (or stack) the candidates whose posteriors best predict withheld answers.

    Parameters
    ----------
    candidates : sequence of str or estimators, optional
        Registered names or unfitted aggregators, most robust first (ties go to the earlier
        one).  Default :data:`DEFAULT_CANDIDATES`, or :data:`MANY_CLASS_CANDIDATES` above
        :data:`MANY_CLASSES` classes.
    n_folds : int, default 5
        Folds of the cross-validation over answers (each answer is in one fold; on large
        inputs not every fold is fitted, see ``max_withheld``).
    min_z : float
        A candidate takes part only if its paired gain over the null model exceeds ``min_z``
        standard errors (see ``fallback``).  With ``combine="select"``, a candidate replaces
        the first one (the reference, ``ds`` by default) only if its paired gain over the same
        held-out answers exceeds ``min_z`` standard errors.
    smoothing : float
        Dirichlet pseudo-count of the common worker model used for scoring.
    combine : {"stack", "select"}, default "stack"
        Average the posteriors of the candidates with stacking weights learned on the
        withheld answers (module docstring, step 5), or refit the one chosen candidate
        (step 6).  The default was chosen on simulated crowds (``benchmarks/model_choice.py
        --synthetic``), not on the real sets.
    fallback : str or None, default None
        The candidate returned when no candidate's labels predict the withheld answers better
        than the null model (each worker's answer rate, whatever the task) by ``min_z``
        standard errors, as with 2-3 answers per task and few per worker, where EM methods
        tend to collapse onto one class.  None: the first candidate (the reference, ``ds`` by
        default; majority vote was 19 points worse on imbalanced sparse crowds, section
        ``auto-scoring-few`` of benchmarks/RESULTS.md); otherwise a registered name among the
        candidates (an error if it is not one).  If it failed on the folds, the best-scoring
        candidate is returned.
    max_answers : int or None, default 100_000
        Above this many answers the choice is made on a random subset of tasks holding about
        this many answers (the final fit always uses every answer).  A speed setting.
    max_withheld : int or None, default 50_000
        The folds are fitted in turn until this many withheld answers have been scored (at
        least two folds; None: every fold).  Each fold still trains on all the answers
        outside it; only the number of scored answers falls, and 50,000 answers measure a
        mean log-likelihood per answer to about 0.005 nats (its spread per answer is about
        1).  When the folds withhold fewer answers than that in all, every fold is fitted;
        on a subsample of 10^5 answers, three of five.  A speed setting: the fold fits of the confusion-matrix candidates cost
        O(workers x K^2) per EM iteration however few answers each worker has there.
    random_state : int
        Seed of the folds and of every candidate.  The folds are drawn over the answers in
        (task, worker, label) code order: the order of the rows does not matter, but new ids
        (another sort order) draw other folds, as another seed would, and so other weights.

    Attributes
    ----------
    chosen_ : str
        Name of the chosen candidate (with ``combine="stack"``: the one of largest weight).
    best_ : estimator
        The chosen candidate fitted on all answers; its worker model (``confusions_``,
        ``skills_``, ...) is also reachable through this estimator's attributes.
    weights_ : Series
        Candidate -> weight in the output (one 1.0 with ``combine="select"``).
    members_ : list of (float, estimator)
        The candidates with a positive weight, fitted on all answers; ``predict_proba`` on
        new answers is their weighted mixture, like ``probas_``.
    scores_ : DataFrame
        Held-out score per candidate (see :func:`heldout_scores`), with the stacking weight.
    reason_ : str
        One sentence saying why ``chosen_`` (or the mixture) was chosen.
    """

    def __init__(
        self,
        candidates: Sequence[Any] | None = None,
        n_folds: int = 5,
        min_z: float = 2.0,
        smoothing: float = 1.0,
        combine: str = "stack",
        fallback: str | None = None,
        max_answers: int | None = 100_000,
        max_withheld: int | None = 50_000,
        random_state: int | None = 0,
    ) -> None:
        self.candidates = candidates
        self.n_folds = n_folds
        self.min_z = min_z
        self.smoothing = smoothing
        self.combine = combine
        self.fallback = fallback
        self.max_answers = max_answers
        self.max_withheld = max_withheld
        self.random_state = random_state

    def __crowd_tags__(self) -> Tags:
        # a fitted selector is its chosen estimator; before the fit it promises what every
        # candidate it may choose promises
        if "members_" in self.__dict__:
            chosen = [get_tags(est) for _, est in self.members_]
        elif self.candidates is not None:
            chosen = [get_tags(get_method(c, LABEL_KINDS) if isinstance(c, str) else c) for c in self.candidates]
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
        # ``data`` is coded on the fitted workers and classes, which are every member's; the
        # stacked prediction is the same mixture as the fitted posteriors
        out = sum(w * est.predict_proba(data).to_numpy() for w, est in self.members_)
        return out / out.sum(axis=1, keepdims=True)

    def _fit(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None):
        if self.combine not in ("select", "stack"):
            raise ValueError(f"combine must be 'select' or 'stack', got {self.combine!r}")
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
            data, cands, self.n_folds, self.smoothing, self.random_state, max_answers=self.max_answers,
            max_withheld=self.max_withheld,
        )
        per_answer = scores.attrs.pop("per_answer")
        null = scores.attrs.pop("null")
        names = [_make(c, self.random_state)[0] for c in cands]
        fallback = self._fallback_index(cands, names)
        finite = np.isfinite(scores["score"].to_numpy())
        z_null = np.nan_to_num(scores["z_null"].to_numpy(), nan=-np.inf)
        # candidates whose labels predict the withheld answers better than the null model
        informative = finite & (z_null > self.min_z)
        scores["eligible"] = informative
        weights = np.zeros(len(cands))
        if not finite.any():
            # nothing could be withheld (e.g. one answer per task): the first candidate
            weights[0] = 1.0
            self.reason_ = (
                f"chose {names[0]!r} (the first candidate): no answer could be withheld to compare "
                "methods, every task or worker has a single answer"
            )
        elif not informative.any():
            top = int(np.argmax(np.where(finite, z_null, -np.inf)))
            why = (f"no candidate's labels predict the withheld answers significantly better than "
                   f"each worker's answer rate alone (best: {names[top]!r}, z = {z_null[top]:.1f} <= "
                   f"{self.min_z}; null model {np.mean(null):.4f} nats per answer)")
            if finite[fallback]:
                pick = fallback
                self.reason_ = f"chose {names[pick]!r} (the fallback): {why}"
            else:  # the fallback failed on the folds: the best score among those that ran
                pick = int(np.argmax(np.where(finite, scores["score"].to_numpy(), -np.inf)))
                self.reason_ = (f"chose {names[pick]!r} (the best held-out score; the fallback "
                                f"{names[fallback]!r} failed): {why}")
            weights[pick] = 1.0
        elif self.combine == "stack":
            ran = [i for i in range(len(cands)) if informative[i]]
            pred = np.exp(np.column_stack([per_answer[names[i]] for i in ran]))
            weights[ran] = stacking_weights(pred)
            weights[weights < 0.01] = 0.0
            weights /= weights.sum()
            used = ", ".join(f"{names[i]} {weights[i]:.2f}" for i in np.argsort(-weights) if weights[i] > 0)
            left_out = [names[i] for i in range(len(cands)) if finite[i] and not informative[i]]
            self.reason_ = (
                f"stacked {int((weights > 0).sum())} candidate(s) with the weights that best predict "
                f"the withheld answers: {used}"
                + (f"; left out, no better than each worker's answer rate alone: {', '.join(left_out)}"
                   if left_out else "")
                + (f" ({len(pred)} withheld answers of {scores.attrs['folds']} of the {self.n_folds} folds)"
                   if scores.attrs.get("folds", self.n_folds) < self.n_folds else "")
            )
        else:
            pick = self._select(scores, informative, names)
            weights[pick] = 1.0
        scores["weight"] = weights
        self.scores_ = scores
        self.weights_ = pd.Series(weights, index=names, name="weight")
        kwargs = {}
        if gold is not None:
            g = gold >= 0
            kwargs["gold"] = pd.Series(data.classes.take(gold[g]), index=data.tasks[g])
        post = np.zeros((data.n_tasks, data.n_classes))
        best, members = None, []
        for i in np.argsort(-weights, kind="stable"):
            if weights[i] <= 0:
                break
            name, est = _make(cands[i], self.random_state)
            extra = dict(kwargs)
            if init is not None and get_tags(est).accepts_init:
                extra["init"] = init
            est.fit(data, **extra)
            post += weights[i] * est.probas_.reindex(index=data.tasks, columns=data.classes, fill_value=0.0).to_numpy()
            members.append((float(weights[i]), est))
            if best is None:
                best = (name, est)
        self.chosen_, self.best_ = best
        self.members_ = members
        self.history_ = list(getattr(self.best_, "history_", []))
        self.n_iter_ = int(getattr(self.best_, "n_iter_", 0))
        self.converged_ = bool(getattr(self.best_, "converged_", True))
        return post / post.sum(axis=1, keepdims=True)

    def _fallback_index(self, cands: list, names: list) -> int:
        """Position of ``fallback`` among the candidates: by name, or by the registered class of
        that name when candidates are estimators; an error when it is not one of them."""
        if self.fallback is None:
            return 0
        if self.fallback in names:
            return names.index(self.fallback)
        try:
            cls = get_method(self.fallback)
        except (KeyError, ValueError, TypeError):
            cls = None
        for i, cand in enumerate(cands):
            if cls is not None and not isinstance(cand, str) and type(cand) is cls:
                return i
        raise ValueError(f"fallback {self.fallback!r} is not one of the candidates {names}")

    def _select(self, scores: pd.DataFrame, eligible: np.ndarray, names: list) -> int:
        """Index of the selected candidate among the ``eligible`` ones; sets ``reason_``."""
        ref_name = names[0]
        z = scores["z"].to_numpy()
        better = np.flatnonzero(eligible & (np.nan_to_num(z, nan=-np.inf) > self.min_z))
        if len(better):
            pick = int(better[np.argmax(scores["score"].to_numpy()[better])])
        else:
            pick = 0 if eligible[0] else int(np.nanargmax(np.where(eligible, scores["score"], -np.inf)))
        row = scores.iloc[pick]
        fitted = scores.attrs.get("folds", self.n_folds)
        cv = (f"{self.n_folds}-fold cross-validation over answers" if fitted >= self.n_folds else
              f"{fitted} of the {self.n_folds} folds of a cross-validation over answers")
        if pick == 0:
            top = scores["score"].idxmax()
            self.reason_ = (
                f"chose {names[0]!r} (the reference candidate): no other candidate predicts the "
                f"withheld answers significantly better (best: {top!r}, "
                f"gain {scores.loc[top, 'gain']:+.4f} nats per answer, z = {scores.loc[top, 'z']:.1f} "
                f"<= {self.min_z}; {cv})"
            )
        elif not len(better):
            self.reason_ = (
                f"chose {names[pick]!r}: the best score among the candidates whose labels predict the "
                f"withheld answers better than each worker's answer rate alone; the reference "
                + (f"{ref_name!r} does not (paired z = {scores.iloc[0]['z_null']:.1f} <= {self.min_z})"
                   if np.isfinite(scores.iloc[0]["score"]) else f"{ref_name!r} failed")
            )
        else:
            self.reason_ = (
                f"chose {names[pick]!r}: its labels predict the withheld answers better than "
                f"{ref_name!r} by {row['gain']:+.4f} nats per answer (paired z = {row['z']:.1f} > "
                f"{self.min_z}; {cv}), the best score "
                f"among {len(better)} such candidate(s)"
            )
        return pick

    def __getattr__(self, name: str):
        # delegate fitted worker-model attributes (confusions_, skills_, priors_, ...) to best_
        if name.endswith("_") and not name.startswith("__") and "best_" in self.__dict__:
            return getattr(self.__dict__["best_"], name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
