"""Max-MIG: maximise the f-mutual-information gain between a data classifier and a crowd aggregator.

Cao, Xu, Kong & Wang, "Max-MIG: an information theoretic approach for joint learning from
crowds", ICLR 2019.  Implemented on :class:`~crowdlearn.learning.base.CustomLoopClassifier`
(shared input path, backbone, seeding and prediction; its own training loop in ``_fit_model``).

Two "experts" look at the same item: the data classifier ``h(x) ∈ Δ_K`` (the backbone) and
the crowd aggregator

    g(y_1..M)_c = softmax_c( sum_{w answered} W_w[c, y_w] + log p_c ),

with one free K x K matrix ``W_w`` per worker indexed ``[true, answered]`` (not normalised)
and the class prior ``p``.  Both are trained jointly to maximise, on a mini-batch of B items
(incomplete last batches skipped),

    MIG^f = (1/B) sum_i f'(S_ii) - 1/(B(B-1)) sum_{i != j} f*(f'(S_ij)),
    S_ij = sum_c h(x_i)_c g(y_j)_c / p_c,

for an f-divergence: KL (``log S_ii + 1`` and ``S_ij``), Pearson (``2(S_ii - 1)`` and
``S_ij^2 - 1``) or Jensen-Shannon (``log(2 S_ii/(1 + S_ii))`` and ``log((1 + S_ij)/2)``).
The maximiser is reached when h and g both output the Bayes posterior, whatever the
workers' dependence structure as long as x is independent of the crowd given y — so
correlated or "naive majority" juniors do not mislead it the way majority vote is misled.

Initialisation (paper): ``W_w = log(T_w + 0.01)`` where ``T_w[j, l]`` is the soft-majority
confusion of worker w.  Prediction: ``h(x)``; the data-crowds forecaster
``ζ(x, y)_c ∝ h(x)_c g(y)_c / p_c`` is ``predict_proba(X, labels)``.  ``confusions_`` is
the row-softmax of ``W`` (``[worker, true, answered]``, rows sum to 1) — a normalised view of
the aggregator weights, which the criterion identifies only up to per-answer shifts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.data import CrowdLabels
from ..core.stats import soft_confusions, vote_fractions
from .base import CustomLoopClassifier
from .numerics import batch_edges
from .torch_utils import torch

__all__ = ["MaxMIG", "mig_loss"]


def mig_loss(h: torch.Tensor, g: torch.Tensor, prior: torch.Tensor, divergence: str = "kl") -> torch.Tensor:
    """``-MIG^f`` of a batch: ``h``, ``g`` (B, K) probabilities, ``prior`` (K,)."""
    b = h.shape[0]
    s = (h / prior) @ g.T
    s = s.clamp_min(1e-12)
    diag = torch.diagonal(s)
    off = ~torch.eye(b, dtype=torch.bool, device=s.device)
    if divergence == "kl":
        joint, marg = torch.log(diag) + 1.0, s[off]
    elif divergence == "pearson":
        joint, marg = 2.0 * (diag - 1.0), s[off] ** 2 - 1.0
    elif divergence == "js":
        joint, marg = torch.log(2.0 * diag / (1.0 + diag)), torch.log((1.0 + s[off]) / 2.0)
    else:
        raise ValueError(f"divergence must be 'kl', 'pearson' or 'js', got {divergence!r}")
    return -(joint.mean() - marg.mean())


class MaxMIG(CustomLoopClassifier):
    """Max-MIG (Cao et al., ICLR 2019) — see the module docstring.  Registry name ``maxmig``.

    Parameters
    ----------
    divergence : {"kl", "pearson", "js"}
    prior : {"uniform", "mv"}
        Fixed class prior ``p``: uniform (paper, LabelMe) or soft-majority class frequencies.
    init_smoothing : float, default 0.01
        ``W = log(T + init_smoothing)``.
    backbone, hidden, dropout, lr, weight_decay, batch_size, epochs : network and training.

    Attributes
    ----------
    weights_ : (W, K, K) aggregator weights ``W_w[true, answered]``.
    confusions_ : (W, K, K) row-softmax of ``weights_``, ``[worker, true, answered]``.
    prior_ : (K,) class prior used.
    probas_ : forecaster ``ζ`` on the training tasks.
    """

    def __init__(self, divergence="kl", prior="uniform", init_smoothing=0.01, backbone="mlp", hidden=128,
                 dropout=0.5, lr=1e-3, weight_decay=0.0, batch_size=64, epochs=30, standardize=True,
                 random_state=0, device="cpu"):
        self.divergence = divergence
        self.prior = prior
        self.init_smoothing = init_smoothing
        self.backbone = backbone
        self.hidden = hidden
        self.dropout = dropout
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.epochs = epochs
        self.standardize = standardize
        self.random_state = random_state
        self.device = device

    def _crowd_logits(self, task_ptr, worker, label, batch, log_prior):
        edges, pos = batch_edges(task_ptr, batch)
        out = log_prior.expand(len(batch), -1).clone()
        if len(edges):
            w = torch.as_tensor(worker[edges], dtype=torch.long, device=out.device)
            lab = torch.as_tensor(label[edges], dtype=torch.long, device=out.device)
            out = out.index_add(0, torch.as_tensor(pos, device=out.device), self._W[w, :, lab])
        return out

    def _fit_model(self, X, data):
        if self.divergence not in ("kl", "pearson", "js"):
            raise ValueError(f"divergence must be 'kl', 'pearson' or 'js', got {self.divergence!r}")
        if self.prior not in ("uniform", "mv"):
            raise ValueError(f"prior must be 'uniform' or 'mv', got {self.prior!r}")
        if self.init_smoothing <= 0:
            raise ValueError(f"init_smoothing must be > 0, got {self.init_smoothing}")
        k, n = data.n_classes, data.n_tasks
        mv = vote_fractions(data)
        prior = np.full(k, 1.0 / k) if self.prior == "uniform" else np.clip(mv.mean(0), 1e-3, None)
        prior = prior / prior.sum()
        dev = X.device
        self.prior_ = prior
        t_init = soft_confusions(data, mv, 0.0)
        self._W = torch.nn.Parameter(torch.as_tensor(np.log(t_init + self.init_smoothing), dtype=torch.float32, device=dev))
        p_t = torch.as_tensor(prior, dtype=torch.float32, device=dev)
        log_p = torch.log(p_t)
        opt = torch.optim.Adam([{"params": self.net_.parameters(), "weight_decay": self.weight_decay},
                                {"params": [self._W], "weight_decay": 0.0}], lr=self.lr)
        worker, label, ptr = data.worker, data.label, data.task_ptr
        if n < 2:
            raise ValueError("Max-MIG needs at least 2 tasks (the criterion compares pairs of items)")
        self.n_iter_ = 0

        def batch_loss(b):
            h = torch.softmax(self.net_(X[torch.as_tensor(b, device=dev)]), -1)
            g = torch.softmax(self._crowd_logits(ptr, worker, label, b, log_p), -1)
            return mig_loss(h, g, p_t, self.divergence)

        for _ in range(self.epochs):
            self.net_.train()
            # incomplete batches are skipped: the off-diagonal mean assumes a fixed B
            self._train_epoch(self._batches(n, drop_last=True), batch_loss, opt)
            self.n_iter_ += 1
        self.converged_ = True
        W = self._W.detach().cpu().numpy().astype(float)
        self.weights_ = W
        z = W - W.max(-1, keepdims=True)
        self.confusions_ = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
        with torch.no_grad():
            g = torch.softmax(self._crowd_logits(ptr, worker, label, np.arange(n), log_p), -1).cpu().numpy()
        h = self._net_proba(X).cpu().numpy()
        return self._forecast(h, g)

    def _forecast(self, h, g):
        z = np.clip(h, 1e-300, None) * np.clip(g, 1e-300, None) / self.prior_
        return z / z.sum(1, keepdims=True)

    def predict_proba(self, X, labels: CrowdLabels | None = None) -> np.ndarray:
        """``h(x)``, or with ``labels`` the data-crowds forecaster ``ζ ∝ h(x) g(y) / p``.

        ``labels`` must have one task per row of X (task code i = row i) and the fitted
        classes; workers unseen in training contribute nothing to ``g``.
        """
        h = super().predict_proba(X)
        if labels is None:
            return h
        if not isinstance(labels, CrowdLabels):
            raise ValueError(f"labels must be a CrowdLabels, got {type(labels).__name__}")
        if labels.n_tasks != len(h):
            raise ValueError(f"labels has {labels.n_tasks} tasks but X has {len(h)} rows")
        if list(labels.classes) != list(self.classes_):
            raise ValueError(f"labels classes {list(labels.classes)} differ from the fitted {list(self.classes_)}")
        wmap = pd.Index(self.workers_).get_indexer(labels.workers)
        w = wmap[labels.worker]
        keep = w >= 0
        logits = np.tile(np.log(self.prior_), (labels.n_tasks, 1))
        np.add.at(logits, labels.task[keep], self.weights_[w[keep], :, labels.label[keep]])
        g = np.exp(logits - logits.max(1, keepdims=True))
        g /= g.sum(1, keepdims=True)
        return self._forecast(h, g)
