"""Numerical helpers shared by the custom-loop learners.

CSR answer slices of a mini-batch, the row softmax in log space and deepBP's probability
clipping.  The crowd statistics the learners share with the aggregators (soft majority vote,
soft-count confusions, the Dawid-Skene E-step sum) are :mod:`crowdlearn.core.stats`; the estimator face, input path, seeding and backbone of
every learner are :mod:`crowdlearn.learning.base` and :mod:`crowdlearn.learning.backbones`.
"""

from __future__ import annotations

import numpy as np

from .torch_utils import torch

__all__ = ["batch_edges", "log_normalize", "clipped_proba"]


def batch_edges(task_ptr: np.ndarray, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Answers of the tasks in ``batch``: (edge indices, position of their task in the batch).

    Answers are sorted by task (CSR ``task_ptr``), so each task's answers are one slice.
    """
    starts, ends = task_ptr[batch], task_ptr[batch + 1]
    counts = (ends - starts).astype(np.int64)
    pos = np.repeat(np.arange(len(batch)), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(starts, counts) + offsets, pos


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
