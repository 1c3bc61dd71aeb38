"""Scores that say which task to label next, and which worker to ask.

Task scores (higher = ask sooner), from a fitted aggregator's posteriors ``q_j``:

* ``entropy``: ``H(q_j) = -sum_c q_j(c) log q_j(c)`` (uncertainty sampling; Lewis & Gale 1994);
* ``margin``: ``1 - (q_j(1st) - q_j(2nd))`` (Scheffer et al. 2001);
* ``eig``: the expected information gain of one more answer about the task's truth,
  ``I(Y_j; A) = H(sum_c q_j(c) P(.|c)) - sum_c q_j(c) H(P(.|c))`` with ``P(a|c)`` the
  confusion of the worker who would answer: the answer-weighted mean confusion of the crowd
  when workers cannot be chosen, a given worker's otherwise (Lindley 1956; for crowds,
  e.g. Zhao, Sukthankar & Sukthankar 2011).  An uncertain task whose answers carry no
  information (every worker a spammer on it) scores low, unlike with ``entropy``;
* ``kg``: the knowledge gradient of one more answer, the expected gain in the probability of
  deciding the task right, ``sum_a max_c q_j(c) P(a|c) - max_c q_j(c)`` (the gain in expected
  accuracy of the Bayes decision; Frazier, Powell & Dayanik 2008; for crowds, Chen, Lin & Zhou
  2013).  It is 0 for a task one answer cannot flip, and ties are broken at random;
* ``random``: a seeded uniform draw (the baseline every strategy is compared with).

Worker scores for a chosen task (when the requester can pick who answers):

* ``greedy``: the worker's expected accuracy ``skills_`` (exploitation only);
* ``ucb``: expected accuracy plus ``c sqrt(log N / n_w)`` for a worker with ``n_w`` answers
  among ``N`` (upper confidence bound; Auer et al. 2002);
* ``thompson``: a draw from ``Beta(1 + n_w acc_w, 1 + n_w (1 - acc_w))`` (Thompson 1933);
* ``epsilon``: greedy, but a uniformly random worker with probability ``epsilon``;
* ``eig`` and ``eig-thompson``: the task and the worker are chosen *together*, by the
  information one answer of *that* worker would bring about *that* task,
  ``max_w I(Y_j; A_w)`` (the ``eig`` formula above with worker ``w``'s own confusion), so a
  task is asked when someone who can settle it is available, and it goes to the worker whose
  confusions separate its likely classes best (rather than to the most accurate worker on
  average).  Each worker's confusion rows have the Dirichlet posterior of
  :func:`worker_confusion_counts` (the aggregator's posteriors as soft counts, plus one
  pseudo-answer per class spread like the crowd's mean confusion row); ``eig`` uses their
  means, ``eig-thompson`` one draw per round (Thompson sampling, so a worker with few answers
  is tried now and then instead of never).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.stats import keyed_uniforms

__all__ = ["TASK_STRATEGIES", "GAIN_STRATEGIES", "WORKER_STRATEGIES", "JOINT_WORKER_STRATEGIES", "task_scores",
           "worker_scores", "expected_information_gain", "expected_accuracy_gain", "answer_gain", "worker_confusion_counts", "worker_confusion_draw"]

TASK_STRATEGIES = ("entropy", "margin", "eig", "kg", "random")
#: task strategies whose score is a gain of one answer from a given confusion (they can score
#: (task, worker) pairs with the worker's own confusion)
GAIN_STRATEGIES = ("eig", "kg")
WORKER_STRATEGIES = ("greedy", "ucb", "thompson", "epsilon", "eig", "eig-thompson")
#: worker strategies that score (task, worker) pairs jointly by information gain
JOINT_WORKER_STRATEGIES = ("eig", "eig-thompson")


def _entropy(p: np.ndarray, axis: int = -1) -> np.ndarray:
    p = np.clip(p, 1e-300, 1.0)
    # 0 - x, not -x: a certain distribution (one class) sums to +0.0, which negation would
    # turn into the -0.0 that `crowdlearn next` printed as a score
    return 0.0 - (p * np.log(p)).sum(axis=axis)


def expected_information_gain(post: np.ndarray, confusion: np.ndarray) -> np.ndarray:
    """``I(Y; A)`` per task for one answer drawn from ``confusion`` (K x K, ``[true, answered]``).

    ``post`` is (tasks, K); ``confusion`` may also be (tasks, K, K), one per task.
    """
    conf = np.asarray(confusion, float)
    if conf.ndim == 2:
        answer_dist = post @ conf  # (tasks, K): P(A = a) = sum_c q(c) P(a | c)
        cond = post @ _entropy(conf, axis=1)  # sum_c q(c) H(P(.|c))
    else:
        answer_dist = np.einsum("tc,tca->ta", post, conf)
        cond = (post * _entropy(conf, axis=2)).sum(axis=1)
    return np.maximum(_entropy(answer_dist) - cond, 0.0)


def expected_accuracy_gain(post: np.ndarray, confusion: np.ndarray) -> np.ndarray:
    """Knowledge gradient per task: ``sum_a max_c q(c) P(a|c) - max_c q(c)`` for one answer
    drawn from ``confusion`` (K x K, ``[true, answered]``, or one per task, (tasks, K, K))."""
    conf = np.asarray(confusion, float)
    joint = post[:, :, None] * (conf[None] if conf.ndim == 2 else conf)  # (tasks, true, answered)
    # as sum_a (max_c q(c) P(a|c) - q(c*) P(a|c*)), c* the decision now (the confusion rows sum
    # to 1): each term is exactly 0 when answer a leaves c* the decision, so a task no answer
    # can flip scores 0, not the rounding error of a difference of two sums, and its ties are
    # broken at random as promised
    best = post.argmax(axis=1)
    now = np.take_along_axis(joint, best[:, None, None], axis=1)[:, 0, :]  # (tasks, answered)
    return (joint.max(axis=1) - now).sum(axis=1)


def answer_gain(strategy: str, post: np.ndarray, confusion: np.ndarray) -> np.ndarray:
    """The gain of one answer from ``confusion`` under a strategy of :data:`GAIN_STRATEGIES`."""
    if strategy == "kg":
        return expected_accuracy_gain(post, confusion)
    return expected_information_gain(post, confusion)


def task_scores(strategy: str, post: np.ndarray, crowd_confusion: np.ndarray | None,
                rng: np.random.Generator, ids: Any = None) -> np.ndarray:
    """Score of every task (rows of ``post``) under ``strategy``; higher = ask sooner.

    ``ids``: the tasks' ids; the ``random`` strategy then draws one number per id
    (:func:`crowdlearn.core.stats.keyed_uniforms`), so that a task's draw does not depend on
    its position or on whether its id was read as text or as a number.
    """
    if strategy == "entropy":
        return _entropy(post)
    if strategy == "margin":
        top = np.sort(post, axis=1)
        second = top[:, -2] if post.shape[1] > 1 else np.zeros(len(post))
        return 1.0 - (top[:, -1] - second)
    if strategy in GAIN_STRATEGIES:
        if crowd_confusion is None:
            raise ValueError(f"strategy {strategy!r} needs an aggregator with a worker model (confusions_ or skills_)")
        return answer_gain(strategy, post, crowd_confusion)
    if strategy == "random":
        return rng.random(len(post)) if ids is None else keyed_uniforms(ids, rng)
    raise ValueError(f"unknown task strategy {strategy!r}; use one of {', '.join(TASK_STRATEGIES)}")


def worker_scores(strategy: str, accuracy: np.ndarray, n_answers: np.ndarray, rng: np.random.Generator,
                  c: float = 1.0, epsilon: float = 0.1) -> np.ndarray:
    """Score of every candidate worker (higher = ask first).

    ``accuracy``: expected accuracy per worker (a worker never seen: the crowd's mean);
    ``n_answers``: answers each worker has given so far.
    """
    acc = np.clip(np.asarray(accuracy, float), 0.0, 1.0)
    n = np.asarray(n_answers, float)
    if strategy == "greedy":
        return acc
    if strategy == "ucb":
        total = max(n.sum(), 2.0)
        return acc + c * np.sqrt(np.log(total) / np.maximum(n, 1.0))
    if strategy == "thompson":
        return rng.beta(1.0 + n * acc, 1.0 + n * (1.0 - acc))
    if strategy == "epsilon":
        if rng.random() < epsilon:
            return rng.random(len(acc))
        return acc
    if strategy in JOINT_WORKER_STRATEGIES:
        raise ValueError(f"worker strategy {strategy!r} scores (task, worker) pairs: use ActiveLoop.suggest")
    raise ValueError(f"unknown worker strategy {strategy!r}; use one of {', '.join(WORKER_STRATEGIES)}")


def worker_confusion_counts(post: np.ndarray, task: np.ndarray, worker: np.ndarray, label: np.ndarray,
                            n_workers: int) -> np.ndarray:
    """Dirichlet parameters of every worker's confusion rows, ``(workers, K, K)`` ``[true, answered]``.

    The soft counts of one Dawid-Skene M-step, ``n_w[c, a] = sum_{answers (j, a) of w} q_j(c)``,
    taken from whichever aggregator produced the posteriors ``q`` (so the worker model does not
    depend on the aggregator having one), plus a prior of one pseudo-answer per true class
    spread like the crowd's mean confusion row: a worker never seen behaves like the average
    worker, with the uncertainty of a single answer.
    """
    post = np.asarray(post, float)
    k = post.shape[1]
    counts = np.zeros((n_workers, k, k))
    np.add.at(counts, (worker, slice(None), label), post[task])
    crowd = counts.sum(axis=0)
    rows = crowd.sum(axis=1, keepdims=True)
    crowd = np.where(rows > 0, crowd / np.maximum(rows, 1e-300), 1.0 / k)
    return counts + crowd[None]


def worker_confusion_draw(alpha: np.ndarray, rng: np.random.Generator | None) -> np.ndarray:
    """Confusions from Dirichlet parameters ``alpha`` (W, K, K): the means, or one draw per
    row when ``rng`` is given (Thompson sampling)."""
    alpha = np.maximum(np.asarray(alpha, float), 1e-12)
    if rng is None:
        return alpha / alpha.sum(axis=2, keepdims=True)
    g = rng.standard_gamma(alpha)  # Dirichlet rows as normalised gammas, one call for all rows
    g = np.maximum(g, 1e-300)
    return g / g.sum(axis=2, keepdims=True)
