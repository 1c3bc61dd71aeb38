"""numpy helpers over crowd answers shared by the custom-loop learners.

Method-independent statistics of a :class:`~crowdlearn.core.data.CrowdLabels` (soft majority vote,
soft-count confusions, the Dawid-Skene E-step sum, CSR answer slices of a batch) and deepBP's
probability clipping.  The estimator face, input path, seeding and backbone of every learner
are in :mod:`crowdlearn.learning.base` (:class:`~crowdlearn.learning.base.CrowdClassifier`)
and :mod:`crowdlearn.learning.backbones`.

Confusion matrices are oriented ``[worker, true, answered]`` (rows sum to 1).
"""

from __future__ import annotations

import numpy as np

from ..core.data import CrowdLabels
from ._torch import torch

__all__ = ["batch_edges", "soft_majority", "mle_confusions", "crowd_log_terms", "log_normalize",
           "clipped_proba"]


def batch_edges(task_ptr: np.ndarray, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Answers of the tasks in ``batch``: (edge indices, position of their task in the batch).

    Answers are sorted by task (CSR ``task_ptr``), so each task's answers are one slice.
    """
    starts, ends = task_ptr[batch], task_ptr[batch + 1]
    counts = (ends - starts).astype(np.int64)
    pos = np.repeat(np.arange(len(batch)), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(starts, counts) + offsets, pos


def soft_majority(data: CrowdLabels) -> np.ndarray:
    """Vote fractions per task (N, K); a task without answers gets the uniform vector."""
    votes = data.vote_counts().astype(float)
    tot = votes.sum(1, keepdims=True)
    k = data.n_classes
    return np.where(tot > 0, votes / np.maximum(tot, 1), 1.0 / k)


def mle_confusions(data: CrowdLabels, post: np.ndarray, smoothing: float) -> np.ndarray:
    """Soft-count confusions ``T[w, j, l] ∝ smoothing + sum_{answers (n,w,l)} post[n, j]``.

    Orientation [worker, true, answered]; rows normalised to sum 1.
    """
    w, k = data.n_workers, data.n_classes
    counts = np.zeros((w * k, k))
    # counts[(w, l), j] += post[n, j]: a sparse transposed product over the L answers
    np.add.at(counts, data.worker.astype(np.int64) * k + data.label, post[data.task])
    t = counts.reshape(w, k, k).transpose(0, 2, 1) + smoothing
    tot = t.sum(-1, keepdims=True)
    # a (worker, true class) row with no mass at all (smoothing 0) carries no information: uniform
    return np.where(tot > 0, t / np.where(tot > 0, tot, 1.0), 1.0 / k)


def crowd_log_terms(data: CrowdLabels, log_conf: np.ndarray) -> np.ndarray:
    """``C[n, j] = sum_{answers (n, w, l)} log_conf[w, j, l]`` — the DS E-step sum."""
    c = np.zeros((data.n_tasks, data.n_classes))
    np.add.at(c, data.task, log_conf[data.worker, :, data.label])
    return c


def log_normalize(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax computed in log space (no overflow, rows sum to 1)."""
    z = logits - logits.max(1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(1, keepdims=True)


def clipped_proba(p, c: float):
    """deepBP/deepMF clipping: clamp probabilities to ``[(1 - c) / (K - 1), c]`` and renormalise.

    For K = 2 this is the paper's ``clamp(p, 1 - c, c)``; ``c = 1`` leaves ``p`` unchanged.
    It caps how confident the network factor can be so features cannot override the crowd.
    """
    k = p.shape[-1]
    lo = (1.0 - c) / max(k - 1, 1)
    if isinstance(p, torch.Tensor):
        q = p.clamp(lo, c) + 1e-9
    else:
        q = np.clip(p, lo, c) + 1e-9
    return q / q.sum(-1, keepdims=True)
