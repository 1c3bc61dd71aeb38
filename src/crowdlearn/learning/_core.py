"""Shared estimator face and torch helpers of the end-to-end learners.

:class:`CrowdModel` does what every learner needs and nothing method-specific: input
validation (one clear ``ValueError`` per problem), alignment of features with
``labels.tasks``, feature standardisation, seeding, the default backbone, prediction and the
pandas outputs.  Subclasses implement ``_fit_model(X, data) -> posteriors (N, K)`` with
``X`` a float32 torch tensor of standardised features and ``data`` the :class:`CrowdLabels`.

Confusion matrices are stored as ``confusions_[w, j, l] = P(worker w answers l | true j)``
(rows = true class, rows sum to 1) for every method.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator
from torch import nn

from ..data import CrowdLabels

__all__ = ["CrowdModel", "make_backbone", "batch_edges", "soft_majority", "mle_confusions"]


def make_backbone(spec: Any, n_features: int, n_classes: int, hidden: int, dropout: float) -> nn.Module:
    """Backbone ``f(x) -> K logits``: ``"linear"``, ``"mlp"`` (default) or any ``nn.Module``.

    A module given by the user is deep-copied so that ``fit`` never mutates the parameter
    (sklearn's ``clone`` contract) and refits start from the same weights.
    """
    if isinstance(spec, nn.Module):
        return copy.deepcopy(spec)
    if spec in (None, "mlp"):
        return nn.Sequential(
            nn.Linear(n_features, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, n_classes)
        )
    if spec == "linear":
        return nn.Linear(n_features, n_classes)
    raise ValueError(f"backbone must be 'mlp', 'linear' or a torch.nn.Module, got {spec!r}")


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


class CrowdModel(BaseEstimator):
    """Base estimator: ``fit(X, labels)``, ``predict_proba(X)``, ``predict(X)``, ``probas_``.

    Common parameters (subclasses list them in their ``__init__``): ``backbone``
    (``"mlp"``, ``"linear"`` or an ``nn.Module``), ``hidden``, ``dropout``, ``lr``,
    ``weight_decay``, ``batch_size``, ``epochs``, ``standardize``, ``random_state``,
    ``device``.
    """

    # ------------------------------------------------------------------ input
    def _resolve(self, X, labels) -> tuple[np.ndarray, CrowdLabels]:
        if labels is None and isinstance(X, CrowdLabels):
            labels = X
            X = labels.features
            if X is None:
                raise ValueError("fit(labels) needs features attached (labels.with_features) or fit(X, labels)")
        if not isinstance(labels, CrowdLabels):
            raise ValueError(f"labels must be a CrowdLabels, got {type(labels).__name__}")
        if labels.n_labels == 0:
            raise ValueError("labels holds no answers")
        if labels.n_classes < 2:
            raise ValueError(f"need at least 2 classes to learn a classifier, got {labels.n_classes}")
        if isinstance(X, pd.DataFrame):
            missing = labels.tasks.difference(X.index)
            if len(missing):
                raise ValueError(f"X has no row for task(s) {list(missing[:5])}")
            X = X.loc[labels.tasks].to_numpy()
        X = self._check_X(X)
        if X.shape[0] != labels.n_tasks:
            raise ValueError(
                f"X must have one row per task of labels ({labels.n_tasks} rows), got {X.shape[0]}"
            )
        return X, labels

    @staticmethod
    def _check_X(X) -> np.ndarray:
        try:
            X = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError("X must be a numeric array (n_samples, n_features)") from None
        if X.ndim == 1:
            raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}")
        X = X.reshape(len(X), -1)
        if not np.all(np.isfinite(X)):
            raise ValueError("X contains NaN or infinite values")
        return X

    def _tensor(self, X: np.ndarray) -> torch.Tensor:
        if getattr(self, "standardize", True):
            X = (X - self.mean_) / self.scale_
        return torch.as_tensor(X, dtype=torch.float32, device=self._device())

    def _device(self):
        return torch.device(getattr(self, "device", "cpu") or "cpu")

    # ------------------------------------------------------------------ fit
    def fit(self, X, labels: CrowdLabels | None = None):
        """Fit on features ``X`` (rows = ``labels.tasks``) and crowd answers ``labels``."""
        X, data = self._resolve(X, labels)
        seed = 0 if self.random_state is None else int(self.random_state)
        self.mean_ = X.mean(0)
        self.scale_ = np.where(X.std(0) > 1e-12, X.std(0), 1.0)
        self.n_features_in_ = X.shape[1]
        self.classes_ = np.asarray(data.classes)
        self.workers_ = data.workers
        self.history_: list[float] = []
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self._rng = np.random.default_rng(seed)
            Xt = self._tensor(X)
            self.net_ = make_backbone(
                self.backbone, X.shape[1], data.n_classes, self.hidden, self.dropout
            ).to(self._device())
            post = self._fit_model(Xt, data)
        post = np.nan_to_num(np.asarray(post, dtype=float), nan=1.0 / data.n_classes)
        post = np.clip(post, 0.0, None)
        post /= post.sum(1, keepdims=True)
        self.probas_ = pd.DataFrame(post, index=data.tasks, columns=data.classes)
        self.labels_ = pd.Series(self.classes_[post.argmax(1)], index=data.tasks, name="label")
        return self

    def _fit_model(self, X: torch.Tensor, data: CrowdLabels) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    # ------------------------------------------------------------------ predict
    def _net_proba(self, Xt: torch.Tensor) -> torch.Tensor:
        self.net_.eval()
        with torch.no_grad():
            return torch.softmax(self.net_(Xt), -1)

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities of the data classifier f(x), shape (n_samples, K)."""
        if not hasattr(self, "net_"):
            raise ValueError(f"{type(self).__name__} is not fitted yet; call fit first")
        X = self._check_X(X)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, the model was fitted with {self.n_features_in_}")
        return self._net_proba(self._tensor(X)).cpu().numpy().astype(float)

    def predict(self, X, *args) -> np.ndarray:
        """Most probable class (the user's class labels) per row of X."""
        return self.classes_[np.argmax(self.predict_proba(X, *args), axis=1)]

    # ------------------------------------------------------------------ training helpers
    def _optimizer(self, params) -> torch.optim.Optimizer:
        return torch.optim.Adam(params, lr=self.lr, weight_decay=self.weight_decay)

    def _batches(self, n: int, drop_last: bool = False):
        """Shuffled task batches from the estimator's seeded generator."""
        order = self._rng.permutation(n)
        b = min(self.batch_size, n)
        stop = n - n % b if drop_last else n
        for s in range(0, stop, b):
            yield order[s : s + b]

    def _train_soft(self, X: torch.Tensor, target: np.ndarray, rows: np.ndarray, opt, epochs: int,
                    clip: float = 1.0) -> float:
        """M-step for the network: minimise ``-sum_j target[n, j] log f(x_n)_j`` over ``rows``."""
        t = torch.as_tensor(target, dtype=torch.float32, device=X.device)
        self.net_.train()
        last = 0.0
        for _ in range(epochs):
            for b in self._batches(len(rows)):
                idx = torch.as_tensor(rows[b], device=X.device)
                logp = torch.log_softmax(self.net_(X[idx]), -1)
                if clip < 1.0:
                    logp = torch.log(clipped_proba(logp.exp(), clip))
                loss = -(t[idx] * logp).sum(1).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                last = float(loss.detach())
        return last


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
