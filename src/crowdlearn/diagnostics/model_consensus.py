"""Consensus of a crowd and a classifier: Dawid-Skene with the model as a calibrated prior.

Given crowd answers and a classifier's *out-of-sample* class probabilities ``p_n`` for the
same tasks, :func:`model_consensus` infers a consensus label and a quality score per task, a
quality score per annotator and per annotation, and the weight of the model against each
annotator.  It answers the question of CROWDLAB (Goh, Mueller et al., 2022, "CROWDLAB:
Supervised learning to infer consensus labels and quality scores for data with multiple
annotators", NeurIPS HILL workshop), which mixes the model's probabilities and the
annotators' labels in a weighted ensemble with hand-set weights, by fitting one generative
model instead (Dawid & Skene, 1979, "Maximum likelihood estimation of observer error-rates
using the EM algorithm", JRSS C 28(1); the classifier enters as the prior of the truth, as in
Raykar et al., 2010, "Learning from crowds", JMLR 11, but with the classifier fixed)::

    y_n | x_n ~ Cat(softmax(beta * log p_n + b)),      (calibrated classifier)
    answer_{n,w} | y_n = j ~ Cat(C_w[j, :])            (Dawid-Skene annotator)

``beta`` (the model weight, a temperature; one per class with ``calibration="vector"``) and
the class offsets ``b`` are learned with the confusions ``C_w`` by EM on the likelihood of
the crowd answers: the E-step is ``q_n(j) ∝ exp(beta_j log p_n(j) + b_j) prod_w C_w[j,
answer_{n,w}]``, the M-step re-estimates ``C_w`` from the soft counts (Dirichlet-smoothed,
as :class:`~crowdlearn.aggregation.DawidSkene`) and ``(beta, b)`` by a soft-target
multinomial logistic regression of ``q`` on ``log p`` (concave).  With ``beta = 0`` the model
is plain Dawid-Skene (``softmax(b)`` is the class prior), so a useless classifier gets a weight
near 0 and a good one a large weight, each measured against the crowd, never against gold.

The variant (annotator model: one-coin or full confusion; temperature or per-class
calibration) is chosen with ``variant="auto"`` by the held-out likelihood of the answers:
the answers are split into folds, each fold is predicted from a fit on the others, and the
variant with the best mean log-probability of the held-out answers is refitted on all of them.
Everything costs O(answers * K + tasks * K) per EM iteration.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np
import pandas as pd

from ..core.base import resolve_random_state
from ..core.data import CrowdLabels, as_crowd_labels
from ..core.ids import ids_like, row_list
from ..core.stats import TINY, argmax_random_ties, vote_fractions

__all__ = ["model_consensus", "ModelConsensus", "WORKER_MODELS", "CALIBRATIONS"]

#: annotator models: one accuracy per annotator, or a full confusion matrix
WORKER_MODELS = ("one_coin", "full")
#: classifier calibrations: one temperature, or one per class
CALIBRATIONS = ("temperature", "vector")
#: the largest model weight (temperature) considered: beyond it the model is a hard vote
_BETA_MAX = 20.0
#: floor of the classifier's probabilities before the log (a 0 is "very unlikely", not -inf)
_P_FLOOR = 1e-12


@dataclasses.dataclass(frozen=True)
class ModelConsensus:
    """What :func:`model_consensus` found.

    Attributes
    ----------
    tasks : DataFrame, one row per task (index ``task``)
        ``consensus_label``, ``quality`` (posterior probability of the consensus label),
        ``model_label`` (the classifier's own argmax), ``n_answers``, ``agreement`` (share
        of the task's answers equal to the consensus, NaN without answers) and
        ``model_share`` (the model's share of the evidence on the task: the evidence of its
        calibrated prediction on the task over the sum of that and the ``weight`` of the
        task's annotators, see Notes).
    probas : DataFrame (tasks x classes)
        Posterior class probabilities; for tasks without answers, the calibrated model.
    annotators : DataFrame, one row per annotator (index ``worker``)
        ``quality`` (mean ``quality`` of the annotator's annotations: an estimate of the
        share of its answers that are right), ``accuracy`` (the model's accuracy of the
        annotator, ``sum_j P(y = j on its tasks) C_w[j, j]``), ``weight`` (evidence of one
        answer, in nats, see Notes), ``n_answers`` and ``agreement`` with the consensus.
    annotations : DataFrame, one row per answer (columns ``task``, ``worker``, ``label``)
        ``quality``: probability that the answer is right given the model and the *other*
        answers of its task (leave-one-out posterior of the answered class), and
        ``consensus_label``.
    model_weight : float
        The temperature ``beta`` (mean over classes with ``calibration="vector"``).
    model_weights : Series, class -> beta_j
    model_bias : Series, class -> b_j
    model_evidence : float
        Mean evidence of one model prediction, in nats, on the scale of
        ``annotators.weight``.
    worker_model, calibration : str
        The variant fitted.
    selection : DataFrame or None
        With ``variant="auto"``: the mean held-out log-probability per answer of each variant.
    log_likelihood : float
        Log-likelihood of the answers (the classifier's probabilities given) at the end.
    n_iter : int
    converged : bool
    """

    tasks: pd.DataFrame
    probas: pd.DataFrame
    annotators: pd.DataFrame
    annotations: pd.DataFrame
    model_weight: float
    model_weights: pd.Series
    model_bias: pd.Series
    model_evidence: float
    worker_model: str
    calibration: str
    selection: pd.DataFrame | None
    log_likelihood: float
    n_iter: int
    converged: bool

    @property
    def consensus(self) -> pd.Series:
        """Consensus label per task."""
        return self.tasks["consensus_label"]

    @property
    def annotator_weights(self) -> pd.Series:
        """Evidence (nats) of one answer per annotator; compare with :attr:`model_evidence`."""
        return self.annotators["weight"]


# ============================================================== input handling
def _align(labels: Any, pred_probs: Any) -> tuple[CrowdLabels, np.ndarray]:
    """The answers (with every task of ``pred_probs``) and the (tasks x classes) probabilities.

    A DataFrame is aligned by task id (index) and class (columns) and may hold tasks nobody
    answered; an array must follow ``labels.tasks`` and ``labels.classes`` exactly.
    """
    data = as_crowd_labels(labels)
    k = data.n_classes
    if isinstance(pred_probs, pd.Series):
        # a Series of probability vectors (classes in labels.classes order), indexed by task
        rows = [np.ravel(np.asarray(v, dtype=float)) for v in pred_probs.to_numpy()]
        bad = np.array([r.shape != (k,) for r in rows], dtype=bool)
        if bad.any():
            raise ValueError(
                f"pred_probs is a Series: each value must be a vector of {k} class "
                f"probabilities in labels.classes order; not so for task "
                f"{pred_probs.index[bad][0]!r} (or give a DataFrame with one column per class)"
            )
        pred_probs = pd.DataFrame(np.stack(rows) if rows else np.empty((0, k)),
                                  index=pred_probs.index, columns=data.classes)
    if isinstance(pred_probs, pd.DataFrame):
        frame = pred_probs
        # rows named by value: a classifier's frame indexed by numbers scores the tasks of
        # answers read as text ("17"), as the other tables keyed by task do
        frame = frame.set_axis(ids_like(frame.index, data.tasks, "pred_probs"), axis=0)
        if frame.index.has_duplicates:
            dup = frame.index[frame.index.duplicated()][0]
            raise ValueError(f"pred_probs: task {dup!r} appears in more than one row")
        if frame.columns.has_duplicates:
            raise ValueError("pred_probs: a class appears in more than one column")
        col_pos = pd.Index(frame.columns).get_indexer(data.classes)
        if np.any(col_pos < 0):
            # class names read from a file are text while the frame's may be numbers: compare as text
            col_pos = pd.Index(frame.columns.astype(str)).get_indexer(data.classes.astype(str))
        if np.any(col_pos < 0):
            missing = list(data.classes[col_pos < 0][:5])
            raise ValueError(
                f"pred_probs has no column for the answered class(es) {missing}; its columns "
                f"are {list(frame.columns)[:10]}"
            )
        if frame.shape[1] > k:  # classes nobody answered are classes too
            extra = [c for c in frame.columns if c not in set(frame.columns[col_pos])]
            data = CrowdLabels(
                data.task, data.worker, data.label, data.tasks, data.workers,
                data.classes.append(pd.Index(extra)), truth=data.truth, features=data.features,
            )
            col_pos = np.concatenate([col_pos, frame.columns.get_indexer(extra)])
            k = data.n_classes
        row_pos = frame.index.get_indexer(data.tasks)
        if np.any(row_pos < 0):
            absent = data.tasks[row_pos < 0]
            raise ValueError(
                f"pred_probs has no row for {len(absent)} answered task(s), e.g. "
                f"{list(absent[:3])}; give out-of-sample probabilities for every task"
            )
        extra_rows = np.setdiff1d(np.arange(len(frame)), row_pos)
        if extra_rows.size:  # tasks without answers: they get the calibrated model
            truth = None
            if data.truth is not None:
                truth = np.concatenate([data.truth, np.full(extra_rows.size, -1, np.int32)])
            data = CrowdLabels(
                data.task, data.worker, data.label,
                data.tasks.append(frame.index[extra_rows]), data.workers, data.classes,
                truth=truth,
            )
            row_pos = np.concatenate([row_pos, extra_rows])
        probs = frame.to_numpy(dtype=float)[np.ix_(row_pos, col_pos)]
        ids = data.tasks  # errors name the task
    else:
        probs = np.asarray(pred_probs, dtype=float)
        if probs.ndim != 2 or probs.shape != (data.n_tasks, k):
            raise ValueError(
                f"pred_probs must have shape (n_tasks, n_classes) = ({data.n_tasks}, {k}) in "
                f"labels.tasks and labels.classes order, got shape {probs.shape}; or give a "
                "DataFrame indexed by task with one column per class"
            )
        ids = None  # errors name the row position
    bad = ~np.isfinite(probs).all(axis=1) | (probs < 0).any(axis=1)
    sums = np.where(bad, 1.0, probs.sum(axis=1))
    bad |= np.abs(sums - 1.0) > 1e-3
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        place = f"task {ids[first]!r}" if ids is not None else row_list(bad)
        raise ValueError(
            f"pred_probs must hold probabilities (finite, >= 0, each row summing to 1): "
            f"not so at {place} ({int(bad.sum())} row(s) in all)"
        )
    return data, probs / sums[:, None]


# ============================================================== the model
@dataclasses.dataclass
class _Fit:
    post: np.ndarray          # (N, K) posteriors
    log_post: np.ndarray      # (N, K) log posteriors
    log_conf: np.ndarray      # (W, K, K) log C_w[true, answered]
    beta: np.ndarray          # (K,)
    bias: np.ndarray          # (K,)
    ll: float
    n_iter: int
    converged: bool


def logsumexp(a: np.ndarray, axis: int, keepdims: bool = False) -> np.ndarray:
    """``log sum exp`` along ``axis``, shifted by the maximum (finite inputs)."""
    top = a.max(axis=axis, keepdims=True)
    out = top + np.log(np.exp(a - top).sum(axis=axis, keepdims=True))
    return out if keepdims else np.squeeze(out, axis=axis)


def _log_prior(z: np.ndarray, beta: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """log softmax(beta * z + b) row-wise: the calibrated classifier."""
    s = z * beta + bias
    return s - logsumexp(s, axis=1, keepdims=True)


def _fit_calibration(z, q, beta, bias, per_class: bool, ridge: float, beta_prior: float,
                     max_steps: int = 25) -> tuple[np.ndarray, np.ndarray]:
    """M-step of (beta, b): maximise ``sum_n sum_j q_nj log softmax(beta z_n + b)_j``.

    A soft-target multinomial logistic regression (concave) with a ridge on ``b`` (a class
    nobody is believed to hold keeps a finite offset), a normal prior of precision
    ``beta_prior`` on each ``beta`` centred at 1, and ``0 <= beta <= _BETA_MAX``,
    solved by projected Newton steps with backtracking: the problem has at most 2K
    parameters, so an exact (2K x 2K) Hessian costs O(N K^2) per step and avoids a
    general-purpose optimiser's per-call overhead, which dominated on small data.
    """
    n, k = z.shape
    r = q.sum(axis=1)
    ridge = max(ridge, 1e-8)  # softmax is shift-invariant: the ridge pins the offsets
    # parameters theta = (beta_1..beta_K, b_1..b_K); a single temperature is the sum map T
    T = np.eye(2 * k) if per_class else np.vstack([np.r_[np.ones(k), np.zeros(k)],
                                                   np.c_[np.zeros((k, k)), np.eye(k)]])
    theta = np.r_[beta, bias] @ np.linalg.pinv(T) if not per_class else np.r_[beta, bias]
    nb = k if per_class else 1
    lower = np.r_[np.zeros(nb), np.full(k, -np.inf)]
    upper = np.r_[np.full(nb, _BETA_MAX), np.full(k, np.inf)]
    theta = np.clip(theta, lower, upper)

    def expand(th):
        full = th @ T
        return full[:k], full[k:]

    def value(th):
        bt, b = expand(th)
        d = th[:nb] - 1.0
        return -(q * _log_prior(z, bt, b)).sum() + 0.5 * ridge * (b @ b) + 0.5 * beta_prior * (d @ d)

    f = value(theta)
    for _ in range(max_steps):
        bt, b = expand(theta)
        p = np.exp(_log_prior(z, bt, b))
        g_s = p * r[:, None] - q                        # gradient in the scores s_nj
        grad = T @ np.r_[(g_s * z).sum(axis=0), g_s.sum(axis=0) + ridge * b]
        pr = p * r[:, None]
        pz = pr * z
        # Hessian in (beta, b): sum_n A_n^T r_n (diag(p_n) - p_n p_n^T) A_n, A_n = [diag(z_n), I]
        h_bb = np.diag((pr * z * z).sum(0)) - np.einsum("ni,nj->ij", pz, p * z)
        h_bc = np.diag(pz.sum(0)) - np.einsum("ni,nj->ij", pz, p)
        h_cc = np.diag(pr.sum(0)) - np.einsum("ni,nj->ij", pr, p) + ridge * np.eye(k)
        hess = T @ np.block([[h_bb, h_bc], [h_bc.T, h_cc]]) @ T.T
        grad[:nb] += beta_prior * (theta[:nb] - 1.0)
        hess[:nb, :nb] += beta_prior * np.eye(nb)
        # coordinates held at a bound by the gradient stay there (projected Newton)
        free = ~(((theta <= lower) & (grad > 0)) | ((theta >= upper) & (grad < 0)))
        step = np.zeros_like(theta)
        hf = hess[np.ix_(free, free)] + 1e-10 * np.eye(int(free.sum()))
        step[free] = np.linalg.solve(hf, grad[free])
        t = 1.0
        while True:
            cand = np.clip(theta - t * step, lower, upper)
            f_new = value(cand)
            if f_new <= f or t < 1e-4:
                break
            t *= 0.5
        done = abs(f - f_new) <= 1e-10 * max(1.0, abs(f))
        if f_new <= f:
            theta, f = cand, f_new
        if done or t < 1e-4:
            break
    bt, b = expand(theta)
    return bt.copy(), b - b.mean()


def _log_confusions(data: CrowdLabels, post: np.ndarray, worker_model: str,
                    alpha: float, diag_alpha: float) -> np.ndarray:
    """M-step of the annotators: MAP confusions ``log C_w[true, answered]`` (W, K, K)."""
    k, m = data.n_classes, data.n_workers
    # soft counts N[w, j, l] = sum over w's answers l of q_n(j), by one sparse product
    counts = (data.incidence().T @ post).reshape(m, k, k).transpose(0, 2, 1)
    if worker_model == "full":
        num = counts + alpha + diag_alpha * np.eye(k)
        den = num.sum(axis=2, keepdims=True)
        conf = np.divide(num, den, out=np.full_like(num, 1.0 / k), where=den > 0)
        return np.log(np.maximum(conf, TINY))
    # one coin: p_w = (right + alpha + diag_alpha) / (answers + 2 alpha + diag_alpha)
    right = np.einsum("wjj->w", counts) + alpha + diag_alpha
    total = counts.sum(axis=(1, 2)) + 2 * alpha + diag_alpha
    p = np.clip(right / total, 1e-9, 1 - 1e-9)
    if k == 1:
        return np.zeros((m, 1, 1))
    out = np.repeat(np.log((1 - p) / (k - 1))[:, None, None], k, axis=1).repeat(k, axis=2)
    idx = np.arange(k)
    out[:, idx, idx] = np.log(p)[:, None]
    return out


def _answer_log_table(data: CrowdLabels, log_conf: np.ndarray) -> np.ndarray:
    """(N, K) sums ``sum_{answers (n, w, l)} log C_w[j, l]`` by one sparse product."""
    m, k, _ = log_conf.shape
    table = log_conf.transpose(0, 2, 1).reshape(m * k, k)  # row w*K + answered, column true
    return np.asarray(data.incidence() @ table)


def _em(data: CrowdLabels, z: np.ndarray, worker_model: str, calibration: str, *,
        alpha: float, diag_alpha: float, ridge: float, beta_prior: float, max_iter: int,
        tol: float) -> _Fit:
    n, k = z.shape
    answered = data.labels_per_task() > 0
    # start: soft majority vote where there are answers, the raw classifier elsewhere
    post = vote_fractions(data)
    post[~answered] = np.exp(z[~answered])
    post /= post.sum(axis=1, keepdims=True)
    beta, bias = np.ones(k), np.zeros(k)
    ll_prev, converged, it = -np.inf, False, 0
    n_answers = max(data.n_labels, 1)
    per_class = calibration == "vector"
    for it in range(1, max_iter + 1):
        log_conf = _log_confusions(data, post, worker_model, alpha, diag_alpha)
        if answered.any():  # tasks without answers carry no information on (beta, b)
            beta, bias = _fit_calibration(z[answered], post[answered], beta, bias, per_class,
                                          ridge, beta_prior)
        joint = _log_prior(z, beta, bias) + _answer_log_table(data, log_conf)
        norm = logsumexp(joint, axis=1, keepdims=True)
        log_post = joint - norm
        post = np.exp(log_post)
        ll = float(norm[answered].sum())
        if ll - ll_prev < tol * n_answers:
            converged = True
            break
        ll_prev = ll
    return _Fit(post, log_post, log_conf, beta, bias, ll, it, converged)


def _held_out_score(data: CrowdLabels, z: np.ndarray, variant: tuple[str, str], folds: np.ndarray,
                    n_folds: int, **em) -> float:
    """Mean log-probability of held-out answers, each fold predicted from a fit on the rest.

    ``log P(answer (n, w, l) | other folds) = log sum_j q_n(j) C_w[j, l]`` with ``q_n`` the
    posterior of task n from its training answers and the classifier.
    """
    # the score compares variants, it needs no 1e-7 convergence: a looser stop saves time
    em = dict(em, tol=max(em["tol"], 1e-5))
    total = 0.0
    for f in range(n_folds):
        test = folds == f
        keep = ~test
        train = CrowdLabels.from_codes(
            data.task[keep], data.worker[keep], data.label[keep],
            tasks=data.tasks, workers=data.workers, classes=data.classes,
        )
        fit = _em(train, z, *variant, **em)
        t, w, lab = data.task[test], data.worker[test], data.label[test]
        log_pred = logsumexp(fit.log_post[t] + fit.log_conf[w, :, lab], axis=1)
        total += float(log_pred.sum())
    return total / max(data.n_labels, 1)


# ============================================================== public entry
def model_consensus(
    labels: Any,
    pred_probs: Any,
    *,
    variant: str | tuple[str, str] = "auto",
    n_folds: int = 5,
    alpha: float | None = None,
    diag_alpha: float | None = None,
    ridge: float = 0.01,
    beta_prior: float = 1.0,
    max_iter: int = 200,
    tol: float = 1e-7,
    random_state: Any = 0,
) -> ModelConsensus:
    """Consensus labels and quality scores from crowd answers and a classifier's probabilities.

    The model (module docstring): the classifier, calibrated by a learned temperature
    ``beta`` and class offsets ``b``, is the prior of each task's true class, and the
    annotators are Dawid-Skene workers (Dawid & Skene, 1979)::

        P(y_n = j | answers, x_n) ∝ exp(beta_j log p_n(j) + b_j) prod_{(n, w, l)} C_w[j, l]

    fitted by EM on the likelihood of the answers.  It answers the questions of CROWDLAB
    (Goh, Mueller et al., 2022) with learned instead of hand-set weights.

    Parameters
    ----------
    labels : CrowdLabels or DataFrame (task, worker, label columns)
        The crowd answers.
    pred_probs : DataFrame, Series or array
        Out-of-sample class probabilities of a classifier (e.g. cross-fitted: a model never
        trained on the task it predicts).  A DataFrame is indexed by task id with one column
        per class and is aligned by both; it must cover every answered task and may hold
        tasks nobody answered (they get the calibrated model's probabilities).  A Series
        indexed by task holds one probability vector per task, in ``labels.classes`` order,
        and is aligned by task the same way.  An array
        must have shape (``labels.n_tasks``, ``labels.n_classes``) in ``labels.tasks`` and
        ``labels.classes`` order.
    variant : "auto" or (worker_model, calibration)
        ``worker_model`` in ``WORKER_MODELS`` ("one_coin": one accuracy per annotator,
        "full": a confusion matrix), ``calibration`` in ``CALIBRATIONS`` ("temperature": one
        ``beta``, "vector": one per class).  "auto" picks the pair with the best held-out
        likelihood of the answers (``n_folds`` folds over answers); no gold is used.
    n_folds : int, default 5
        Folds of the "auto" selection, which costs ``4 * n_folds + 1`` fits instead of one
        (give ``variant`` to skip it on large data).
    alpha : float, optional
        Dirichlet pseudo-count on every confusion cell (one-coin: on "right" and "wrong");
        default 0.5 for "full" and 1 for "one_coin".  Unlike
        :class:`~crowdlearn.aggregation.DawidSkene` (default 0), a full confusion matrix is
        smoothed here: a cell at probability 0 gives a held-out answer probability 0, so
        the "auto" selection could never pick the full model; 0.5 had the best held-out
        likelihood among 0, 0.1, 0.5 and 1 on simulated crowds with structured confusions
        (``benchmarks/consensus.py --synthetic``; not chosen on real data).
    diag_alpha : float, optional
        Extra pseudo-count on the diagonal (the prior belief that annotators beat chance);
        default 4 for "full" and 1 for "one_coin", the defaults of
        :class:`~crowdlearn.aggregation.DawidSkene` and
        :class:`~crowdlearn.aggregation.OneCoinDawidSkene` (tuned on simulated crowds).
    ridge : float, default 0.01
        Ridge penalty on the class offsets ``b``.
    beta_prior : float, default 1
        Precision of a normal prior on each ``beta`` centred at 1 (a priori the classifier's
        probabilities are taken as they are).  Negligible from a few hundred answered
        tasks on; on a handful it stops a classifier that agrees with a few answers from
        becoming certain (``beta`` at its bound of 20).
    max_iter : int, default 200
    tol : float, default 1e-7
        Stop when the log-likelihood per answer improves by less than ``tol``.
    random_state : int, RandomState or None, default 0
        Seeds the fold split of "auto" and the tie-breaking of consensus labels.

    Returns
    -------
    ModelConsensus
        Per-task, per-annotator and per-annotation tables and the learned weights.

    Notes
    -----
    Weights on one scale (nats of evidence for the class a source names over another class):
    an annotator's ``weight`` is ``sum_j pi_j (log C_w[j, j] - mean_{i != j} log C_w[i, j])``
    (``log((K - 1) p_w / (1 - p_w))`` for a one-coin annotator), the model's evidence
    ``mean_n (log p~_n(top) - mean_{j != top} log p~_n(j))`` with ``p~`` the calibrated
    classifier and ``top`` its argmax.
    """
    if n_folds < 2 or int(n_folds) != n_folds:
        raise ValueError(f"n_folds must be a whole number >= 2, got {n_folds!r}")
    for name, value in (("alpha", alpha), ("ridge", ridge), ("beta_prior", beta_prior), ("tol", tol)):
        if value is None and name == "alpha":
            continue
        if not (np.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    if int(max_iter) != max_iter or max_iter < 1:
        raise ValueError(f"max_iter must be a whole number >= 1, got {max_iter!r}")
    if diag_alpha is not None and not (np.isfinite(diag_alpha) and diag_alpha >= 0):
        raise ValueError(f"diag_alpha must be a finite number >= 0, got {diag_alpha!r}")
    data, probs = _align(labels, pred_probs)
    z = np.log(np.maximum(probs, _P_FLOOR))
    rng = resolve_random_state(random_state)

    def settings(worker_model):
        full = worker_model == "full"
        da = diag_alpha if diag_alpha is not None else (4.0 if full else 1.0)
        a = alpha if alpha is not None else (0.5 if full else 1.0)
        return dict(alpha=float(a), diag_alpha=float(da), ridge=float(ridge),
                    beta_prior=float(beta_prior),
                    max_iter=int(max_iter), tol=float(tol))

    selection = None
    if variant == "auto":
        candidates = list(itertools.product(WORKER_MODELS, CALIBRATIONS))
        folds = rng.permutation(data.n_labels) % n_folds
        scores = [_held_out_score(data, z, c, folds, n_folds, **settings(c[0])) for c in candidates]
        selection = pd.DataFrame(candidates, columns=["worker_model", "calibration"])
        selection["held_out_loglik"] = scores
        chosen = candidates[int(np.argmax(scores))]
    else:
        chosen = tuple(variant)
        if len(chosen) != 2 or chosen[0] not in WORKER_MODELS or chosen[1] not in CALIBRATIONS:
            raise ValueError(
                f"variant must be 'auto' or a pair (worker_model, calibration) from "
                f"{WORKER_MODELS} x {CALIBRATIONS}, got {variant!r}"
            )
    fit = _em(data, z, *chosen, **settings(chosen[0]))
    return _summarise(data, z, fit, chosen, selection, rng)


def _summarise(data, z, fit: _Fit, chosen, selection, rng) -> ModelConsensus:
    k, m = data.n_classes, data.n_workers
    post, log_conf = fit.post, fit.log_conf
    codes = argmax_random_ties(post, rng)
    n_answers = data.labels_per_task()
    t, w, lab = data.task, data.worker, data.label

    # per annotation: leave-one-out posterior of the answered class (the model and the others)
    loo = fit.log_post[t] - log_conf[w, :, lab]
    loo -= logsumexp(loo, axis=1, keepdims=True)
    ann_quality = np.exp(loo[np.arange(len(t)), lab])

    # per annotator
    n_w = np.bincount(w, minlength=m)
    safe = np.maximum(n_w, 1)
    quality = np.bincount(w, weights=ann_quality, minlength=m) / safe
    diag = np.einsum("wjj->wj", np.exp(log_conf))
    accuracy = np.bincount(w, weights=(post[t] * diag[w]).sum(axis=1), minlength=m) / safe
    prior = post.mean(axis=0)
    off = (log_conf.sum(axis=1) - np.einsum("wjj->wj", log_conf)) / max(k - 1, 1)  # mean_{i!=j} log C[i, j]
    weight = (np.einsum("wjj->wj", log_conf) - off) @ prior if k > 1 else np.zeros(m)
    agree_hits = (lab == codes[t]).astype(float)
    agreement_w = np.bincount(w, weights=agree_hits, minlength=m) / safe
    no_answers = n_w == 0
    for arr in (quality, accuracy, agreement_w):
        arr[no_answers] = np.nan

    # the model's evidence on the same scale
    lp = _log_prior(z, fit.beta, fit.bias)
    top = np.argmax(lp, axis=1)
    top_lp = lp[np.arange(len(lp)), top]
    rest = (lp.sum(axis=1) - top_lp) / max(k - 1, 1)
    model_ev_task = top_lp - rest if k > 1 else np.zeros(len(lp))
    model_evidence = float(model_ev_task.mean()) if len(lp) else 0.0
    crowd_ev = np.bincount(t, weights=weight[w], minlength=data.n_tasks)
    denom = model_ev_task + crowd_ev
    model_share = np.divide(model_ev_task, denom, out=np.ones(data.n_tasks), where=denom > 0)

    agree_t = np.bincount(t, weights=agree_hits, minlength=data.n_tasks)
    tasks = pd.DataFrame(
        {
            "consensus_label": data.classes.take(codes),
            "quality": post[np.arange(len(post)), codes],
            "model_label": data.classes.take(np.argmax(z, axis=1)),
            "n_answers": n_answers,
            "agreement": np.divide(agree_t, n_answers, out=np.full(data.n_tasks, np.nan),
                                   where=n_answers > 0),
            "model_share": model_share,
        },
        index=data.tasks,
    )
    annotators = pd.DataFrame(
        {"quality": quality, "accuracy": accuracy, "weight": weight, "n_answers": n_w,
         "agreement": agreement_w},
        index=data.workers,
    )
    annotations = pd.DataFrame(
        {
            "task": data.tasks.take(t),
            "worker": data.workers.take(w),
            "label": data.classes.take(lab),
            "quality": ann_quality,
            "consensus_label": data.classes.take(codes[t]),
        }
    )
    return ModelConsensus(
        tasks=tasks,
        probas=pd.DataFrame(post, index=data.tasks, columns=data.classes),
        annotators=annotators,
        annotations=annotations,
        model_weight=float(fit.beta.mean()),
        model_weights=pd.Series(fit.beta, index=data.classes, name="beta"),
        model_bias=pd.Series(fit.bias, index=data.classes, name="bias"),
        model_evidence=model_evidence,
        worker_model=chosen[0],
        calibration=chosen[1],
        selection=selection,
        log_likelihood=fit.ll,
        n_iter=fit.n_iter,
        converged=fit.converged,
    )
