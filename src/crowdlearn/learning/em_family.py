"""EM-type learners: the classifier is the prior factor of a crowd model, fitted by EM / VI.

They are :class:`~crowdlearn.learning.base.CustomLoopClassifier` subclasses: input path,
backbone, seeding and prediction are the shared base's; each class supplies its E-step (and
BayesDGC its SVI loop) through ``_fit_model``.

All five share the generative model ``y_n ~ f_theta(x_n)``, ``answer_{n,w} | y_n ~
theta_w[y_n, :]`` and alternate an inference step over the true labels (the network output as
a unary factor, no gradient) with a training step of the network on the posteriors
(cross-entropy to soft targets).  Confusion matrices are reported as ``confusions_[w, j, l]
= P(worker w answers l | true class j)`` (rows sum to 1).

* :class:`Raykar` — Raykar, Yu, Zhao, Valadez, Florin, Bogoni & Moy, "Learning from crowds",
  JMLR 11 (2010).  E-step ``q_n(j) ∝ f(x_n)_j prod_w theta_w[j, l_nw]``; M-step: MAP
  confusions from soft counts (+ ``smoothing``) and the classifier (logistic regression by
  default, ``backbone="mlp"`` for the neural variant) trained on ``q``.
* :class:`AggNet` — Albarqouni, Baur, Achilles, Belagiannis, Demirci & Navab, "AggNet: deep
  learning from crowds for mitosis detection", IEEE TMI 35(5) 2016.  The same EM with a
  neural network in the loop, a few epochs per EM round, warm-started.
* :class:`DeepMF` and :class:`DeepBP` — Kim, Cho, Kim & Ok, "Robust deep learning from
  crowds with belief propagation", AISTATS 2022.  Worker confusions are integrated out under
  a prior; deepMF uses mean-field VI with Dirichlet rows ``theta_w[j, :] ~ Dir(alpha 1[l=j] +
  beta 1[l!=j])``; deepBP runs belief propagation with the one-coin prior ``q_w ~
  Beta(alpha, beta)`` (``theta_w[j, j] = q_w``, errors uniform) whose factor integral uses
  quadrature or Monte Carlo (:mod:`crowdlearn.learning.estep`).  The network factor is
  clipped to ``[(1-c)/(K-1), c]`` (clipping parameter ``c``).
* :class:`BayesDGC` — Li, Huang & Chen, "Deep generative model for crowdsourcing" (BayesDGC),
  Sci. China Inf. Sci. 2020.  ``pi ~ Dir(alpha0)``, ``theta_w[j, :] ~ Dir(beta0_j)``,
  ``p(y | x) ∝ pi_y Cat(softmax(gamma(x)))``; natural-gradient SVI on mini-batches,
  ``eta <- (1 - rho) eta + rho (eta0 + N/|B| stats)`` (the sign-correct step; deepBP's
  PyTorch baseline flips it), local ``eta*_n = E[log pi] + gamma(x_n) + sum_{w in n}
  E[log theta_w[:, l_nw]]`` over the task's own workers.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.base import Tags
from ..core.data import CrowdLabels
from ..core.stats import (
    answer_log_sum,
    dirichlet_expected_log,
    one_coin_confusions,
    soft_confusions,
    vote_fractions,
)
from .base import CustomLoopClassifier
from .estep import bp_one_coin, mean_field_dirichlet, reliability_nodes
from .numerics import batch_edges, clipped_proba, log_normalize
from .torch_utils import torch

__all__ = ["Raykar", "AggNet", "DeepMF", "DeepBP", "BayesDGC"]


class _EMLearner(CustomLoopClassifier):
    """EM skeleton: init q = soft majority vote; repeat (train net on q, E-step).

    ``history_`` has one entry per EM round (``loss``: the last M-step batch loss).
    """

    def _e_step(self, data: CrowdLabels, net_p: np.ndarray, post: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover

    def _fit_model(self, X, data):
        post = vote_fractions(data)
        self._init_workers(data, post)
        opt = self._make_optimizer(self.net_.parameters())
        self.converged_ = False
        self.n_iter_ = 0
        for it in range(self.max_iter):
            loss = self._train_soft(X, post, opt, getattr(self, "clip", 1.0))
            net_p = self._net_proba(X).cpu().numpy().astype(float)
            new = self._e_step(data, net_p, post)
            delta = float(np.abs(new - post).max())
            post = new
            self._log_epoch(loss)
            self.n_iter_ = it + 1
            if delta < self.tol:
                self.converged_ = True
                break
        return post

    def _train_soft(self, X, target: np.ndarray, opt, clip: float = 1.0) -> float:
        """M-step: ``epochs_per_iter`` epochs minimising ``-sum_j target[n, j] log f(x_n)_j``.

        With ``clip < 1`` the network output is clipped first (:func:`clipped_proba`).
        """
        t = torch.as_tensor(target, dtype=torch.float32, device=X.device)
        self.net_.train()
        last = 0.0
        for _ in range(self.epochs_per_iter):
            for b in self._batches(len(X)):
                idx = torch.as_tensor(b, device=X.device)
                logp = torch.log_softmax(self.net_(X[idx]), -1)
                if clip < 1.0:
                    logp = torch.log(clipped_proba(logp.exp(), clip))
                loss = -(t[idx] * logp).sum(1).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                last = float(loss.detach())
        return last

    def _init_workers(self, data, post):
        pass


class Raykar(_EMLearner):
    """Raykar et al. (JMLR 2010) EM: classifier prior times Dawid-Skene confusions.

    Registry name ``raykar``.

    Parameters
    ----------
    backbone : "linear" (default, logistic regression), "mlp" or an nn.Module
    max_iter : int, default 30
        EM rounds; each trains the classifier ``epochs_per_iter`` epochs (warm start).
    smoothing : float, default 0.01
        Pseudo-count added to every confusion cell (MAP with a flat Dirichlet).
    tol : float, default 1e-3
        Stop when no posterior moves by more than ``tol``.

    Attributes
    ----------
    confusions_ : ndarray (W, K, K), ``[worker, true, answered]``, rows sum to 1.
    probas_, labels_ : training-task posteriors and their arg-max.
    """

    def __init__(self, backbone="linear", hidden=128, dropout=0.5, lr=1e-2, weight_decay=1e-4,
                 batch_size=128, max_iter=30, epochs_per_iter=5, smoothing=0.01, tol=1e-3,
                 standardize=True, random_state=0, device="cpu"):
        self.backbone = backbone
        self.hidden = hidden
        self.dropout = dropout
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.epochs_per_iter = epochs_per_iter
        self.smoothing = smoothing
        self.tol = tol
        self.standardize = standardize
        self.random_state = random_state
        self.device = device

    def _init_workers(self, data, post):
        self.confusions_ = soft_confusions(data, post, self.smoothing)

    def _e_step(self, data, net_p, post):
        self.confusions_ = soft_confusions(data, post, self.smoothing)
        logits = np.log(np.clip(net_p, 1e-12, None)) + answer_log_sum(data, np.log(self.confusions_))
        new = log_normalize(logits)
        # keep the confusions consistent with the returned posterior (M-step of the next round)
        self.confusions_ = soft_confusions(data, new, self.smoothing)
        return new


class AggNet(Raykar):
    """AggNet (Albarqouni et al., IEEE TMI 2016): EM with a neural network in the loop.

    Registry name ``aggnet``.  Same EM as :class:`Raykar` (E-step ``q ∝ f(x) prod_w
    theta_w[:, l]``, confusions from soft counts, network trained on ``q``) with an MLP
    backbone by default and a few epochs per EM round.  ``confusions_`` is ``[worker, true,
    answered]``.
    """

    def __init__(self, backbone="mlp", hidden=128, dropout=0.5, lr=1e-3, weight_decay=1e-4,
                 batch_size=64, max_iter=20, epochs_per_iter=3, smoothing=0.01, tol=1e-3,
                 standardize=True, random_state=0, device="cpu"):
        super().__init__(backbone=backbone, hidden=hidden, dropout=dropout, lr=lr,
                         weight_decay=weight_decay, batch_size=batch_size, max_iter=max_iter,
                         epochs_per_iter=epochs_per_iter, smoothing=smoothing, tol=tol,
                         standardize=standardize, random_state=random_state, device=device)


class DeepMF(_EMLearner):
    """deepMF (Kim, Cho, Kim & Ok, AISTATS 2022): mean-field VI E-step, network M-step.

    Model: ``y_n ~ clip_c(f(x_n))``, ``theta_w[j, :] ~ Dir(alpha at l = j, beta elsewhere)``,
    ``answer ~ theta_w[y_n, :]``.  The E-step runs ``inner_iter`` coordinate-ascent rounds of
    :func:`~crowdlearn.learning.estep.mean_field_dirichlet`; the network is then trained with
    cross-entropy to ``q`` (``KL(q || f)`` up to a constant).  Registry name ``deepmf``.

    Attributes
    ----------
    confusions_ : (W, K, K) posterior-mean confusions ``[worker, true, answered]``.
    dirichlet_ : (W, K, K) Dirichlet concentrations of ``q(theta_w)`` rows.
    """

    def __init__(self, alpha=2.0, beta=1.0, clip=1.0, backbone="mlp", hidden=128, dropout=0.5,
                 lr=1e-3, weight_decay=0.0, batch_size=128, max_iter=20, epochs_per_iter=5,
                 inner_iter=10, tol=1e-3, standardize=True, random_state=0, device="cpu"):
        self.alpha = alpha
        self.beta = beta
        self.clip = clip
        self.backbone = backbone
        self.hidden = hidden
        self.dropout = dropout
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.epochs_per_iter = epochs_per_iter
        self.inner_iter = inner_iter
        self.tol = tol
        self.standardize = standardize
        self.random_state = random_state
        self.device = device

    def _check(self, k):
        if not (self.alpha > 0 and self.beta > 0):
            raise ValueError(f"alpha and beta must be > 0, got {self.alpha}, {self.beta}")
        if not (1.0 / k < self.clip <= 1.0):
            raise ValueError(f"clip must lie in (1/K, 1], got {self.clip}")

    def _init_workers(self, data, post):
        k = data.n_classes
        self._check(k)
        self._dir_prior = np.full((k, k), float(self.beta))
        np.fill_diagonal(self._dir_prior, float(self.alpha))
        post, self.dirichlet_ = mean_field_dirichlet(data, np.full_like(post, 1.0 / k), self._dir_prior, post, 1)
        self.confusions_ = self.dirichlet_ / self.dirichlet_.sum(-1, keepdims=True)

    def _e_step(self, data, net_p, post):
        prior = clipped_proba(net_p, self.clip)
        new, self.dirichlet_ = mean_field_dirichlet(data, prior, self._dir_prior, post, self.inner_iter)
        self.confusions_ = self.dirichlet_ / self.dirichlet_.sum(-1, keepdims=True)
        return new


class DeepBP(_EMLearner):
    """deepBP (Kim, Cho, Kim & Ok, AISTATS 2022): belief-propagation E-step, network M-step.

    Worker model: one coin ``theta_w[j, l] = q_w`` if ``l = j`` else ``(1 - q_w)/(K - 1)``
    with ``q_w ~ Beta(alpha, beta)`` integrated out (the paper's symmetric Dirichlet prior of
    its Eq. 3 for K = 2; one-coin extension for K > 2).  The network output, clipped to
    ``[(1-c)/(K-1), c]``, is a unary factor on each task; BP messages are warm-started across
    EM rounds; the network is trained by cross-entropy to the (detached) BP beliefs.
    Registry name ``deepbp``.

    Parameters
    ----------
    alpha, beta : float, default 2, 1
        Beta prior of a worker's accuracy (the paper's Dir(2, 1)).
    clip : float in (1/K, 1], default 1 (no clipping)
    factor : {"quadrature", "mc"}
        Worker-factor integral over ``q``: ``n_nodes`` Gauss-Jacobi nodes (deterministic) or
        ``n_nodes`` Beta draws shared by every worker (the paper's Monte Carlo, S = 400).
    bp_iter, bp_tol : BP rounds per E-step and tolerance (paper: 100, 0.03).

    Attributes
    ----------
    skills_ : (W,) posterior mean accuracy of each worker.
    confusions_ : (W, K, K) one-coin confusions from ``skills_``, ``[worker, true, answered]``.
    messages_ : (L,) final worker -> task log-ratios (answer order of ``labels``).

    Notes
    -----
    The one-coin factor is what makes BP's integral one-dimensional; with many classes and
    class-specific confusions (labelme, K = 8) it is a mis-specified model and :class:`DeepMF`
    (full Dirichlet rows) fits such data better.
    Its strength is the sparse, spammer-heavy binary regime of the paper.
    """

    def __crowd_tags__(self) -> Tags:
        # a one-coin model recovers only the one-coin projection of asymmetric planted
        # confusions (0.276 on the shared recovery check, uniform guess 0.855)
        return dataclasses.replace(super().__crowd_tags__(), confusion_tol=0.3)

    def __init__(self, alpha=2.0, beta=1.0, clip=1.0, factor="quadrature", n_nodes=200,
                 bp_iter=100, bp_tol=0.03, backbone="mlp", hidden=128, dropout=0.5, lr=1e-3,
                 weight_decay=0.0, batch_size=128, max_iter=20, epochs_per_iter=5, tol=1e-3,
                 standardize=True, random_state=0, device="cpu"):
        self.alpha = alpha
        self.beta = beta
        self.clip = clip
        self.factor = factor
        self.n_nodes = n_nodes
        self.bp_iter = bp_iter
        self.bp_tol = bp_tol
        self.backbone = backbone
        self.hidden = hidden
        self.dropout = dropout
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.epochs_per_iter = epochs_per_iter
        self.tol = tol
        self.standardize = standardize
        self.random_state = random_state
        self.device = device

    def _init_workers(self, data, post):
        k = data.n_classes
        if not (1.0 / k < self.clip <= 1.0):
            raise ValueError(f"clip must lie in (1/K, 1], got {self.clip}")
        self._q, self._logw = reliability_nodes(self.alpha, self.beta, int(self.n_nodes), self.factor, self._rng)
        # pure BP on the crowd alone first (uniform network factor): the starting posterior
        new, self.messages_, _ = bp_one_coin(data, np.full_like(post, 1.0 / k), self._q, self._logw,
                                             None, self.bp_iter, self.bp_tol)
        post[:] = new
        self._set_skills(data, new)

    def _set_skills(self, data, post):
        k = data.n_classes
        right = post[data.task, data.label]
        a = self.alpha + np.bincount(data.worker, right, data.n_workers)
        b = self.beta + np.bincount(data.worker, 1 - right, data.n_workers)
        self.skills_ = a / (a + b)
        self.confusions_ = one_coin_confusions(self.skills_, k)

    def _e_step(self, data, net_p, post):
        prior = clipped_proba(net_p, self.clip)
        new, self.messages_, _ = bp_one_coin(data, prior, self._q, self._logw, self.messages_,
                                             self.bp_iter, self.bp_tol)
        self._set_skills(data, new)
        return new


class BayesDGC(CustomLoopClassifier):
    """BayesDGC (Li, Huang & Chen, Sci. China Inf. Sci. 2020): natural-gradient SVI.

    Global variational factors ``q(pi) = Dir(eta_pi)``, ``q(theta_w[j, :]) = Dir(eta_w[j, :])``;
    local ``q(y_n) = softmax(E[log pi] + gamma(x_n) + sum_{w in n} E[log theta_w[:, l_nw]])``
    with ``gamma(x) = log softmax(net(x))``.  Per mini-batch B:

    ``eta <- (1 - rho_t) eta + rho_t (eta0 + N/|B| sum_{n in B} stats_n)``,
    ``rho_t = (t + tau)^-kappa`` — the sign-correct natural-gradient step (the deepBP repo's
    baseline uses ``eta - rho (...)``, which moves away from the optimum); then one Adam step on
    the network maximising ``sum_n E_q[log Cat(y_n; softmax(gamma(x_n)))]``.  Priors as in the
    paper: ``alpha0 = 1.1``, ``beta0`` 5 on the diagonal and 2 elsewhere.  Registry ``bayesdgc``.

    Attributes
    ----------
    confusions_ : (W, K, K) posterior-mean confusions ``[worker, true, answered]``.
    class_prior_ : (K,) posterior mean of ``pi``.
    """

    def __init__(self, alpha0=1.1, beta_diag=5.0, beta_off=2.0, kappa=0.7, tau=1.0, backbone="mlp",
                 hidden=100, dropout=0.0, lr=1e-3, weight_decay=0.0, batch_size=128, epochs=60,
                 standardize=True, random_state=0, device="cpu"):
        self.alpha0 = alpha0
        self.beta_diag = beta_diag
        self.beta_off = beta_off
        self.kappa = kappa
        self.tau = tau
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

    def _local(self, data, gamma, e_log_pi, e_log_theta, rows=None):
        crowd = answer_log_sum(data, e_log_theta)
        if rows is not None:
            crowd = crowd[rows]
        return log_normalize(e_log_pi[None] + gamma + crowd)

    def _fit_model(self, X, data):
        k, m, n = data.n_classes, data.n_workers, data.n_tasks
        if not (self.alpha0 > 0 and self.beta_diag > 0 and self.beta_off > 0):
            raise ValueError("alpha0, beta_diag and beta_off must be > 0")
        if not (0.5 < self.kappa <= 1.0) or self.tau < 0:
            raise ValueError(f"need 0.5 < kappa <= 1 and tau >= 0 (Robbins-Monro), got {self.kappa}, {self.tau}")
        eta0_pi = np.full(k, float(self.alpha0))
        eta0_th = np.full((k, k), float(self.beta_off))
        np.fill_diagonal(eta0_th, float(self.beta_diag))
        # start the globals at their full-data update from soft majority vote
        mv = vote_fractions(data)
        eta_pi = eta0_pi + mv.sum(0)
        eta_th = np.repeat(eta0_th[None], m, axis=0)  # (W, K, K)
        np.add.at(eta_th, (data.worker, slice(None), data.label), mv[data.task])
        opt = self._make_optimizer(self.net_.parameters())
        step = 0

        def batch_loss(b):
            nonlocal eta_pi, eta_th, step
            idx = torch.as_tensor(b, device=X.device)
            e_pi = dirichlet_expected_log(eta_pi)
            e_th = dirichlet_expected_log(eta_th)
            # gamma(x) is a potential on y; p(y | x) ∝ pi_y exp(gamma(x)_y) so the network is
            # fitted through the combined softmax: fitting softmax(gamma) alone to q counts the
            # class prior twice and collapses onto the majority class (observed).
            logp = torch.log_softmax(self.net_(X[idx]) + torch.as_tensor(e_pi, dtype=torch.float32, device=X.device), -1)
            gamma = logp.detach().cpu().numpy().astype(float) - e_pi[None]
            # local step: only the batch's own answers enter each task's sum
            edges, pos = batch_edges(data.task_ptr, b)
            crowd = np.zeros((len(b), k))
            np.add.at(crowd, pos, e_th[data.worker[edges], :, data.label[edges]])
            q = log_normalize(e_pi[None] + gamma + crowd)
            # global natural-gradient step (sign-correct), stats scaled by N/|B|
            rho = (step + self.tau + 1.0) ** (-self.kappa)
            step += 1
            scale = n / len(b)
            stat_th = np.zeros((m, k, k))
            np.add.at(stat_th, (data.worker[edges], slice(None), data.label[edges]), q[pos])
            eta_pi = (1 - rho) * eta_pi + rho * (eta0_pi + scale * q.sum(0))
            eta_th = (1 - rho) * eta_th + rho * (eta0_th[None] + scale * stat_th)
            # network step (taken by _train_epoch) on the surrogate ELBO term E_q[log p(y | x)]
            return -(torch.as_tensor(q, dtype=torch.float32, device=X.device) * logp).sum(1).mean()

        for _ in range(self.epochs):
            self.net_.train()
            self._train_epoch(self._batches(n), batch_loss, opt)
        self.n_iter_ = step
        self.converged_ = True
        self._e_log_pi = dirichlet_expected_log(eta_pi)
        self.dirichlet_ = eta_th
        self.confusions_ = eta_th / eta_th.sum(-1, keepdims=True)
        self.class_prior_ = eta_pi / eta_pi.sum()
        gamma = np.log(np.clip(self._net_proba(X).cpu().numpy().astype(float), 1e-300, None)) - self._e_log_pi
        return self._local(data, gamma, self._e_log_pi, dirichlet_expected_log(eta_th))

    def _net_proba(self, Xt):
        """``p(y | x) ∝ exp(E[log pi_y] + gamma(x)_y)`` — the model's label prior for new items."""
        self.net_.eval()
        with torch.no_grad():
            shift = torch.as_tensor(getattr(self, "_e_log_pi", 0.0), dtype=torch.float32, device=Xt.device)
            return torch.softmax(self.net_(Xt) + shift, -1)
