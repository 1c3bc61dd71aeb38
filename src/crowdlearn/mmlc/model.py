"""The MMLC network: a mixture of experts over item features gated by the worker id.

Han, Shi, Ding, Ma, Gu, Fang, "Mixture of Experts based Multi-task Supervised Learning from
Crowds", AAAI 2025 (arXiv:2407.13268).

Model
-----
For item features x and worker w the model predicts what *that worker* answers::

    g(w)    = act(W_2 ReLU(W_1 onehot(w)))            # gate = worker's projection vector, R^E
    h(x, w) = sum_e g_e(w) * f_e(x)                    # f_e: expert MLPs, R^d
    P(y = k | x, w) = softmax(T(h(x, w)))_k           # T: output tower, K logits

with ``act`` = softmax (projection on the simplex; LabelMe/Text settings) or ReLU (Music).
Training minimises the cross-entropy over every observed (task, worker, label) triple; the
true label is never modelled.  No confusion matrices are estimated.  The set
{g(w)} is the *worker spectral space*; :meth:`MMLC.predict_proba` evaluates the model for any
vector in that space (e.g. the oracle found by :mod:`crowdlearn.mmlc.oracle_estimators`).
The original code's dot-product attention over a length-1 sequence is the identity and is
therefore dropped.

Training goes through the learners' trainer (:class:`~crowdlearn.learning.base.CrowdClassifier`):
the training units are the answers (not the tasks), the network is built by the
``_build_net`` hook, and the held-out rule is the shared
:class:`~crowdlearn.learning.early_stopping.EarlyStopping`.

torch is imported by this module only; ``import crowdlearn`` stays torch-free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..core.base import check_fitted
from ..core.data import CrowdLabels, as_crowd_labels
from ..core.ids import positions_by_value
from ..learning.base import CrowdClassifier

__all__ = ["MMLC", "PRESETS", "AnswerBatch"]

#: the paper's settings (methods-notes 1.2); ``expert_hidden`` excludes the input layer
PRESETS: dict[str, dict[str, Any]] = {
    "labelme": dict(n_experts=16, expert_hidden=(500, 128), expert_out=32, gate="softmax",
                    tower_hidden=(32, 32), lr=1e-3, epochs=150, batch_size=32),
    "music": dict(n_experts=10, expert_hidden=(128,), expert_out=16, gate="relu",
                  tower_hidden=(16,), tower_activation="linear", lr=5e-3, epochs=15000, batch_size=2042),
    "text": dict(n_experts=10, expert_hidden=(780, 128), expert_out=32, gate="softmax",
                 tower_hidden=(32, 32), lr=1e-3, epochs=300, batch_size=2048),
}


class _Experts(nn.Module):
    """E independent MLPs evaluated in one batched matmul per layer: x (B, F) -> (E, B, d)."""

    def __init__(self, n_experts: int, sizes: list[int], dropout: float):
        super().__init__()
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            bound = 1.0 / math.sqrt(fan_in)
            # He-uniform weights (ReLU layers), PyTorch-Linear style biases
            self.weights.append(nn.Parameter(torch.empty(n_experts, fan_in, fan_out).uniform_(-1, 1) * math.sqrt(6.0 / fan_in)))
            self.biases.append(nn.Parameter(torch.empty(n_experts, 1, fan_out).uniform_(-bound, bound)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.einsum("bi,eio->ebo", x, self.weights[0]) + self.biases[0]
        h = torch.relu(h)
        for w, b in zip(list(self.weights)[1:], list(self.biases)[1:]):
            h = torch.relu(torch.einsum("ebi,eio->ebo", self.dropout(h), w) + b)
        return h


class _MMLCNet(nn.Module):
    def __init__(self, n_features, n_workers, n_classes, n_experts, expert_hidden, expert_out,
                 gate, gate_hidden, tower_hidden, tower_activation, dropout):
        super().__init__()
        self.experts = _Experts(n_experts, [n_features, *expert_hidden, expert_out], dropout)
        self.gate_embed = nn.Embedding(n_workers, gate_hidden)  # = Dense on a one-hot id
        self.gate_out = nn.Linear(gate_hidden, n_experts)
        self.gate_kind = gate
        layers: list[nn.Module] = []
        width = expert_out
        for t in tower_hidden:
            layers += [nn.Linear(width, t)]
            if tower_activation == "relu":
                layers += [nn.ReLU()]
            layers += [nn.Dropout(dropout)]
            width = t
        layers.append(nn.Linear(width, n_classes))
        self.tower = nn.Sequential(*layers)

    def gate(self, worker: torch.Tensor) -> torch.Tensor:
        z = self.gate_out(torch.relu(self.gate_embed(worker)))
        return torch.softmax(z, -1) if self.gate_kind == "softmax" else torch.relu(z)

    def logits(self, x: torch.Tensor, proj: torch.Tensor) -> torch.Tensor:
        """x (B, F), proj (B, E) or (E,) -> logits (B, K)."""
        f = self.experts(x)  # (E, B, d)
        if proj.dim() == 1:
            proj = proj.expand(x.shape[0], -1)
        return self.tower(torch.einsum("ebd,be->bd", f, proj))


@dataclass
class AnswerBatch:
    """One mini-batch of answers: answer indices, the items' features, worker and answer codes."""

    idx: np.ndarray
    x: torch.Tensor  # (B, F) features of each answer's task
    worker: torch.Tensor  # (B,) worker codes
    label: torch.Tensor  # (B,) answered class codes


class MMLC(CrowdClassifier):
    """Mixture-of-experts model of every worker's answers (MMLC; Han et al., AAAI 2025).

    A learner whose training unit is one answer (task, worker, label): the shared trainer of
    :class:`~crowdlearn.learning.base.CrowdClassifier` shuffles and batches the answers,
    minimises the cross-entropy of ``P(answer | x, g(w))`` and, with a held-out share of the
    answers, keeps the weights of the epoch with the smallest held-out cross-entropy
    (:class:`~crowdlearn.learning.early_stopping.EarlyStopping`).  It models what workers
    answer, not the truth, so it sets no ``probas_`` / ``labels_``; the truth comes from
    :class:`~crowdlearn.mmlc.oracle.MMLCOracle` or :class:`~crowdlearn.mmlc.fill.MMLCFill`.

    Parameters
    ----------
    n_experts : int, optional
        E.  Default (data-driven): ``clip(round(1.5 sqrt(W)), 4, 16)`` for W workers, which
        gives the paper's 10 for Music (44 workers) and 12 for LabelMe (59).
    expert_hidden : tuple of int, optional
        Hidden widths of each expert MLP.  Default ``(min(128, max(32, n_features)),)``.
    expert_out : int, optional
        d, the experts' output width.  Default ``max(16, 2 K)``.
    gate : {"softmax", "relu"}
        Activation producing the projection vector.
    gate_hidden : int, optional
        Width of the worker embedding; default W (the original code's choice).
    tower_hidden : tuple of int
        Hidden widths of the output tower (default ``(32,)``).
    tower_activation : {"relu", "linear"}
    epochs, batch_size : int, optional
        Default: ``batch_size = min(256, n_labels)`` answers and as many epochs as give about
        1200 Adam steps (between 20 and 2000 epochs), so small and large crowds get a similar
        optimisation budget.
    lr, weight_decay, dropout : float
        Adam learning rate, L2 penalty, dropout in experts and tower.
    validation_fraction : float
        If > 0, that share of the answers is held out and the weights with the smallest
        held-out cross-entropy (checked every epoch) are kept.
    patience : int or None
        With a held-out share, stop after that many epochs without improvement; ``None``
        (default) runs every epoch and still keeps the best weights.
    standardize : bool
        z-score the features with the training mean/sd (needed for raw features such as
        LabelMe's, whose scale reaches 10^4).
    random_state : int, RandomState, Generator or None
        Seed of the initialisation and shuffling (:func:`~crowdlearn.core.base.resolve_seed`;
        ``None`` = fresh entropy).
    device : str
    verbose : bool or None
        Progress bar of the epochs (:mod:`crowdlearn.core.progress`): True draws it, None
        (default) only on a terminal and for fits longer than a second, False never.

    Attributes
    ----------
    worker_projections_ : DataFrame, workers x E
        g(w) for every worker: the worker spectral space.
    workers_ : Index
    classes_ : Index
    n_experts_ : int
    history_ : list of dict
        Per epoch ``epoch``, ``loss`` (mean training cross-entropy), ``val_loss`` (held-out
        cross-entropy, ``nan`` without a held-out share) and ``time``.
    n_epochs_, best_epoch_ : int
        Epochs run and the epoch whose weights were kept.
    """

    _min_classes = 1  # the answers of a single-class crowd are still a (trivial) model


    def __init__(self, n_experts=None, expert_hidden=None, expert_out=None, gate="softmax", gate_hidden=None,
                 tower_hidden=(32,), tower_activation="relu", epochs=None, batch_size=None, lr=5e-3,
                 weight_decay=0.0, dropout=0.0, validation_fraction=0.0, patience=None, standardize=True,
                 random_state=0, device="cpu", verbose=None):
        self.n_experts = n_experts
        self.expert_hidden = expert_hidden
        self.expert_out = expert_out
        self.gate = gate
        self.gate_hidden = gate_hidden
        self.tower_hidden = tower_hidden
        self.tower_activation = tower_activation
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.dropout = dropout
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.standardize = standardize
        self.random_state = random_state
        self.device = device
        self.verbose = verbose

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "MMLC":
        """The paper's setting for ``"labelme"``, ``"music"`` or ``"text"`` (methods-notes 1.2).

        The Music preset (15000 full-batch epochs) is faithful but slow; override ``epochs``.
        """
        key = str(name).lower()
        if key not in PRESETS:
            raise ValueError(f"unknown MMLC preset {name!r}; choose from {', '.join(PRESETS)}")
        return cls(**{**PRESETS[key], **overrides})

    # ------------------------------------------------------------ validation
    def _check_params(self) -> None:
        if self.gate not in ("softmax", "relu"):
            raise ValueError(f"gate must be 'softmax' or 'relu', got {self.gate!r}")
        if self.tower_activation not in ("relu", "linear"):
            raise ValueError(f"tower_activation must be 'relu' or 'linear', got {self.tower_activation!r}")
        for name in ("n_experts", "epochs", "batch_size", "patience"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1):
                raise ValueError(f"{name} must be None or a positive integer, got {v!r}")
        if not (isinstance(self.lr, (int, float)) and self.lr > 0):
            raise ValueError(f"lr must be a positive number, got {self.lr!r}")
        if not (isinstance(self.weight_decay, (int, float)) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        vf = self.validation_fraction
        if not (isinstance(vf, (int, float)) and 0.0 <= vf < 1.0):
            raise ValueError(f"validation_fraction must be in [0, 1), got {vf!r}")

    def _sizes(self, data: CrowdLabels, n_features: int) -> dict[str, Any]:
        W, K = data.n_workers, data.n_classes
        E = self.n_experts if self.n_experts is not None else int(np.clip(round(1.5 * math.sqrt(W)), 4, 16))
        if int(E) < 1:
            raise ValueError(f"n_experts must be >= 1, got {E}")
        hidden = tuple(self.expert_hidden) if self.expert_hidden is not None else (min(128, max(32, n_features)),)
        d = int(self.expert_out) if self.expert_out is not None else max(16, 2 * K)
        gh = int(self.gate_hidden) if self.gate_hidden is not None else max(W, 8)
        bs = int(self.batch_size) if self.batch_size is not None else min(256, data.n_labels)
        steps_per_epoch = math.ceil(data.n_labels / bs)
        epochs = int(self.epochs) if self.epochs is not None else int(np.clip(math.ceil(1200 / steps_per_epoch), 20, 2000))
        return dict(E=int(E), hidden=hidden, d=d, gh=gh, bs=max(bs, 1), epochs=max(epochs, 1))

    # ------------------------------------------------------------------ fit
    def fit(self, X, labels: Any = None, *, task_index=None) -> "MMLC":
        """Fit on ``labels`` with features (``fit(labels)``) or on ``fit(X, labels)``.

        ``X`` is aligned with the tasks as for every learner
        (:func:`~crowdlearn.learning.data.align_features`); ``labels`` may be anything
        :func:`~crowdlearn.core.data.as_crowd_labels` accepts.
        """
        if labels is None:
            data = as_crowd_labels(X)
            if data.features is None:
                raise ValueError("MMLC needs item features: pass fit(X, labels) or labels with features")
            X = None
        else:
            data = as_crowd_labels(labels)
        return super().fit(X, data, task_index=task_index)

    def _planned_epochs(self, data: CrowdLabels) -> int | None:
        if self.validation_fraction and self.patience is not None:
            return None  # early stopping
        return self._sizes(data, self.n_features_in_)["epochs"]

    # ---------------------------------------------------- trainer hooks
    def _build_net(self, n_features: int, n_classes: int, data: CrowdLabels) -> nn.Module:
        s = self._sizes(data, n_features)
        return _MMLCNet(n_features, data.n_workers, n_classes, s["E"], s["hidden"], s["d"], self.gate, s["gh"],
                        tuple(self.tower_hidden), self.tower_activation, float(self.dropout)).to(self.device_)

    def _training_units(self, data: CrowdLabels) -> np.ndarray:
        return np.arange(data.n_labels)

    def _unit_batch(self, units: np.ndarray) -> AnswerBatch:
        t = torch.as_tensor(units, device=self.device_)
        return AnswerBatch(units, self._X[self._task[t]], self._worker[t], self._label[t])

    def _batch_loss(self, batch: AnswerBatch, train: bool = True) -> torch.Tensor:
        # cross-entropy of the observed answers; the same criterion for training and held-out
        logits = self.net_.logits(batch.x, self.net_.gate(batch.worker))
        return nn.functional.cross_entropy(logits, batch.label)

    def _fit_model(self, X: torch.Tensor, data: CrowdLabels) -> None:
        s = self._sizes(data, X.shape[1])
        dev = self.device_
        self._X = X
        # unit i is the i-th answer in (task, worker, label) order: the seeded split and
        # shuffles then do not depend on the order of the rows the answers were read from
        order = data.canonical_order()
        self._task, self._worker, self._label = (torch.as_tensor(a[order].astype(np.int64), device=dev)
                                                 for a in (data.task, data.worker, data.label))
        train_idx, val_idx = self._split(self._training_units(data), self._rng)
        self.n_epochs_, self.best_epoch_ = self._train(data, train_idx, val_idx, s["epochs"], [],
                                                       batch_size=s["bs"])
        del self._X, self._task, self._worker, self._label
        self.net_.eval()
        with torch.no_grad():
            proj = self.net_.gate(torch.arange(data.n_workers, device=dev)).cpu().numpy().astype(np.float64)
        self.n_experts_ = s["E"]
        self.tasks_ = data.tasks
        self.labels_per_worker_ = np.bincount(data.worker, minlength=data.n_workers)
        self.worker_projections_ = pd.DataFrame(
            proj, index=data.workers, columns=pd.Index([f"e{e}" for e in range(s["E"])], name="expert"))
        return None

    # -------------------------------------------------------------- predict
    def _features(self, X) -> np.ndarray:
        if isinstance(X, CrowdLabels):
            if X.features is None:
                raise ValueError("these labels carry no features")
            X = X.features
        X = np.asarray(X, dtype=np.float64)
        if X.ndim > 2:
            X = X.reshape(X.shape[0], -1)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X must have shape (n, {self.n_features_in_}), got {X.shape}")
        if not np.all(np.isfinite(X)):
            raise ValueError("features hold NaN or infinite values")
        return X

    def predict_proba(self, X, projection) -> np.ndarray:
        """P(answer | x, g) for a projection vector ``g`` (length E) or one per row (n x E).

        ``projection`` may also be a worker id seen during fit (its own projection).
        """
        check_fitted(self)
        X = self._features(X)
        if not isinstance(projection, (np.ndarray, list, tuple, pd.Series)):
            projection = self._projection_of(projection)
        g = np.array(projection, dtype=np.float64)
        if g.shape not in ((self.n_experts_,), (X.shape[0], self.n_experts_)) or not np.all(np.isfinite(g)):
            raise ValueError(f"projection must be a finite vector of length {self.n_experts_} "
                             f"(or one row per item), got shape {g.shape}")
        out = []
        with torch.no_grad():
            gt = torch.as_tensor(g, dtype=torch.float32, device=self.device_)
            for start in range(0, X.shape[0], 4096):
                gb = gt if gt.dim() == 1 else gt[start:start + 4096]
                lg = self.net_.logits(self._to_tensor(X[start:start + 4096]), gb)
                out.append(torch.log_softmax(lg.double(), -1).exp().cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, len(self.classes_)))

    def predict_workers(self, X, rows: list[np.ndarray], projections: np.ndarray) -> list[np.ndarray]:
        """Answer codes of many workers, each on its own rows of ``X``.

        ``rows[i]`` indexes the rows of ``X`` for the worker whose projection is
        ``projections[i]``; returns one array of class codes per worker (the argmax of
        :meth:`predict_proba`).  The experts, the costly part of the network, run once over
        ``X`` instead of once per worker; only the mixing and the small tower run per worker.
        """
        check_fitted(self)
        X = self._features(X)
        g = np.asarray(projections, dtype=np.float64)
        if g.ndim != 2 or g.shape != (len(rows), self.n_experts_) or not np.all(np.isfinite(g)):
            raise ValueError(f"projections must be finite, shape ({len(rows)}, {self.n_experts_}), got {g.shape}")
        with torch.no_grad():
            f = torch.cat([self.net_.experts(self._to_tensor(X[s:s + 4096])) for s in range(0, X.shape[0], 4096)], 1)
            gt = torch.as_tensor(g, dtype=torch.float32, device=f.device)
            out = []
            for r, proj in zip(rows, gt):
                r = torch.as_tensor(np.asarray(r, dtype=np.int64), device=f.device)
                mixed = torch.einsum("ebd,e->bd", f[:, r], proj)
                out.append(self.net_.tower(mixed).argmax(1).cpu().numpy())
        return out

    def predict_worker(self, X, worker) -> np.ndarray:
        """Class codes ``worker`` is predicted to answer on the rows of ``X``.

        Raises
        ------
        ValueError
            When ``worker`` was not seen during fit (it has no fitted projection).
        """
        check_fitted(self)
        return self.predict_proba(X, self._projection_of(worker)).argmax(1)

    def _projection_of(self, worker) -> np.ndarray:
        """The fitted projection of ``worker``, found by id value (worker ``"17"`` of a CSV is
        the fit's worker 17, as answers are matched elsewhere)."""
        pos = positions_by_value(self.worker_projections_.index, [worker], "the fitted workers")[0]
        if pos < 0:
            raise ValueError(f"worker {worker!r} was not seen during fit, so it has no projection; "
                             "pass predict_proba(X, projection) a projection vector instead")
        return self.worker_projections_.iloc[pos].to_numpy()
