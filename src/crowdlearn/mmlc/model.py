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

torch is imported by this module only; ``import crowdlearn`` stays torch-free.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..core.base import CrowdEstimator, Tags, check_fitted, resolve_seed
from ..core.data import CrowdLabels, as_crowd_labels

__all__ = ["MMLC", "PRESETS"]

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


class MMLC(CrowdEstimator):
    """Mixture-of-experts model of every worker's answers (MMLC; Han et al., AAAI 2025).

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
        Default: ``batch_size = min(256, n_labels)`` and as many epochs as give about 1200
        Adam steps (between 20 and 2000 epochs), so small and large crowds get a similar
        optimisation budget.
    lr, weight_decay, dropout : float
        Adam learning rate, L2 penalty, dropout in experts and tower.
    validation_fraction : float
        If > 0, that share of the triples is held out and the weights with the smallest
        held-out cross-entropy (checked every epoch) are kept.
    standardize : bool
        z-score the features with the training mean/sd (needed for raw features such as
        LabelMe's, whose scale reaches 10^4).
    random_state : int, RandomState, Generator or None
        Seed of the initialisation and shuffling (:func:`~crowdlearn.core.base.resolve_seed`;
        ``None`` = fresh entropy).
    device : str

    Attributes
    ----------
    worker_projections_ : DataFrame, workers x E
        g(w) for every worker: the worker spectral space.
    workers_, classes_ : Index
    n_experts_ : int
    history_ : list of float
        Mean training cross-entropy per epoch.
    """

    def __crowd_tags__(self) -> Tags:
        # a model of the answers given features; SGD on shuffled triples
        return dataclasses.replace(super().__crowd_tags__(), kind="learning", requires_features=True,
                                   accepts_gold=False, stochastic=True)

    def __init__(self, n_experts=None, expert_hidden=None, expert_out=None, gate="softmax", gate_hidden=None,
                 tower_hidden=(32,), tower_activation="relu", epochs=None, batch_size=None, lr=5e-3,
                 weight_decay=0.0, dropout=0.0, validation_fraction=0.0, standardize=True,
                 random_state=0, device="cpu"):
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
        self.standardize = standardize
        self.random_state = random_state
        self.device = device

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
    def _resolve(self, X, labels) -> tuple[np.ndarray, CrowdLabels]:
        if labels is None:
            data = as_crowd_labels(X)
            if data.features is None:
                raise ValueError("MMLC needs item features: pass fit(X, labels) or labels with features")
            X = data.features
        else:
            data = as_crowd_labels(labels)
            if isinstance(X, pd.DataFrame):
                missing = data.tasks.difference(X.index)
                if len(missing):
                    raise ValueError(f"features lack rows for {len(missing)} task(s), e.g. {missing[0]!r}")
                X = X.loc[data.tasks].to_numpy()
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            X = X.reshape(X.shape[0], -1) if X.ndim > 2 else X
        if X.ndim != 2 or X.shape[0] != data.n_tasks:
            raise ValueError(f"features must have one row per task ({data.n_tasks}), got shape {X.shape}")
        if not np.all(np.isfinite(X)):
            raise ValueError("features hold NaN or infinite values")
        if data.n_labels == 0:
            raise ValueError("no crowd answers to learn from")
        if self.gate not in ("softmax", "relu"):
            raise ValueError(f"gate must be 'softmax' or 'relu', got {self.gate!r}")
        if self.tower_activation not in ("relu", "linear"):
            raise ValueError(f"tower_activation must be 'relu' or 'linear', got {self.tower_activation!r}")
        if not 0.0 <= float(self.validation_fraction) < 1.0:
            raise ValueError(f"validation_fraction must be in [0, 1), got {self.validation_fraction}")
        return X, data

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
    def fit(self, X, labels: Any = None) -> "MMLC":
        """Fit on ``labels`` with features (``fit(labels)``) or on ``fit(X, labels)``."""
        X, data = self._resolve(X, labels)
        self.mean_ = X.mean(0) if self.standardize else np.zeros(X.shape[1])
        sd = X.std(0) if self.standardize else np.ones(X.shape[1])
        self.scale_ = np.where(sd > 1e-12, sd, 1.0)
        self.n_features_in_ = X.shape[1]
        self.workers_ = data.workers
        self.classes_ = data.classes
        self.tasks_ = data.tasks
        self.labels_per_worker_ = np.bincount(data.worker, minlength=data.n_workers)
        s = self._sizes(data, X.shape[1])
        self.n_experts_ = s["E"]
        seed = resolve_seed(self.random_state)
        rng = np.random.default_rng(seed)
        self.history_: list[float] = []
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            dev = torch.device(self.device or "cpu")
            self.net_ = _MMLCNet(X.shape[1], data.n_workers, data.n_classes, s["E"], s["hidden"], s["d"],
                                 self.gate, s["gh"], tuple(self.tower_hidden), self.tower_activation,
                                 float(self.dropout)).to(dev)
            Xt = self._tensor(X)
            task = torch.as_tensor(data.task.astype(np.int64), device=dev)
            worker = torch.as_tensor(data.worker.astype(np.int64), device=dev)
            label = torch.as_tensor(data.label.astype(np.int64), device=dev)
            n = data.n_labels
            order = rng.permutation(n)
            n_val = int(round(float(self.validation_fraction) * n))
            val, train = order[:n_val], order[n_val:]
            opt = torch.optim.Adam(self.net_.parameters(), lr=float(self.lr), weight_decay=float(self.weight_decay))
            best, best_state = np.inf, None
            for _ in range(s["epochs"]):
                self.net_.train()
                perm = train[rng.permutation(len(train))]
                total = 0.0
                for start in range(0, len(perm), s["bs"]):
                    idx = torch.as_tensor(perm[start:start + s["bs"]], device=dev)
                    logits = self.net_.logits(Xt[task[idx]], self.net_.gate(worker[idx]))
                    loss = nn.functional.cross_entropy(logits, label[idx])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    total += float(loss.detach()) * len(idx)
                self.history_.append(total / max(len(perm), 1))
                if n_val:
                    self.net_.eval()
                    with torch.no_grad():
                        vi = torch.as_tensor(val, device=dev)
                        vl = float(nn.functional.cross_entropy(
                            self.net_.logits(Xt[task[vi]], self.net_.gate(worker[vi])), label[vi]))
                    if vl < best:
                        best, best_state = vl, copy.deepcopy(self.net_.state_dict())
            if best_state is not None:
                self.net_.load_state_dict(best_state)
            self.net_.eval()
            with torch.no_grad():
                proj = self.net_.gate(torch.arange(data.n_workers, device=dev)).cpu().numpy().astype(np.float64)
        self.worker_projections_ = pd.DataFrame(
            proj, index=data.workers, columns=pd.Index([f"e{e}" for e in range(s["E"])], name="expert"))
        return self

    # -------------------------------------------------------------- predict
    def _tensor(self, X: np.ndarray) -> torch.Tensor:
        X = (np.asarray(X, dtype=np.float64) - self.mean_) / self.scale_
        return torch.as_tensor(X, dtype=torch.float32, device=torch.device(self.device or "cpu"))

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "net_")

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
        if not isinstance(projection, (np.ndarray, list, tuple, pd.Series)) and projection in self.workers_:
            projection = self.worker_projections_.loc[projection].to_numpy()
        g = np.array(projection, dtype=np.float64)
        if g.shape not in ((self.n_experts_,), (X.shape[0], self.n_experts_)) or not np.all(np.isfinite(g)):
            raise ValueError(f"projection must be a finite vector of length {self.n_experts_} "
                             f"(or one row per item), got shape {g.shape}")
        out = []
        with torch.no_grad():
            gt = torch.as_tensor(g, dtype=torch.float32, device=torch.device(self.device or "cpu"))
            for start in range(0, X.shape[0], 4096):
                gb = gt if gt.dim() == 1 else gt[start:start + 4096]
                lg = self.net_.logits(self._tensor(X[start:start + 4096]), gb)
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
            f = torch.cat([self.net_.experts(self._tensor(X[s:s + 4096])) for s in range(0, X.shape[0], 4096)], 1)
            gt = torch.as_tensor(g, dtype=torch.float32, device=f.device)
            out = []
            for r, proj in zip(rows, gt):
                r = torch.as_tensor(np.asarray(r, dtype=np.int64), device=f.device)
                mixed = torch.einsum("ebd,e->bd", f[:, r], proj)
                out.append(self.net_.tower(mixed).argmax(1).cpu().numpy())
        return out

    def predict_worker(self, X, worker) -> np.ndarray:
        """Class codes ``worker`` is predicted to answer on the rows of ``X``."""
        return self.predict_proba(X, self.worker_projections_.loc[worker].to_numpy()).argmax(1)
