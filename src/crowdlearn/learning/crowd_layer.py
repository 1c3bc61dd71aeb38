"""Crowd Layer (Rodrigues & Pereira, "Deep learning from crowds", AAAI 2018).

The backbone ends in a softmax ``p = f(x) ∈ Δ_K``; one extra layer maps ``p`` to a vector of
*logits* per annotator r, trained with the softmax cross-entropy against r's answer:

* ``MW``:   ``o_r = pᵀ W_r``  (K x K, initialised to the identity, unconstrained),
* ``VW``:   ``o_r = p ⊙ w_r`` (init ones),  ``VB``: ``o_r = p + b_r`` (init zeros),
* ``VW+B``: ``o_r = p ⊙ w_r + b_r``.

    L = (1/|Ω|) sum_{(n, r) ∈ Ω} -log softmax(o_r(f(x_n)))_{y_nr},

averaged over the *observed* (task, annotator) pairs Ω only (missing answers are masked, as the
reference implementation's -1 entries).  At test time the crowd layer is dropped: ``f(x)``.

Orientation: ``pᵀ W_r`` is a row vector times ``W_r``, so ``W_r`` is indexed ``[true, answered]``
like the library's confusions.  The exposed ``confusions_[r, j, l] = softmax(o_r(e_j))_l`` —
the answer distribution the layer predicts for a task whose network output is the pure class
``j`` — rows sum to 1.  (crowd-kit's layer computes ``W_r p``: the transpose.)
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.base import Tags
from .base import CrowdClassifier
from .torch_utils import torch

nn = torch.nn

__all__ = ["CrowdLayer", "CrowdLayerHead", "CoNAL", "CoNALHead"]

_MODES = ("MW", "VW", "VB", "VW+B")


class CrowdLayerHead(nn.Module):
    """Per-annotator maps ``p -> logits`` (see module docstring)."""

    def __init__(self, n_workers: int, n_classes: int, mode: str = "MW"):
        super().__init__()
        self.mode = mode
        k = n_classes
        if mode == "MW":
            self.W = nn.Parameter(torch.eye(k).repeat(n_workers, 1, 1))
        if mode in ("VW", "VW+B"):
            self.w = nn.Parameter(torch.ones(n_workers, k))
        if mode in ("VB", "VW+B"):
            self.b = nn.Parameter(torch.zeros(n_workers, k))

    def forward(self, p, workers):
        """``p`` (B, K) probabilities, ``workers`` (B, A) codes -> (B, A, K) logits."""
        if self.mode == "MW":
            return torch.einsum("bk,bakl->bal", p, self.W[workers])
        out = p[:, None, :]
        if self.mode in ("VW", "VW+B"):
            out = out * self.w[workers]
        if self.mode in ("VB", "VW+B"):
            out = out + self.b[workers]
        return out

    def log_confusions(self):
        """(W, K, K) ``[worker, true, answered]``: log softmax of the layer applied to each e_j."""
        n_workers = (self.W if self.mode == "MW" else self.w if self.mode != "VB" else self.b).shape[0]
        k = (self.W if self.mode == "MW" else self.w if self.mode != "VB" else self.b).shape[-1]
        eye = torch.eye(k, device=next(self.parameters()).device)
        workers = torch.arange(n_workers, device=eye.device).expand(k, n_workers)
        return torch.log_softmax(self.forward(eye, workers), -1).permute(1, 0, 2)


class CrowdLayer(CrowdClassifier):
    """Crowd Layer classifier (see module docstring for the model and loss).

    Parameters
    ----------
    mode : {"MW", "VW", "VB", "VW+B"}, default "MW"
    Other parameters: see :class:`~crowdlearn.learning.base.CrowdClassifier` (the reference
    LabelMe setup: Adam, batch 64, 128 hidden units, dropout 0.5).
    """

    def __init__(self, mode="MW", backbone=None, hidden=None, dropout=0.5, epochs=100, batch_size=64,
                 lr=1e-3, weight_decay=1e-4, optimizer="adam", validation_fraction=0.1, patience=10, refit=True,
                 standardize=True, device="cpu", random_state=0, callbacks=(), verbose=None):
        self.mode = mode
        super().__init__(backbone=backbone, hidden=hidden, dropout=dropout, epochs=epochs,
                         batch_size=batch_size, lr=lr, weight_decay=weight_decay, optimizer=optimizer,
                         validation_fraction=validation_fraction, patience=patience, refit=refit,
                         standardize=standardize, device=device, random_state=random_state,
                         callbacks=callbacks, verbose=verbose)

    def _build(self, n_features, n_classes, n_workers, data):
        if self.mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, got {self.mode!r}")
        return CrowdLayerHead(n_workers, n_classes, self.mode)

    def _loss(self, logits, batch, train=True):
        a = batch.answers
        out = self.head_(torch.softmax(logits, -1), a.workers)  # (B, A, K)
        return nn.functional.cross_entropy(out[a.mask], a.answers[a.mask])

    def _log_confusions(self):
        return self.head_.log_confusions()


class CoNALHead(nn.Module):
    """Common + individual confusions with an instance/annotator gate (see :class:`CoNAL`)."""

    def __init__(self, n_features: int, n_workers: int, n_classes: int, embed: int = 20):
        super().__init__()
        k = n_classes
        self.Wc = nn.Parameter(torch.eye(k))
        self.Wr = nn.Parameter(torch.eye(k).repeat(n_workers, 1, 1))
        self.v = nn.Linear(n_features, embed)  # instance embedding v(x)
        self.u = nn.Embedding(n_workers, embed)  # annotator embedding u_r
        nn.init.normal_(self.u.weight, std=0.1)

    def forward(self, p, x, workers):
        """(B, A, K) logits ``ω·(pᵀW_c) + (1 - ω)·(pᵀW_r)``, ``ω = σ(u_rᵀ v(x))``."""
        gate = torch.sigmoid(torch.einsum("be,bae->ba", self.v(x), self.u(workers)))[..., None]
        common = (p @ self.Wc)[:, None, :]
        own = torch.einsum("bk,bakl->bal", p, self.Wr[workers])
        return gate * common + (1 - gate) * own

    def log_confusions(self):
        return torch.log_softmax(self.Wr, -1)


class CoNAL(CrowdClassifier):
    """CoNAL — Chu, Ma & Wang, "Learning from Crowds by Modeling Common Confusions", AAAI 2021.

    Each annotator's answer logits mix a confusion shared by all annotators and its own, with a
    gate that depends on the instance and the annotator:

        o_r(x) = ω_r(x) · pᵀ W_c + (1 - ω_r(x)) · pᵀ W_r,   ω_r(x) = σ(u_rᵀ v(x)),   p = f(x),

    (``W_c``, ``W_r`` K x K, init identity, Crowd-Layer style logits; ``v`` a linear embedding of
    x, ``u_r`` annotator embeddings) trained by the masked cross-entropy over observed answers
    minus ``lam · sum_r ‖W_c - W_r‖_F`` (pushing individual confusions away from the common
    one so the two parts do not collapse together).

    ``gates_`` = mean gate ω̄_r per worker over its training answers; ``confusions_`` =
    row-softmax of ``ω̄_r W_c + (1 - ω̄_r) W_r`` (``[worker, true, answered]``: the answer
    distribution of a pure-class-j input at the worker's mean gate); ``common_confusion_`` = row
    softmax of ``W_c``.  The split between common and individual parts is not identified, so
    the effective confusions are checked with a looser bound (tag ``confusion_tol``).
    """

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), confusion_tol=0.3)

    def __init__(self, lam=1e-5, embed=20, backbone=None, hidden=None, dropout=0.5, epochs=100,
                 batch_size=64, lr=1e-3, weight_decay=1e-4, optimizer="adam", validation_fraction=0.1,
                 patience=10, refit=True, standardize=True, device="cpu", random_state=0, callbacks=(), verbose=None):
        self.lam = lam
        self.embed = embed
        super().__init__(backbone=backbone, hidden=hidden, dropout=dropout, epochs=epochs,
                         batch_size=batch_size, lr=lr, weight_decay=weight_decay, optimizer=optimizer,
                         validation_fraction=validation_fraction, patience=patience, refit=refit,
                         standardize=standardize, device=device, random_state=random_state,
                         callbacks=callbacks, verbose=verbose)

    def _build(self, n_features, n_classes, n_workers, data):
        if not (isinstance(self.lam, (int, float)) and self.lam >= 0):
            raise ValueError(f"lam must be a number >= 0, got {self.lam!r}")
        return CoNALHead(n_features, n_workers, n_classes, int(self.embed))

    def _loss(self, logits, batch, train=True):
        a = batch.answers
        out = self.head_(torch.softmax(logits, -1), batch.x, a.workers)
        loss = nn.functional.cross_entropy(out[a.mask], a.answers[a.mask])
        if train and self.lam > 0:
            loss = loss - self.lam * torch.linalg.norm(self.head_.Wr - self.head_.Wc, dim=(1, 2)).sum()
        return loss

    def _log_confusions(self):
        # effective confusion of worker r: its logits map with the gate at its mean value ω̄_r
        # over its training answers (``gates_``); the individual W_r alone ignores the common part
        g = self._gate[:, None, None]
        return torch.log_softmax(g * self.head_.Wc + (1 - g) * self.head_.Wr, -1)

    def _posteriors(self, idx):
        data = self._data
        with torch.no_grad():
            x = self._X[torch.as_tensor(np.asarray(data.task, dtype=np.int64), device=self.device_)]
            w = torch.as_tensor(np.asarray(data.worker, dtype=np.int64), device=self.device_)
            g = torch.sigmoid((self.head_.v(x) * self.head_.u(w)).sum(-1)).double().cpu().numpy()
        self.gates_ = np.bincount(data.worker, g, minlength=data.n_workers) / np.maximum(
            np.bincount(data.worker, minlength=data.n_workers), 1)
        self._gate = torch.as_tensor(self.gates_, dtype=torch.float32, device=self.device_)
        return super()._posteriors(idx)

    def _prepare(self, X, data, train_idx):
        self._data = data

    def _finalize(self, data):
        super()._finalize(data)
        with torch.no_grad():
            self.common_confusion_ = torch.softmax(self.head_.Wc, -1).double().cpu().numpy()
        del self._data, self._gate
