"""DoctorNet: model every annotator with its own head, then learn how to average them.

Guan, Gulshan, Dai & Hinton, "Who said what: modeling individual labelers improves
classification", AAAI 2018.

One shared backbone ``z(x)`` and one softmax head per annotator ("doctor") ``p_w(x) =
softmax(A_w z(x) + b_w)``.  Training has two phases:

1. backbone and heads are trained jointly on who said what: each answer ``(n, w, l)`` is a
   cross-entropy target for annotator w's head only, ``L_1 = mean_{answers} -log p_w(x_n)_l``;
2. with backbone and heads frozen, per-annotator averaging weights ``a = softmax(v)`` are
   trained on the crowd labels: ``L_2 = mean_{answers} -log sum_w a_w p_w(x_n)_l`` (the
   paper's weighted DoctorNet, WDN).

The prediction is the weighted average ``f(x) = sum_w a_w p_w(x)``.  Here ``z(x)`` is the
library backbone's K logits (:func:`~crowdlearn.learning.backbones.make_backbone`, so any
backbone works unchanged) and each head ``A_w`` is a K x K map starting at the identity, i.e.
every doctor starts as the shared classifier; with the default MLP this equals per-doctor
output layers on the hidden representation constrained to a common K-dimensional subspace.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ..core.base import Tags
from ..core.stats import soft_confusions
from .base import CustomLoopClassifier
from .numerics import batch_edges
from .torch_utils import torch

nn = torch.nn

__all__ = ["DoctorNet"]


class DoctorNetwork(nn.Module):
    """``x -> log sum_w softmax(v)_w softmax(A_w z(x) + b_w)`` (log-probabilities as logits)."""

    def __init__(self, trunk: nn.Module, n_workers: int, n_classes: int):
        super().__init__()
        self.trunk = trunk
        self.A = nn.Parameter(torch.eye(n_classes).repeat(n_workers, 1, 1))  # (W, K in, K out)
        self.b = nn.Parameter(torch.zeros(n_workers, n_classes))
        self.v = nn.Parameter(torch.zeros(n_workers))  # averaging-weight logits

    def head_log_proba(self, z, workers=None):
        """``log p_w(x)`` for every (row, worker) pair (B, W, K), or for ``workers`` (B,) only."""
        if workers is None:
            return torch.log_softmax(torch.einsum("bi,wio->bwo", z, self.A) + self.b, -1)
        return torch.log_softmax(torch.einsum("bi,bio->bo", z, self.A[workers]) + self.b[workers], -1)

    def mixture_log_proba(self, head_logp):
        """``log sum_w a_w p_w`` from the heads' log-probabilities (B, W, K)."""
        return torch.logsumexp(torch.log_softmax(self.v, 0)[None, :, None] + head_logp, 1)

    def forward(self, x):
        return self.mixture_log_proba(self.head_log_proba(self.trunk(x)))


class DoctorNet(CustomLoopClassifier):
    """DoctorNet / weighted DoctorNet (Guan et al., AAAI 2018) — see the module docstring.

    Registry name ``doctornet``.

    Parameters
    ----------
    weight_epochs : int, default 200
        Full-batch Adam steps of phase 2 (averaging weights, backbone and heads frozen).
    weight_lr : float, default 0.05
        Step size of phase 2.
    backbone, hidden, dropout, epochs, batch_size, lr, weight_decay, standardize, device,
    random_state
        As in :class:`~crowdlearn.learning.base.CrowdClassifier`; ``epochs`` is the length of
        phase 1 (backbone and heads on each annotator's own answers).

    Attributes
    ----------
    net_ : DoctorNetwork
        Backbone, heads and weights; ``predict_proba(X)`` is the weighted average of the heads.
    doctor_weights_ : Series, worker -> averaging weight ``a_w`` (sums to 1).
    probas_ : DataFrame (n_tasks, K)
        The weighted average ``f(x_n)`` on the training tasks (the answers are not used at
        prediction time).
    confusions_ : ndarray (W, K, K)
        ``[worker, true, answered]``, rows sum to 1: not part of the paper's model — counts
        of each worker's answers against the arg-max of ``probas_`` (+ 0.01 per cell), a
        diagnostic of each annotator's agreement with the averaged prediction.
    history_ : list of dict
        One entry per epoch of phase 1, then one per 10 steps of phase 2.

    Notes
    -----
    Orientation of the output: every head predicts *what that annotator would answer*
    (annotator-specific, including its biases); only the weighted average is an estimate of
    the true class, and it is as good as the weights are at down-weighting heads that
    disagree with the rest.  A doctor who labelled few items gets a poorly trained head.
    The weights fitted on the crowd labels approach each annotator's share of the answers when
    the heads are right, so a sharp expert head may get a small weight next to near-uniform
    spammer heads and still decide the arg-max: on 3 classes, one 95 %-accurate annotator and
    six uniform spammers (4 answers per task), held-out accuracy is 0.93 against 0.59 for
    majority vote then train (``tests/test_learning.py``).
    """

    def __crowd_tags__(self) -> Tags:
        # the diagnostic ``confusions_`` inherit the classifier's errors (measured 0.276 on
        # the shared recovery check at 40 epochs, uniform guess 0.855)
        return dataclasses.replace(super().__crowd_tags__(), confusion_tol=0.3)

    def __init__(self, weight_epochs=200, weight_lr=0.05, backbone=None, hidden=None, dropout=0.5,
                 epochs=100, batch_size=64, lr=1e-3, weight_decay=1e-4, standardize=True, device="cpu",
                 random_state=0):
        self.weight_epochs = weight_epochs
        self.weight_lr = weight_lr
        self.backbone = backbone
        self.hidden = hidden
        self.dropout = dropout
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.standardize = standardize
        self.device = device
        self.random_state = random_state

    def _fit_model(self, X, data):
        if isinstance(self.weight_epochs, bool) or not isinstance(self.weight_epochs, (int, np.integer)) \
                or self.weight_epochs < 0:
            raise ValueError(f"weight_epochs must be a non-negative integer, got {self.weight_epochs!r}")
        if not self.weight_lr > 0:
            raise ValueError(f"weight_lr must be > 0, got {self.weight_lr!r}")
        dev = X.device
        net = self.net_ = DoctorNetwork(self.net_, data.n_workers, data.n_classes).to(dev)
        worker = torch.as_tensor(np.asarray(data.worker, dtype=np.int64), device=dev)
        label = torch.as_tensor(np.asarray(data.label, dtype=np.int64), device=dev)
        # phase 1: backbone + heads, each answer trains its own annotator's head
        opt = self._make_optimizer([p for name, p in net.named_parameters() if name != "v"])
        labelled = np.flatnonzero(np.diff(data.task_ptr) > 0)

        def batch_loss(b):
            edges, pos = batch_edges(data.task_ptr, labelled[b])
            e = torch.as_tensor(edges, device=dev)
            z = net.trunk(X[torch.as_tensor(labelled[b], device=dev)])
            logp = net.head_log_proba(z[torch.as_tensor(pos, device=dev)], worker[e])
            return -logp.gather(1, label[e, None]).mean()

        for _ in range(self.epochs):
            net.train()
            self._train_epoch(self._batches(len(labelled)), batch_loss, opt)
        # phase 2: frozen heads, averaging weights on the crowd labels (full batch)
        net.eval()
        with torch.no_grad():
            head_logp = torch.cat([net.head_log_proba(net.trunk(X[s : s + 1024]))
                                   for s in range(0, len(X), 1024)])
        task = torch.as_tensor(np.asarray(data.task, dtype=np.int64), device=dev)
        # log p_w'(x_n)[l] of every head w' at every answer (n, w, l): (L, W), phase 2's only input
        answered = head_logp[task].gather(2, label[:, None, None].expand(-1, data.n_workers, 1))[..., 0]
        opt = torch.optim.Adam([net.v], lr=float(self.weight_lr))
        for step in range(self.weight_epochs):
            loss = -torch.logsumexp(torch.log_softmax(net.v, 0)[None] + answered, 1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 10 == 9:
                self._log_epoch(float(loss.detach()))
        with torch.no_grad():
            self.doctor_weights_ = pd.Series(torch.softmax(net.v, 0).double().cpu().numpy(),
                                             index=data.workers, name="weight")
            post = net.mixture_log_proba(head_logp).exp().double().cpu().numpy()
        self.confusions_ = soft_confusions(data, np.eye(data.n_classes)[post.argmax(1)], 0.01)
        return post
