"""End-to-end crowdclustering: a softmax network on item features trained from same/different
answers (kind ``"similarity"``)."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.base import Tags, resolve_seed
from ..similarity.base import SimilarityEstimator
from .backbones import make_backbone
from .torch_utils import seeded, torch

__all__ = ["CrowdClustering"]


class CrowdClustering(SimilarityEstimator):
    r"""Crowdclustering end to end: cluster memberships as a network of item features.

    Model (the tutorial's Part III, "Similarity annotations"): a network ``f`` maps item
    features to a membership vector on the simplex, :math:`[f(x_n)]_k = \Pr(y_n = k \mid
    x_n)` (softmax), and a pair is similar with probability
    :math:`G(i, j) \sim \operatorname{Bernoulli}(f(x_i)^\top f(x_j))`.  Annotators are
    one-coin: annotator ``w`` reports the pair's status with probability :math:`r_w =
    \sigma(\theta_w)`, so an answer says "same" with probability
    :math:`r_w s_{ij} + (1 - r_w)(1 - s_{ij})`, :math:`s_{ij} = f(x_i)^\top f(x_j)`.  The
    network and the :math:`\theta_w` are trained jointly by Adam on the Bernoulli negative
    log-likelihood of the answers, in mini-batches of answers (linear in answers per epoch).
    The identifiability of ``f`` in this model, seen as a quantised symmetric NMF, is the
    subject of the crowdclustering analyses the tutorial cites; see also Gomes, Welinder,
    Krause and Perona (2011), *Crowdclustering*, NeurIPS, for the Bayesian original.

    Every item listed, answered or not, gets ``f(x)`` as its memberships (features are
    required; they stand in for the prior of the label-only methods).

    Parameters
    ----------
    n_clusters : int or None
        K; None estimates it from the answers alone
        (:func:`~crowdlearn.similarity.base.estimate_n_clusters`).
    backbone : None, "mlp", "linear" or torch.nn.Module
        The network (see :func:`~crowdlearn.learning.backbones.make_backbone`).
    hidden : int, optional
        Hidden width of the default MLP.
    dropout : float
    epochs : int
        Passes over the answers.
    batch_size : int
        Answers per mini-batch.
    lr : float
        Adam learning rate.
    weight_decay : float
    init_reliability : float
        Starting reliability of every annotator (above 1/2 so answers start as evidence).
    random_state : int, Generator or None

    Notes
    -----
    Trains on CPU with torch; ``fit`` seeds torch, numpy and Python's generators from
    ``random_state`` and restores the caller's afterwards.
    """

    def __init__(self, n_clusters=None, backbone=None, hidden=None, dropout=0.0, epochs=60,
                 batch_size=512, lr=1e-2, weight_decay=1e-4, init_reliability=0.8,
                 random_state=0):
        self.n_clusters = n_clusters
        self.backbone = backbone
        self.hidden = hidden
        self.dropout = dropout
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.init_reliability = init_reliability
        self.random_state = random_state

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), requires_features=True,
                                   stochastic=True)

    def _check(self) -> None:
        for name in ("epochs", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not float(value).is_integer() or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {value!r} (CrowdClustering)")
        for name in ("lr",):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r} (CrowdClustering)")
        if not (np.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay must be a finite number >= 0, got {self.weight_decay!r}")
        if not 0.5 < self.init_reliability < 1.0:
            raise ValueError(f"init_reliability must be in (0.5, 1), got {self.init_reliability!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")

    def _fit(self, data, n_clusters, rng):
        self._check()
        if data.features is None:
            raise ValueError("CrowdClustering needs item features: build the SimilarityAnswers "
                             "with features= (one row per item)")
        x = np.asarray(data.features, dtype=np.float64)
        if not np.all(np.isfinite(x)):
            raise ValueError("item features contain NaN or inf")
        x = (x - x.mean(axis=0)) / np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
        seed = resolve_seed(self.random_state)
        order_rng = np.random.default_rng(seed)
        with seeded(seed):
            xt = torch.as_tensor(x, dtype=torch.float32)
            net = make_backbone(self.backbone, x.shape[1], n_clusters, hidden=self.hidden,
                                dropout=self.dropout)
            logit0 = float(np.log(self.init_reliability / (1 - self.init_reliability)))
            theta = torch.nn.Parameter(torch.full((data.n_workers,), logit0))
            opt = torch.optim.Adam(list(net.parameters()) + [theta], lr=float(self.lr),
                                   weight_decay=0.0)
            a = torch.as_tensor(np.asarray(data.item_a, dtype=np.int64))
            b = torch.as_tensor(np.asarray(data.item_b, dtype=np.int64))
            w = torch.as_tensor(np.asarray(data.worker, dtype=np.int64))
            y = torch.as_tensor(np.asarray(data.same, dtype=np.float32))
            n_ans, bs = data.n_answers, int(self.batch_size)
            eps = 1e-6
            for _ in range(int(self.epochs)):
                net.train()
                perm = torch.as_tensor(order_rng.permutation(n_ans))
                for start in range(0, n_ans, bs):
                    idx = perm[start:start + bs]
                    ia, ib = a[idx], b[idx]
                    # only the items of the batch go through the network
                    items, inv = torch.unique(torch.cat([ia, ib]), return_inverse=True)
                    f = torch.softmax(net(xt[items]), dim=1)
                    fa, fb = f[inv[:len(idx)]], f[inv[len(idx):]]
                    s = (fa * fb).sum(dim=1)
                    r = torch.sigmoid(theta[w[idx]])
                    p = (r * s + (1 - r) * (1 - s)).clamp(eps, 1 - eps)
                    nll = -(y[idx] * torch.log(p) + (1 - y[idx]) * torch.log(1 - p)).mean()
                    decay = sum((q ** 2).sum() for q in net.parameters())
                    loss = nll + float(self.weight_decay) * decay
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            net.eval()
            with torch.no_grad():
                memberships = torch.softmax(net(xt), dim=1).numpy().astype(np.float64)
                reliability = torch.sigmoid(theta).numpy().astype(np.float64)
        self.net_ = net
        return memberships, reliability
