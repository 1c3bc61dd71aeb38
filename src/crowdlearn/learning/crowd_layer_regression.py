"""Crowd Layer for regression (Rodrigues & Pereira, "Deep learning from crowds", AAAI 2018).

A network ``f(x)`` predicts one number per item; a crowd layer maps it to each annotator's
answer and the pair is trained end to end with the squared error on the observed answers:

* ``"S"``:   ``o_r(x) = s_r f(x)``        (per-annotator scale, initialised to 1),
* ``"B"``:   ``o_r(x) = f(x) + b_r``      (per-annotator bias, initialised to 0),
* ``"S+B"``: ``o_r(x) = s_r f(x) + b_r``,

    L = (1/|Ω|) sum_{(n, r) ∈ Ω} (y_nr - o_r(x_n))²,

over the observed (item, annotator) pairs Ω only.  At test time the layer is dropped: the
estimate of an item is ``f(x)``, answered or not.  Training is the learners' mini-batch
trainer (:class:`~crowdlearn.learning.base.CrowdClassifier`: validation split on the crowd
criterion, early stopping, refit), with the answers standardised (their mean and spread)
so that the layer's initial values and the learning rate mean the same on any scale; the
estimates are mapped back.  Gauge: like every crowd-layer model, ``(f, s, b)`` and
``(c f + e, s / c, b - s e / c)`` fit alike; the initialisation (s = 1, b = 0 on the
standardised answers) and the shared training pick the solution near "the crowd is right on
average".
"""

from __future__ import annotations

import dataclasses
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd

from ..continuous.base import ContinuousEstimator, ContinuousFit, task_sums, worker_sums
from ..continuous.data import ContinuousAnswers
from ..core.base import check_fitted
from .base import Batch, CrowdClassifier
from .data import TaskAnswers, check_features
from .torch_utils import resolve_device, seeded, torch

nn = torch.nn

__all__ = ["CrowdLayerRegression", "RegressionCrowdHead"]

_MODES = ("S", "B", "S+B")


class RegressionCrowdHead(nn.Module):
    """Per-annotator maps ``f(x) -> s_r f(x) + b_r`` (the parts the mode has)."""

    def __init__(self, n_workers: int, mode: str = "S+B"):
        super().__init__()
        self.mode = mode
        if "S" in mode:
            self.s = nn.Parameter(torch.ones(n_workers))
        if "B" in mode:
            self.b = nn.Parameter(torch.zeros(n_workers))

    def forward(self, f, workers):
        """``f`` (B,) outputs, ``workers`` (B, A) codes -> (B, A) predicted answers."""
        out = f[:, None].expand(workers.shape)
        if "S" in self.mode:
            out = out * self.s[workers]
        if "B" in self.mode:
            out = out + self.b[workers]
        return out

    def parameters_numpy(self, n_workers: int) -> tuple[np.ndarray, np.ndarray]:
        with torch.no_grad():
            s = self.s.double().cpu().numpy() if "S" in self.mode else np.ones(n_workers)
            b = self.b.double().cpu().numpy() if "B" in self.mode else np.zeros(n_workers)
        return s, b


class _Trainer(CrowdClassifier):
    """The learners' trainer on continuous answers: a one-output network and the crowd head.

    It runs :meth:`CrowdClassifier._fit_model` (split, early stopping, refit) on a view of
    the answer table with the attributes the trainer reads (codes, ``task_ptr``, sizes);
    the answer values themselves reach the loss through ``_unit_batch``.
    """

    def __init__(self, mode="S+B", backbone=None, hidden=None, dropout=0.5, epochs=100,
                 batch_size=64, lr=1e-3, weight_decay=1e-4, optimizer="adam",
                 validation_fraction=0.1, patience=10, refit=True, standardize=True,
                 device="cpu", random_state=0, callbacks=(), verbose=None):
        super().__init__(backbone=backbone, hidden=hidden, dropout=dropout, epochs=epochs,
                         batch_size=batch_size, lr=lr, weight_decay=weight_decay,
                         optimizer=optimizer, validation_fraction=validation_fraction,
                         patience=patience, refit=refit, standardize=standardize,
                         device=device, random_state=random_state, callbacks=callbacks,
                         verbose=verbose)
        self.mode = mode

    def _build_net(self, n_features, n_classes, data):
        return self._new_backbone(n_features, 1)

    def _build(self, n_features, n_classes, n_workers, data):
        return RegressionCrowdHead(n_workers, self.mode)

    def _unit_batch(self, units):
        t = torch.as_tensor(units, device=self.device_)
        return Batch(units, self._X[t], self._values[t])

    def _loss(self, out, batch, train=True):
        a = batch.answers
        pred = self.head_(out[:, 0], a.workers)
        err = (pred - a.answers) ** 2 * a.mask
        return err.sum() / a.mask.sum().clamp(min=1)

    def _task_posterior(self, out, batch):
        return out  # the network's prediction f(x), (B, 1)

    def train_on(self, X: np.ndarray, data: ContinuousAnswers, target: np.ndarray):
        """Train on standardised ``target`` answers (one per answer of ``data``); returns the
        network's output for every task.  The setup mirrors ``CrowdClassifier.fit``."""
        self._check_params()
        view = SimpleNamespace(task=data.task, worker=data.worker,
                               label=np.zeros(data.n_answers, np.int64), task_ptr=data.task_ptr,
                               n_tasks=data.n_tasks, n_labels=data.n_answers,
                               n_workers=data.n_workers, n_classes=1)
        self._fit_seed = None
        self._fit_seed = seed = self._seed()
        self.device_ = resolve_device(self.device)
        self.mean_ = X.mean(0)
        sd = X.std(0)
        self.scale_ = np.where(sd > 1e-12, sd, 1.0)
        self.n_features_in_ = X.shape[1]
        self.history_ = []
        self._t0 = time.perf_counter()
        ptr = data.task_ptr.astype(np.int64)
        counts = np.diff(ptr)
        width = max(int(counts.max(initial=0)), 1)
        slot = np.arange(data.n_answers) - np.repeat(ptr[:-1], counts)
        values = np.zeros((data.n_tasks, width), np.float32)
        values[data.task, slot] = target
        with seeded(seed):
            self._rng = np.random.default_rng(seed)
            Xt = self._to_tensor(X)
            grid = TaskAnswers.from_labels(view, self.device_)
            self._values = TaskAnswers(grid.workers, torch.as_tensor(values, device=self.device_),
                                       grid.mask)
            self.net_ = self._build_net(X.shape[1], 1, view)
            out = self._fit_model(Xt, view)
        del self._rng, self._t0, self._fit_seed, self._values
        return np.asarray(out, dtype=np.float64)[:, 0]

    def predict_values(self, X: np.ndarray) -> np.ndarray:
        self.net_.eval()
        with torch.no_grad():
            return self.net_(self._to_tensor(X)).double().cpu().numpy()[:, 0]


class CrowdLayerRegression(ContinuousEstimator):
    """Crowd Layer regression heads S, B and S+B (Rodrigues & Pereira 2018), trained end to
    end on item features and continuous crowd answers.

    Model: ``y_nr = s_r f(x_n) + b_r + noise`` (``mode`` picks which of ``s_r``, ``b_r``
    exist), fitted by minimising the squared error over the observed answers; see the module
    docstring.  ``fit(answers)`` needs ``answers.features`` (one row per task, tasks without
    answers included: they get ``f(x)`` too); ``predict(X)`` scores new items.

    Outputs: ``estimates_`` = ``f(x)`` on the answers' scale for every task;
    ``worker_scale_``, ``worker_bias_`` = the layer's ``s_r, b_r``; ``worker_noise_`` = each
    annotator's residual standard deviation (shrunk to the median with two pseudo-answers);
    ``stderr_`` of a task with answers = :math:`(\\sum_r s_r^2 / \\sigma_r^2)^{-1/2}` over its
    annotators, of a task without answers the residual spread of a typical annotator
    (median :math:`\\sigma_r / |s_r|`).

    Parameters
    ----------
    mode : {"S", "B", "S+B"}
    Other parameters: the learners' trainer's (:class:`~crowdlearn.learning.base.CrowdClassifier`);
    ``backbone="linear"`` for a linear model of the features.
    """

    def __init__(self, mode="S+B", backbone=None, hidden=None, dropout=0.5, epochs=100,
                 batch_size=64, lr=1e-3, weight_decay=1e-4, optimizer="adam",
                 validation_fraction=0.1, patience=10, refit=True, standardize=True,
                 device="cpu", random_state=0):
        self.mode = mode
        self.backbone = backbone
        self.hidden = hidden
        self.dropout = dropout
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.optimizer = optimizer
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.refit = refit
        self.standardize = standardize
        self.device = device
        self.random_state = random_state

    def __crowd_tags__(self):
        return dataclasses.replace(super().__crowd_tags__(), requires_features=True,
                                   stochastic=True, has_worker_model=True, accepts_gold=True)

    def _fit(self, data, gold):
        if self.mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, got {self.mode!r} (CrowdLayerRegression)")
        if data.features is None:
            raise ValueError("CrowdLayerRegression needs item features: build the table with "
                             "features=... (one row per task)")
        X = check_features(np.asarray(data.features, dtype=np.float64))
        center = float(data.value.mean()) if data.n_answers else 0.0
        spread = float(data.value.std()) if data.n_answers else 1.0
        spread = spread if spread > 0 else 1.0
        trainer = _Trainer(**self.get_params(deep=False))
        out = trainer.train_on(X, data, (data.value - center) / spread)
        self.trainer_ = trainer
        self.center_, self.spread_ = center, spread
        est = center + spread * out
        s, b_std = trainer.head_.parameters_numpy(data.n_workers)
        b = center * (1.0 - s) + spread * b_std  # the layer on the answers' scale
        resid = data.value - (s[data.worker] * est[data.task] + b[data.worker])
        n_w = worker_sums(data)
        raw = worker_sums(data, resid**2) / np.maximum(n_w, 1)
        typical = float(np.median(raw)) if data.n_workers else spread**2
        sig2 = np.maximum((n_w * raw + 2.0 * typical) / (n_w + 2.0), 1e-12 * spread**2)
        prec = task_sums(data, (s**2 / sig2)[data.worker])
        lone = float(np.median(np.sqrt(sig2) / np.maximum(np.abs(s), 1e-6)))
        se = np.where(prec > 0, 1.0 / np.sqrt(np.maximum(prec, 1e-300)), lone)
        return ContinuousFit(est, se, bias=b, scale=s, noise=np.sqrt(sig2),
                             n_iter=int(getattr(trainer, "n_epochs_", 0)), converged=True,
                             history=trainer.history_, prior_for_unanswered=False)

    def predict(self, X) -> np.ndarray:
        """``f(x)`` on the answers' scale for each row of ``X`` (array or DataFrame)."""
        check_fitted(self)
        if isinstance(X, pd.DataFrame):
            X = X.to_numpy()
        X = check_features(np.asarray(X, dtype=np.float64))
        if X.shape[1] != self.trainer_.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, the model was fitted with "
                             f"{self.trainer_.n_features_in_}")
        return self.center_ + self.spread_ * self.trainer_.predict_values(X)
