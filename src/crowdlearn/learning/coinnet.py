"""COINNet: crowd confusions plus a sparse instance-dependent outlier term.

Nguyen, Ibrahim & Fu, "Noisy label learning with instance-dependent outliers: identifiability
via crowd wisdom", NeurIPS 2024.  Implemented on
:class:`~crowdlearn.learning.base.CustomLoopClassifier` (shared input path, backbone, seeding
and prediction; its own training loop in ``_fit_model``).

Model for the distribution of worker w's answer on item n:

    P(answer = l | x_n) = [ sum_j f(x_n)_j A_w[j, l] ] + e_{n,w}[l],   e centred over l,

with ``f`` the classifier (softmax), ``A_w = softmax_rows(P_w)`` the worker confusion indexed
``[true, answered]`` (rows sum to 1; the paper writes the transpose, column-stochastic
``A_m f(x)``), and ``e_{n,w}`` a free per-answer outlier vector (stored only for observed
(item, worker) pairs, L x K, instead of the paper's N x M x K tensor).  Probabilities are
clamped to ``[1e-10, 1 - 1e-10]`` and renormalised.  Loss on a mini-batch B:

    L = mean_{answers} -log P(answer) + lambda_vol R_vol + lambda_out R_out,
    R_vol = -log det(F_B^T F_B)   (volume of the batch's classifier outputs; skipped when B < K,
                                   non-finite or below -100, as in the official trainer),
    R_out = (1/|B|) sum_{n in B} (||E_n||_F^2 + zeta)^(p/2),   p = 0.4, zeta = 1e-10,

a non-convex group-sparsity penalty so only few items carry outliers.  Items are ranked as
outliers by ``||E_n||_F^2`` (``outlier_scores_``).  Adam (lr 1e-3, weight decay 1e-4 on
the network) with a one-cycle learning-rate schedule; lambda_vol = lambda_out = 1e-2.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.stats import soft_confusions, vote_fractions
from .base import CustomLoopClassifier
from .numerics import batch_edges
from .torch_utils import torch

__all__ = ["COINNet"]


class COINNet(CustomLoopClassifier):
    """COINNet (Nguyen, Ibrahim & Fu, NeurIPS 2024) — see the module docstring.

    Registry name ``coinnet``.

    Parameters
    ----------
    lambda_vol, lambda_out : float, default 1e-2
    p : float, default 0.4
        Exponent of the l_{2,p} outlier penalty.
    init : {"mle", "identity"}
        Confusion logits start at ``log(T + 0.01)`` (soft-majority confusions) or ``10 I``
        (the paper's near-identity option).

    Attributes
    ----------
    confusions_ : (W, K, K) ``[worker, true, answered]``, rows sum to 1.
    outlier_scores_ : Series, training task -> ``||E_n||_F^2`` (0 for tasks without answers).
    outliers_ : (L, K) centred outlier vectors, one per answer (answer order of ``labels``).
    probas_ : classifier output ``f(x_n)`` on the training tasks.
    """

    def __init__(self, lambda_vol=1e-2, lambda_out=1e-2, p=0.4, init="mle", backbone="mlp", hidden=128,
                 dropout=0.5, lr=1e-3, weight_decay=1e-4, batch_size=128, epochs=60, standardize=True,
                 random_state=0, device="cpu"):
        self.lambda_vol = lambda_vol
        self.lambda_out = lambda_out
        self.p = p
        self.init = init
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

    def _fit_model(self, X, data):
        if self.init not in ("mle", "identity"):
            raise ValueError(f"init must be 'mle' or 'identity', got {self.init!r}")
        if not (0 < self.p <= 2) or self.lambda_vol < 0 or self.lambda_out < 0:
            raise ValueError("need 0 < p <= 2 and non-negative lambda_vol, lambda_out")
        k, n, dev = data.n_classes, data.n_tasks, X.device
        if self.init == "mle":
            logits0 = np.log(soft_confusions(data, vote_fractions(data), 0.0) + 0.01)
        else:
            logits0 = np.repeat((10.0 * np.eye(k))[None], data.n_workers, 0)
        P = torch.nn.Parameter(torch.as_tensor(logits0, dtype=torch.float32, device=dev))
        E = torch.nn.Parameter(torch.zeros((data.n_labels, k), device=dev))
        opt = torch.optim.Adam([{"params": self.net_.parameters(), "weight_decay": self.weight_decay},
                                {"params": [P, E], "weight_decay": 0.0}], lr=self.lr)
        steps = self.epochs * int(np.ceil(n / min(self.batch_size, n)))
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=self.lr, total_steps=max(steps, 1))
        worker = torch.as_tensor(np.array(data.worker), dtype=torch.long, device=dev)
        label = torch.as_tensor(np.array(data.label), dtype=torch.long, device=dev)
        half_p = self.p / 2.0
        self.n_iter_ = 0

        def batch_loss(b):
            edges, pos = batch_edges(data.task_ptr, b)
            e_idx = torch.as_tensor(edges, device=dev)
            pos_t = torch.as_tensor(pos, device=dev)
            f = torch.softmax(self.net_(X[torch.as_tensor(b, device=dev)]), -1)
            A = torch.softmax(P[worker[e_idx]], -1)  # (Le, K true, K answered)
            e = E[e_idx] - E[e_idx].mean(-1, keepdim=True)
            py = torch.einsum("ej,ejl->el", f[pos_t], A) + e
            py = py.clamp(1e-10, 1 - 1e-10)
            py = py / py.sum(-1, keepdim=True)
            ce = -torch.log(py.gather(1, label[e_idx, None])).mean()
            if not torch.isfinite(ce.detach()) or float(ce.detach()) > 100:  # the official trainer's guard
                ce = ce * 0.0
            loss = ce
            if self.lambda_vol > 0 and len(b) >= k:
                r_vol = -torch.logdet(f.T @ f)
                if torch.isfinite(r_vol.detach()) and float(r_vol.detach()) > -100:
                    loss = loss + self.lambda_vol * r_vol
            if self.lambda_out > 0:
                sq = torch.zeros(len(b), device=dev).index_add(0, pos_t, (e ** 2).sum(-1))
                loss = loss + self.lambda_out * ((sq + 1e-10) ** half_p).mean()
            return loss

        for _ in range(self.epochs):
            self.net_.train()
            self._train_epoch(self._batches(n), batch_loss, opt, sched)
            self.n_iter_ += 1
        self.converged_ = True
        with torch.no_grad():
            conf = torch.softmax(P, -1).cpu().numpy().astype(float)
            ec = (E - E.mean(-1, keepdim=True)).cpu().numpy().astype(float)
        self.confusions_ = conf
        self.outliers_ = ec
        self.outlier_scores_ = pd.Series(np.bincount(data.task, (ec ** 2).sum(1), n), index=data.tasks,
                                         name="outlier_score")
        # the classifier is the model's estimate of the true label: answers that disagree with
        # it on outlier items are explained by E, so combining f with the confusions (a DS
        # posterior) would re-import exactly the errors E absorbed (measured: 0.86 vs 0.96)
        return self._net_proba(X).cpu().numpy().astype(float)
