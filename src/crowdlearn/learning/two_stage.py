"""Two-stage baseline: aggregate the crowd labels, then train the backbone on the result.

Stage 1 fits any crowdlearn aggregator (a registered short name such as ``"mv"`` or ``"ds"``,
or an aggregator instance, which is cloned) on the training labels and takes its posteriors
``q_n``.  Stage 2 minimises the cross-entropy of the classifier against them,

    L(θ) = -(1/N) sum_n sum_k t_nk log f_θ(x_n)_k,   t_n = q_n (soft) or onehot(argmax q_n) (hard),

the "MV/DS then train" reference of every end-to-end paper (e.g. Rodrigues & Pereira, AAAI 2018;
Ibrahim et al., ICLR 2023).  Aggregation errors propagate: the network never sees the answers.

``probas_`` are the aggregator's posteriors; ``confusions_`` (``[worker, true, answered]``)
those of the aggregator when it has them; ``aggregator_`` is the fitted aggregator.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import clone

from ..core.data import CrowdLabels
from .base import CrowdClassifier
from .torch_utils import torch

__all__ = ["TwoStage"]


class TwoStage(CrowdClassifier):
    """Aggregate-then-train (see module docstring).

    Parameters
    ----------
    aggregator : str or aggregator estimator, default "mv"
        Registered name (:func:`crowdlearn.registry.get_method`) or an unfitted aggregator.
    soft : bool, default False
        Train on the aggregator's posteriors instead of its hard labels.
    Other parameters: see :class:`~crowdlearn.learning.base.CrowdClassifier`.
    """

    def __init__(self, aggregator="mv", soft=False, backbone=None, hidden=None, dropout=0.5, epochs=100,
                 batch_size=64, lr=1e-3, weight_decay=1e-4, optimizer="adam", validation_fraction=0.1,
                 patience=10, refit=True, standardize=True, device="cpu", random_state=0, callbacks=(), verbose=None):
        self.aggregator = aggregator
        self.soft = soft
        super().__init__(backbone=backbone, hidden=hidden, dropout=dropout, epochs=epochs,
                         batch_size=batch_size, lr=lr, weight_decay=weight_decay, optimizer=optimizer,
                         validation_fraction=validation_fraction, patience=patience, refit=refit,
                         standardize=standardize, device=device, random_state=random_state,
                         callbacks=callbacks, verbose=verbose)

    def _make_aggregator(self):
        if isinstance(self.aggregator, str):
            from ..registry import get_method

            return get_method(self.aggregator)()
        if hasattr(self.aggregator, "fit"):
            return clone(self.aggregator)
        raise ValueError(f"aggregator must be a registered name or an aggregator, got {self.aggregator!r}")

    def _prepare(self, X, data: CrowdLabels, train_idx):
        self.aggregator_ = self._make_aggregator().fit(data)
        q = self.aggregator_.probas_.reindex(index=data.tasks, columns=data.classes).to_numpy(float)
        q = np.nan_to_num(q, nan=1.0 / data.n_classes)
        q = np.clip(q, 0, None) + 1e-12
        q /= q.sum(1, keepdims=True)
        self._q = q
        t = q if self.soft else np.eye(data.n_classes)[q.argmax(1)]
        self._target = torch.as_tensor(t, dtype=torch.float32, device=self.device_)

    def _loss(self, logits, batch, train=True):
        t = self._target[torch.as_tensor(batch.idx, device=self.device_)]
        return -(t * torch.log_softmax(logits, -1)).sum(1).mean()

    def _posteriors(self, idx):
        return self._q[idx]

    def _finalize(self, data):
        conf = getattr(self.aggregator_, "confusions_", None)
        if conf is not None:
            self.confusions_ = np.asarray(conf, dtype=float)
        del self._target
