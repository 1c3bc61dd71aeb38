"""KOS: the message-passing estimator of Karger, Oh and Shah.

Karger, Oh & Shah (2011, NIPS; 2014, Operations Research 62(1)), "Budget-optimal task
allocation for reliable crowdsourcing systems".  Binary answers ``A_{nm} in {+1, -1}`` live on
the edges of the task-worker bipartite graph; two kinds of messages are passed along them::

    x_{n->m} = sum_{m' in d(n) \\ m} A_{nm'} y_{m'->n}      (task -> worker: "what the others say")
    y_{m->n} = sum_{n' in d(m) \\ n} A_{n'm} x_{n'->m}      (worker -> task: "how reliable m is")

from ``y ~ N(1, 1)``; the label of task ``n`` is ``sign(sum_m A_{nm} y_{m->n})``.  The
iteration is a power method on the non-backtracking operator of the answer graph, so the
messages grow geometrically: they are rescaled to unit RMS after every round (the labels only
depend on their direction).

Implementation: one float per answer (edge) and per binary problem; the full per-task and
per-worker sums are ``np.bincount`` calls and the leave-one-out messages are obtained by
subtracting the edge's own term, so a round costs O(L) with no Python loop over edges.

Multi-class data (K > 2) is split into the K - 1 ordinal binary problems "label > l",
l = 0..K-2 (the reduction of Zhang, Chen, Zhou & Jordan's comparison code), solved together.

From scores to probabilities
----------------------------
KOS outputs a score, not a posterior.  For each binary problem ``l``:

1. the worker's full message ``Y_m = sum_n A_{nm} x_{n->m}`` divided by ``sum_n |x_{n->m}|``
   is a confidence-weighted agreement rate in [-1, 1], i.e. an estimate ``q_m`` of
   ``2 p_m - 1`` (``p_m`` = probability of a correct answer); ``skills_`` is its mean over
   the K - 1 problems;
2. the task score ``z_n = sum_m A_{nm} y_{m->n}`` is put on the log-odds scale by one global
   factor ``kappa = sum_e |logit((1 + q_{m(e)}) / 2)| / sum_e |y_e|`` (the average one-coin
   log-odds weight of an answer over its average KOS message), giving
   ``LLR_{n,l} = clip(kappa z_{n,l}, -20, 20)`` for the event "y_n > l";
3. the K - 1 threshold log-odds are combined as independent evidence: class ``j`` gets
   ``log P(y = j) = sum_{l < j} LLR_{n,l} + const`` (the log-likelihood that "y > l" holds for
   exactly the thresholds below ``j``), and ``probas_`` is the softmax of that.  For K = 2 this
   is ``P(y = 1) = sigmoid(LLR)``; its argmax is the first threshold where the cumulative
   evidence turns down, which is the "first l with label > l false" decoding of the
   comparison code whenever the K - 1 signs are consistent.

The scaling never changes a label (``kappa > 0``); the clip keeps binary posteriors inside
[2e-9, 1 - 2e-9].  Tasks without answers get the uniform distribution.

Orientation: negating every message gives another fixed point (all labels reversed, all
workers adversarial), and on small graphs the iteration can drift to it.  Without gold, each
binary problem's messages are oriented so that the signs of the task scores agree with the
vote ``sum_m A_{nm}`` (``sum_n vote_n sign(z_n) >= 0``): the crowd as a whole is assumed better than chance, the same assumption
as the paper's ``y ~ N(1, 1)`` start.  With gold, the gold messages fix the sign.

No information, no message: when a task's score is exactly zero because nothing reached it
(e.g. its only answers come from a worker who shares no task with anybody, or there is a single
worker), its threshold log-odds fall back to the vote ``sum_m A_{nm}`` times the average
per-answer log-odds weight of the fit (1 if there is none), so the answers are followed
instead of a coin flip.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
from scipy.special import expit, softmax

from ..core.base import Tags, resolve_random_state
from ..core.data import CrowdLabels
from .base import BaseAggregator

__all__ = ["KOS"]

_LLR_MAX = 20.0
_Q_MAX = 0.98  # |2p - 1| cap when turning agreement rates into log-odds


class KOS(BaseAggregator):
    """Karger-Oh-Shah iterative message passing (binary; multi-class via K - 1 thresholds).

    Parameters
    ----------
    n_iter : int, default 10
        Maximum number of message-passing rounds (the paper and Zhang et al. use ~10).
    tol : float, default 1e-4
        Stop when the RMS change of the (unit-RMS) worker messages is below ``tol`` for every
        binary problem.  ``tol=0`` runs exactly ``n_iter`` rounds.
    random_state : int, default 0
        Seed of the ``N(1, 1)`` initial worker messages and of tie-breaking.  The messages
        are drawn per answer in (task, worker, label) order, so the order of the rows does
        not matter; new ids (another sort order) draw other starts, which moves the
        posteriors a little.

    Attributes
    ----------
    skills_ : Series, worker -> reliability in [-1, 1]
        The worker's full reliability message ``sum_n A_{nm} x_{n->m}`` normalised by
        ``sum_n |x_{n->m}|`` (an estimate of ``2 p - 1``; negative for adversaries), averaged
        over the K - 1 binary problems.
    worker_messages_ : ndarray (n_workers, n_classes - 1)
        Full (not leave-one-out) worker messages per binary problem "label > l", on the
        unit-RMS message scale; used by :meth:`predict_proba` on new tasks.
    scale_ : ndarray (n_classes - 1,)
        The factor ``kappa`` putting task scores on the log-odds scale.
    history_ : list of float
        Largest RMS change of the normalised worker messages per round.

    Notes
    -----
    Gold labels, if given, fix the task messages of gold tasks to ``+-max|x|`` (the most
    confident value of that round) so workers are judged mostly on them, and clamp the output.
    """

    def __crowd_tags__(self) -> Tags:
        # probas_ sum leave-one-out messages; predict_proba the full worker messages.
        # the N(1, 1) start is drawn per answer in (task, worker, label) code order: the order
        # of the rows does not change it, but renaming ids reorders the codes and does, so
        # relabelled data is asked for the same labels, not identical posteriors
        return dataclasses.replace(super().__crowd_tags__(), stochastic=True, has_worker_model=True,
                                   predict_matches_fit=False)

    def __init__(self, n_iter: int = 10, tol: float = 1e-4, random_state: int | None = 0) -> None:
        self.n_iter = n_iter
        self.tol = tol
        self.random_state = random_state

    # ------------------------------------------------------------------ fit
    #: K-1 threshold problems cost O(K L); beyond this the reduction is meaningless anyway
    _MAX_CLASSES = 256

    def _fit(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None) -> np.ndarray:
        if self.n_iter < 0:
            raise ValueError(f"n_iter must be >= 0, got {self.n_iter}")
        k, n, m = data.n_classes, data.n_tasks, data.n_workers
        if k > self._MAX_CLASSES:
            raise ValueError(
                f"KOS solves K-1 binary problems; {k} classes is more than {self._MAX_CLASSES} "
                "(use 'mv', 'wawa' or 'zbs' for label sets this large)"
            )
        if k == 1:
            self.skills_ = pd.Series(np.ones(m), index=data.workers, name="skill")
            self.worker_messages_ = np.zeros((m, 0))
            self.scale_ = np.zeros(0)
            return np.ones((n, 1))
        answers = _threshold_answers(data.label, k)  # (L, K-1) in {+1, -1}
        gold_x = None
        if gold is not None:
            known = gold >= 0
            gold_x = _threshold_answers(np.maximum(gold, 0), k)
            gold_x[~known] = 0.0
            gold_edge = known[data.task]
        rng = resolve_random_state(self.random_state)
        # one draw per answer in (task, worker, label) order, not in the order of the rows
        y = np.empty(answers.shape)
        y[data.canonical_order()] = rng.normal(1.0, 1.0, size=answers.shape)
        y = _unit_rms(y)
        x = np.zeros_like(y)
        self.converged_ = False
        for it in range(self.n_iter):
            x = _leave_one_out(answers, y, data.task, n)
            if gold_x is not None:
                big = np.abs(x).max(axis=0, initial=0.0)
                big = np.where(big > 0, big, 1.0)
                x[gold_edge] = gold_x[data.task[gold_edge]] * big
            y_new = _unit_rms(_leave_one_out(answers, x, data.worker, m))
            delta = float(np.sqrt(np.mean((y_new - y) ** 2, axis=0)).max(initial=0.0))
            y = y_new
            self.history_.append(delta)
            self._progress_step(delta)
            self.n_iter_ = it + 1
            if self.tol > 0 and delta < self.tol:
                self.converged_ = True
                break
        if self.n_iter == 0:
            x = _leave_one_out(answers, y, data.task, n)
        if gold_x is None:
            # the messages are defined up to one global sign per binary problem (negating x
            # and y is another fixed point); orient them so the task scores agree with the
            # vote, i.e. the crowd as a whole is taken to be better than chance
            votes = _group_sums(answers, data.task, n)
            agreement = np.sum(votes * np.sign(_group_sums(answers * y, data.task, n)), axis=0)
            flip = np.where(agreement < 0, -1.0, 1.0)
            x = x * flip
            y = y * flip

        # worker reliabilities: full messages and their [-1, 1] normalisation
        full_y = _group_sums(answers * x, data.worker, m)
        abs_x = _group_sums(np.abs(x), data.worker, m)
        q = np.divide(full_y, abs_x, out=np.zeros_like(full_y), where=abs_x > 0)
        self.skills_ = pd.Series(q.mean(axis=1), index=data.workers, name="skill")

        # calibration factor per binary problem: log-odds weight per unit of message
        qc = np.clip(q, -_Q_MAX, _Q_MAX)
        logit_w = np.abs(np.log1p(qc) - np.log1p(-qc))  # |logit((1 + q) / 2)|
        num = logit_w[data.worker].sum(axis=0)
        den = np.abs(y).sum(axis=0)
        self.scale_ = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
        # the final y messages are (full_y[worker] - A x) / r with r their pre-normalisation RMS;
        # dividing the full messages by the same r puts them on the scale of y for prediction
        loo = full_y[data.worker] - answers * x
        r = np.sqrt(np.mean(loo**2, axis=0))
        self.worker_messages_ = np.divide(full_y, r, out=np.zeros_like(full_y), where=r > 0)

        mean_w = num / max(data.n_labels, 1)
        self._fallback_weight = np.where(mean_w > 0, mean_w, 1.0)
        scores = _group_sums(answers * y, data.task, n)
        return self._to_proba(data, answers, scores)

    def _to_proba(self, data: CrowdLabels, answers: np.ndarray, scores: np.ndarray) -> np.ndarray:
        llr = scores * self.scale_
        silent = scores == 0
        if silent.any():  # nothing reached these tasks: follow their answers
            votes = _group_sums(answers, data.task, data.n_tasks)
            llr = np.where(silent, votes * self._fallback_weight, llr)
        proba = _threshold_proba(llr)
        proba[data.labels_per_task() == 0] = 1.0 / data.n_classes
        return proba

    # ------------------------------------------------------------- predict
    def _predict_proba_codes(self, data: CrowdLabels) -> np.ndarray:
        k = len(self.classes_)
        if k == 1:
            return np.ones((data.n_tasks, 1))
        answers = _threshold_answers(data.label, k)
        scores = _group_sums(answers * self.worker_messages_[data.worker], data.task, data.n_tasks)
        return self._to_proba(data, answers, scores)


# ---------------------------------------------------------------------------- helpers
def _threshold_answers(labels: np.ndarray, k: int) -> np.ndarray:
    """(len(labels), K-1) float matrix: +1 where label > l, -1 otherwise."""
    return np.where(labels[:, None] > np.arange(k - 1)[None, :], 1.0, -1.0)


def _group_sums(values: np.ndarray, group: np.ndarray, size: int) -> np.ndarray:
    """Per-group column sums of an (L, C) array (one bincount per column)."""
    out = np.empty((size, values.shape[1]))
    for c in range(values.shape[1]):
        out[:, c] = np.bincount(group, weights=values[:, c], minlength=size)
    return out


def _leave_one_out(answers: np.ndarray, msg: np.ndarray, group: np.ndarray, size: int) -> np.ndarray:
    """Edge messages ``sum over the other edges of the same node of A * msg``."""
    contrib = answers * msg
    return _group_sums(contrib, group, size)[group] - contrib


def _unit_rms(msg: np.ndarray) -> np.ndarray:
    rms = np.sqrt(np.mean(msg**2, axis=0))
    return np.divide(msg, rms, out=np.zeros_like(msg), where=rms > 0)


def _threshold_proba(llr: np.ndarray) -> np.ndarray:
    """Class posteriors from K-1 threshold log-odds ("y > l"), combined as independent evidence."""
    llr = np.clip(llr, -_LLR_MAX, _LLR_MAX)
    if llr.shape[1] == 1:
        p1 = expit(llr[:, 0])
        return np.column_stack([1.0 - p1, p1])
    logp = np.zeros((llr.shape[0], llr.shape[1] + 1))
    np.cumsum(llr, axis=1, out=logp[:, 1:])
    return softmax(logp, axis=1)
