"""The one estimator base of the end-to-end crowd learners.

:class:`CrowdClassifier` owns everything that is not method-specific, for *every* learner in
:mod:`crowdlearn.learning`: input validation and alignment of ``X`` with ``labels.tasks``
(arrays, a DataFrame indexed by task, or features attached to the CrowdLabels), feature
standardisation, seeding, the backbone (:func:`~crowdlearn.learning.backbones.make_backbone`),
prediction (``predict_proba`` / ``predict`` use only ``net_``) and the pandas outputs
(``probas_``, ``labels_``, ``classes_``).  ``fit`` does that and calls one training hook,
``_fit_model(X, data) -> posteriors``.  There are two ways to fill it:

* the built-in mini-batch trainer (the default ``_fit_model``): a loop over *tasks* (all answers
  of a task stay in the same batch), validation split and early stopping, callbacks.  Methods
  on it (two-stage, Crowd Layer, CoNAL, CCEM, GeoCrowdNet, TraceReg) implement a few hooks,
  listed below;
* :class:`CustomLoopClassifier`, for methods with their own EM / VI / alternating loop
  (Raykar, AggNet, deepMF, deepBP, BayesDGC, Max-MIG, COINNet): they override ``_fit_model``
  and use the helpers ``_batches``, ``_make_optimizer``, ``_net_proba`` and ``_log_epoch``.

Hooks of the mini-batch trainer:

``_build_net(n_features, n_classes, data) -> nn.Module``  (optional)
    Create the trained network ``net_`` (default: the backbone ``f(x) -> K logits``).  A model
    that is not a backbone (MMLC's worker-gated mixture of experts) returns its own network.
``_training_units(data) -> ndarray``  (optional)
    The indices the trainer splits into training / held-out sets, shuffles and batches
    (default: the codes of the labelled tasks).  A method whose unit is one answer (MMLC)
    returns answer indices instead.
``_unit_batch(units)`` and ``_batch_loss(batch, train=True) -> scalar tensor``  (optional)
    Turn a mini-batch of units into the batch object, and give its objective.  The default is
    a :class:`Batch` of tasks and ``_loss(net_(batch.x), batch, train)``.
``_build(n_features, n_classes, n_workers, data) -> nn.Module | None``
    Create the worker model (crowd layer, confusion matrices, ...); its parameters are trained
    jointly with the backbone.  Called after the backbone ``net_`` exists.
``_prepare(X, data, train_idx)``  (optional)
    Precompute targets before training (e.g. the two-stage aggregation).
``_loss(logits, batch, train=True) -> scalar tensor``  (required)
    The objective of one mini-batch; ``logits = net_(x)`` of the batch's tasks.  With
    ``train=False`` it is the *validation* criterion (regularisers left out); it must depend
    only on crowd labels — never on truth — because early stopping minimises it.
``_log_confusions() -> tensor (W, K, K) | None``  (optional)
    Log worker confusions oriented ``[worker, true, answered]``.  When given, the default
    ``_task_posterior`` is the Bayes posterior ``p(y_n | x_n, answers) ∝ f(x_n)_y
    prod_{(w,l) in answers(n)} C_w[y, l]`` and ``confusions_`` is filled from it.
``_task_posterior(logits, batch) -> (B, K) probabilities``  (optional override)
``_on_epoch_end(epoch, logs)``  (optional)

A :class:`Batch` carries ``idx`` (task codes, numpy), ``x`` (features, float32 tensor) and
``answers`` (:class:`~crowdlearn.learning.data.TaskAnswers`: padded ``workers``, ``answers``,
``mask`` tensors of shape (B, A)).

Confusion matrices are always exposed as ``confusions_[w, j, l] = P(worker w answers l | true
class j)`` (rows sum to 1), whatever the orientation of the method's paper.

Determinism: ``fit`` runs with torch's, numpy's and Python's global generators seeded from
``random_state`` (:func:`~crowdlearn.learning.torch_utils.seeded`, which gives the caller's
generator states back afterwards) and shuffles with a ``numpy.random.Generator`` of the same
seed, so the same data, parameters and seed give the same model (on CPU, for a fixed
thread count: ``n_threads_``, which is 1 for small networks whatever the load), and a fit leaves the caller's random streams untouched.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.base import ClassifierMixin

from ..core import progress
from ..core.base import CrowdEstimator, Tags, check_fitted, resolve_random_state, resolve_seed
from ..core.data import CrowdLabels
from ..core.params import check_params
from ..core.stats import argmax_random_ties
from .backbones import make_backbone
from .data import TaskAnswers, align_features, check_features, iterate_minibatches
from .early_stopping import EarlyStopping
from .torch_utils import fit_threads, resolve_device, seed_everything, seeded, torch

nn = torch.nn

__all__ = ["CrowdClassifier", "CustomLoopClassifier", "Batch", "Callback", "ProgressBar", "BASE_PARAMS"]

#: the parameters every learner accepts (subclasses repeat them in their ``__init__``)
BASE_PARAMS = ("backbone", "hidden", "dropout", "epochs", "batch_size", "lr", "weight_decay",
               "optimizer", "validation_fraction", "patience", "standardize", "device",
               "random_state", "callbacks", "verbose")


@dataclass
class Batch:
    """One mini-batch of tasks: task codes, features and their padded crowd answers."""

    idx: np.ndarray
    x: "torch.Tensor"
    answers: TaskAnswers


class Callback:
    """Callback protocol: ``on_epoch_end(est, epoch, logs) -> bool``; True stops training.

    ``logs`` holds ``epoch``, ``loss`` (mean training loss), ``val_loss`` (validation crowd
    criterion, ``nan`` without a validation split) and ``time`` (seconds since fit started).
    ``on_train_begin(est)`` and ``on_train_end(est)`` are optional.
    """

    def on_train_begin(self, est) -> None:  # pragma: no cover - protocol default
        pass

    def on_epoch_end(self, est, epoch: int, logs: dict) -> bool:  # pragma: no cover
        return False

    def on_train_end(self, est) -> None:  # pragma: no cover
        pass


class ProgressBar(Callback):
    """Plain-text progress on ``stream`` (stderr): one line per ``every`` epochs."""

    def __init__(self, every: int = 1, stream=None):
        self.every = every
        self.stream = stream

    def on_epoch_end(self, est, epoch, logs):
        if (epoch + 1) % max(1, self.every) == 0:
            out = self.stream or sys.stderr
            print(f"[{type(est).__name__}] epoch {epoch + 1}/{est.epochs} loss {logs['loss']:.4f} "
                  f"val {logs['val_loss']:.4f} ({logs['time']:.1f}s)", file=out, flush=True)
        return False


class CrowdClassifier(ClassifierMixin, CrowdEstimator):
    """Base estimator: train a classifier ``f(x)`` from features and crowd labels.

    Parameters
    ----------
    backbone : None, "mlp", "linear" or torch.nn.Module
        Network ``f(x) -> K logits``; ``None`` is the :class:`~crowdlearn.learning.backbones.MLP`
        sized by :func:`~crowdlearn.learning.backbones.default_hidden`.  A module is deep-copied.
    hidden : int or None
        Hidden width of the default MLP.
    dropout : float
        Dropout of the default MLP.
    epochs : int
        Maximum number of passes over the training tasks.
    batch_size : int
        Tasks per mini-batch.
    lr, weight_decay : float
        Optimiser step size and L2 penalty (applied to all parameters).
    optimizer : {"adam", "adamw", "sgd"}
    validation_fraction : float in [0, 1)
        Share of the labelled training tasks held out; training stops when their crowd
        criterion (``_loss(train=False)``) has not improved for ``patience`` epochs and the best
        weights are restored.  0 trains for ``epochs`` epochs.  Truth is never used.
    patience : int
    refit : bool
        After early stopping, retrain from the same initial weights on *every* labelled task
        (the held-out ones included) for the chosen number of epochs scaled by
        ``1 / (1 - validation_fraction)``.  Early stopping needs held-out tasks, but on
        small sets those tasks are data the model needs; the refit gives them back once the
        epoch count is known.  Costs about one more training run; ignored when
        ``validation_fraction=0``.  (The default True was set after looking at test accuracy
        on music and labelme; benchmarks/RESULTS.md, section 0.)
    standardize : bool
        Centre and scale features with the training statistics (stored as ``mean_``, ``scale_``).
    device : str or torch.device
        ``"cpu"`` by default; ``"cuda"`` / ``"auto"`` honoured.
    random_state : int or None
        Seed of the weights, dropout, split and shuffling (``None`` = 0).
    callbacks : sequence of :class:`Callback`
    verbose : bool or None
        Progress bar of the epochs on stderr (:mod:`crowdlearn.core.progress`): True draws it,
        None (default) only on a terminal and for fits longer than a second, False never.
        A notebook's hook: ``crowdlearn.core.progress.settings(callback=...)`` around ``fit``
        (one call per epoch), or ``callbacks``.

    Attributes
    ----------
    net_ : torch.nn.Module
        The trained backbone; ``predict_proba`` uses only it.
    head_ : torch.nn.Module or None
        The trained worker model.
    classes_ : Index
        The class labels, as the aggregators' ``classes_``.
    probas_ : DataFrame (n_tasks, K)
        Posteriors of the training tasks (method-specific; see ``_task_posterior``).
    labels_ : Series
    confusions_ : ndarray (W, K, K)
        ``[worker, true, answered]``, rows sum to 1 (methods with a confusion model).
    history_ : list of dict
        Per-epoch ``epoch``, ``loss``, ``val_loss``, ``time`` (every learner; custom loops log
        their own unit, e.g. one EM round, with ``val_loss`` nan).
    n_epochs_, best_epoch_ : int
        Mini-batch trainer only: epochs run and the epoch picked on the held-out tasks.
    n_threads_ : int
        torch threads the fit ran with: the user's choice (``torch.set_num_threads``,
        ``OMP_NUM_THREADS`` or ``CROWDLEARN_NUM_THREADS``) or, without one,
        :func:`~crowdlearn.learning.torch_utils.choose_threads` for the network's size and the
        free cores (1 for the default networks on the crowd datasets).
    refit_epochs_ : int
        Mini-batch trainer only: epochs of the refit on all labelled tasks (0 without refit);
        those epochs follow the others in ``history_``, marked ``"refit": True``.
    """

    _drop_last = False  # methods with batch-level statistics (log-det of F) set True
    _min_classes = 2  # a classifier of the truth needs two classes; a model of the answers, one

    def __crowd_tags__(self) -> Tags:
        # trains on item features; the seed drives initialisation and shuffling, so numbers
        # change with the ids' order; fit takes no gold
        return dataclasses.replace(super().__crowd_tags__(), kind="learning", requires_features=True,
                                   accepts_gold=False, stochastic=True)

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "net_")

    def __init__(self, backbone=None, hidden=None, dropout=0.5, epochs=100, batch_size=64, lr=1e-3,
                 weight_decay=1e-4, optimizer="adam", validation_fraction=0.1, patience=10, refit=True,
                 standardize=True, device="cpu", random_state=0, callbacks=(), verbose=None):
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
        self.callbacks = callbacks
        self.verbose = verbose

    # ------------------------------------------------------------------ hooks
    def _build_net(self, n_features: int, n_classes: int, data: CrowdLabels):
        """The network ``net_`` to train (default: a fresh backbone; seed torch first)."""
        return self._new_backbone(n_features, n_classes)

    def _training_units(self, data: CrowdLabels) -> np.ndarray:
        """Indices the trainer splits, shuffles and batches (default: the labelled task codes)."""
        return np.flatnonzero(np.diff(data.task_ptr) > 0)

    def _unit_batch(self, units: np.ndarray):
        """The batch object of the training units ``units`` (default: a :class:`Batch` of tasks)."""
        return self._batch(units)

    def _batch_loss(self, batch, train: bool = True):
        """The objective of one batch (default: ``_loss(net_(batch.x), batch, train)``)."""
        return self._loss(self.net_(batch.x), batch, train=train)

    def _build(self, n_features: int, n_classes: int, n_workers: int, data: CrowdLabels):
        return None

    def _prepare(self, X: "torch.Tensor", data: CrowdLabels, train_idx: np.ndarray) -> None:
        pass

    def _loss(self, logits, batch: Batch, train: bool = True):  # pragma: no cover - abstract
        raise NotImplementedError

    def _log_confusions(self):
        return None

    def _task_posterior(self, logits, batch: Batch):
        logp = torch.log_softmax(logits, -1)
        logc = self._log_confusions()
        if logc is None:
            return logp.exp()
        a = batch.answers
        terms = logc[a.workers, :, a.answers] * a.mask[..., None]  # (B, A, K)
        return torch.softmax(logp + terms.sum(1), -1)

    def _on_epoch_end(self, epoch: int, logs: dict) -> None:
        pass

    def _check_params(self) -> None:
        """One ``ValueError`` per bad parameter: the library-wide rules of
        :func:`crowdlearn.core.params.check_params` (``tol``, pseudo-counts, ...), then the
        trainer's own (epochs, batch size, learning rate, ...)."""
        check_params(self)
        params = self.get_params(deep=False)
        for name in ("epochs", "batch_size", "patience", "max_iter", "epochs_per_iter"):
            v = params.get(name, 1)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        lr, wd = params.get("lr", 1.0), params.get("weight_decay", 0.0)
        if not (isinstance(lr, (int, float)) and lr > 0):
            raise ValueError(f"lr must be a positive number, got {lr!r}")
        if not (isinstance(wd, (int, float)) and wd >= 0):
            raise ValueError(f"weight_decay must be >= 0, got {wd!r}")
        vf = params.get("validation_fraction", 0.0)
        if not (isinstance(vf, (int, float)) and 0 <= vf < 1):
            raise ValueError(f"validation_fraction must be in [0, 1), got {vf!r}")
        if params.get("optimizer", "adam") not in ("adam", "adamw", "sgd"):
            raise ValueError(f"optimizer must be 'adam', 'adamw' or 'sgd', got {params['optimizer']!r}")

    # ------------------------------------------------------------------ helpers
    def _seed(self) -> int:
        """The integer seed of torch and of the shuffling generator for one fit.

        An integer ``random_state`` is the seed itself; otherwise one seed is drawn (fresh
        entropy for ``None``) at the
        start of ``fit`` (:func:`~crowdlearn.core.base.resolve_seed`) and reused by the refit,
        so one fit uses one seed.
        """
        seed = getattr(self, "_fit_seed", None)
        return resolve_seed(self.random_state) if seed is None else seed

    def _new_backbone(self, n_features: int, n_classes: int):
        """A freshly initialised backbone (draws from torch's generator: seed it first)."""
        return make_backbone(self.backbone, n_features, n_classes, self.hidden, self.dropout).to(self.device_)

    def _make_optimizer(self, params):
        """The ``optimizer`` parameter's optimiser (Adam for methods without that parameter)."""
        kind = getattr(self, "optimizer", "adam")
        if kind == "adam":
            return torch.optim.Adam(params, lr=self.lr, weight_decay=self.weight_decay)
        if kind == "adamw":
            return torch.optim.AdamW(params, lr=self.lr, weight_decay=self.weight_decay)
        return torch.optim.SGD(params, lr=self.lr, momentum=0.9, weight_decay=self.weight_decay)

    def _to_tensor(self, X: np.ndarray):
        if getattr(self, "standardize", True):
            X = (X - self.mean_) / self.scale_
        return torch.as_tensor(X, dtype=torch.float32, device=self.device_)

    def _batch(self, idx: np.ndarray) -> Batch:
        t = torch.as_tensor(idx, device=self.device_)
        return Batch(idx, self._X[t], self._answers[t])

    def _split(self, labelled: np.ndarray, rng) -> tuple[np.ndarray, np.ndarray]:
        n_val = int(round(self.validation_fraction * len(labelled)))
        if n_val < 1 or len(labelled) - n_val < 2:
            return labelled, labelled[:0]
        perm = rng.permutation(labelled)
        return np.sort(perm[n_val:]), np.sort(perm[:n_val])

    def _modules(self):
        return [m for m in (self.net_, self.head_) if m is not None]

    def _mean_loss(self, idx: np.ndarray) -> float:
        for m in self._modules():
            m.eval()
        tot, n = 0.0, 0
        with torch.no_grad():
            for s in range(0, len(idx), 1024):
                units = idx[s : s + 1024]
                tot += float(self._batch_loss(self._unit_batch(units), train=False)) * len(units)
                n += len(units)
        return tot / max(n, 1)

    # ------------------------------------------------------------------ fit
    def fit(self, X, labels: CrowdLabels | None = None, *, task_index=None):
        """Train on features ``X`` and crowd answers ``labels``; returns ``self``.

        ``fit(labels)`` (a CrowdLabels with features attached) is also accepted; see
        :func:`~crowdlearn.learning.data.align_features` for how rows are matched to tasks.
        This is the one input path, seeding scheme and output path of every learner; the
        training itself is :meth:`_fit_model`.
        """
        if labels is None and isinstance(X, CrowdLabels):
            X, labels = None, X
        if not isinstance(labels, CrowdLabels):
            raise ValueError(f"labels must be a CrowdLabels, got {type(labels).__name__}")
        if labels.n_labels == 0:
            raise ValueError("labels holds no answers")
        if labels.n_classes < self._min_classes:
            raise ValueError(f"need at least {self._min_classes} classes to learn a classifier, "
                             f"got {labels.n_classes}")
        self._check_params()
        X = align_features(X, labels, task_index)
        data = labels
        self._fit_seed = None
        self._fit_seed = seed = self._seed()
        self.device_ = resolve_device(self.device)
        self.mean_ = X.mean(0)
        sd = X.std(0)
        self.scale_ = np.where(sd > 1e-12, sd, 1.0)
        self.n_features_in_ = X.shape[1]
        self.classes_ = data.classes
        self.workers_ = data.workers
        self.history_ = []
        self._t0 = time.perf_counter()
        with seeded(seed):
            self._rng = np.random.default_rng(seed)
            Xt = self._to_tensor(X)
            self.net_ = self._build_net(X.shape[1], data.n_classes, data)
            # torch's default (one thread per core) stalls small networks on a shared machine
            with fit_threads(self.net_, getattr(self, "batch_size", None) or 256) as self.n_threads_, \
                    progress.start(self._planned_epochs(data), type(self).__name__,
                                   getattr(self, "verbose", None), unit="epoch") as self._progress:
                post = self._fit_model(Xt, data)
        del self._rng, self._t0, self._fit_seed, self._progress
        if post is None:  # a model of the answers, not of the truth (MMLC): no task posteriors
            return self
        post = np.nan_to_num(np.asarray(post, dtype=float), nan=1.0 / data.n_classes)
        post = np.clip(post, 0.0, None)
        post /= post.sum(1, keepdims=True)
        self.probas_ = pd.DataFrame(post, index=data.tasks, columns=data.classes)
        codes = argmax_random_ties(post, resolve_random_state(seed))
        self.labels_ = pd.Series(self.classes_.take(codes), index=data.tasks, name="label")
        return self

    def _fit_model(self, X: "torch.Tensor", data: CrowdLabels) -> np.ndarray:
        """The mini-batch trainer over the hooks above; returns the task posteriors (N, K).

        ``X`` holds the standardised features of all tasks; ``net_`` exists and the seeded
        generators are set.  :class:`CustomLoopClassifier` methods replace this method, as do
        models of the answers rather than of the truth (MMLC), which return None (then
        ``probas_`` and ``labels_`` are not set).
        """
        callbacks = list(self.callbacks or ())
        self._X = X
        self._answers = TaskAnswers.from_labels(data, self.device_)
        labelled = self._training_units(data)
        train_idx, val_idx = self._split(labelled, self._rng)
        for cb in callbacks:
            getattr(cb, "on_train_begin", lambda est: None)(self)
        self.n_epochs_, self.best_epoch_ = self._train(data, train_idx, val_idx, self.epochs, callbacks)
        self.refit_epochs_ = 0
        if getattr(self, "refit", False) and len(val_idx):
            # The held-out tasks chose the epoch; now retrain from the same initial weights on
            # every labelled task, for as many passes as the chosen epoch scaled to the larger
            # set.
            self.refit_epochs_ = max(1, int(round((self.best_epoch_ + 1) * len(labelled) / len(train_idx))))
            seed_everything(self._seed())
            self._rng = np.random.default_rng(self._seed())
            self.net_ = self._build_net(X.shape[1], data.n_classes, data)
            self._train(data, labelled, labelled[:0], self.refit_epochs_, [], refit=True)
        post = self._posteriors(np.arange(data.n_tasks))
        for cb in callbacks:
            getattr(cb, "on_train_end", lambda est: None)(self)
        self._finalize(data)
        del self._X, self._answers
        return post

    def _train(self, data: CrowdLabels, train_idx: np.ndarray, val_idx: np.ndarray, epochs: int,
               callbacks: list, refit: bool = False, batch_size: int | None = None) -> tuple[int, int]:
        """Build the worker model, then run the mini-batch loop; returns (epochs run, best epoch).

        This is the one training loop of the learners: ``train_idx`` / ``val_idx`` are training
        units (``_training_units``), batched ``batch_size`` at a time (default
        ``self.batch_size``).  With ``val_idx`` non-empty, the :class:`EarlyStopping` rule
        (``patience``; ``None`` = run every epoch) keeps the weights of the epoch with the best
        validation criterion and restores them.  ``refit`` marks the logged epochs.
        """
        self.head_ = self._build(self._X.shape[1], data.n_classes, data.n_workers, data)
        if self.head_ is not None:
            self.head_ = self.head_.to(self.device_)
        self._prepare(self._X, data, train_idx)
        params = [{"params": list(self.net_.parameters())}]
        if self.head_ is not None:
            # worker models may learn faster than the backbone (``head_lr``, where offered)
            head_lr = getattr(self, "head_lr", None)
            params.append({"params": list(self.head_.parameters()),
                           **({"lr": float(head_lr)} if head_lr else {})})
        opt = self._make_optimizer(params)
        stopper = EarlyStopping(getattr(self, "patience", None))
        batch_size = self.batch_size if batch_size is None else batch_size
        epoch = -1
        for epoch in range(epochs):
            for m in self._modules():
                m.train()
            tot, n = 0.0, 0
            for idx in iterate_minibatches(train_idx, batch_size, self._rng, drop_last=self._drop_last):
                loss = self._batch_loss(self._unit_batch(idx), train=True)
                if not torch.isfinite(loss):  # a diverged batch must not poison the weights
                    continue
                opt.zero_grad()
                loss.backward()
                opt.step()
                tot += float(loss.detach()) * len(idx)
                n += len(idx)
            val = self._mean_loss(val_idx) if len(val_idx) else float("nan")
            logs = self._log_epoch(tot / max(n, 1), val)
            if refit:
                logs["refit"] = True
            self._on_epoch_end(epoch, logs)
            stop = stopper.step(epoch, val if len(val_idx) else None, self._modules())
            for cb in callbacks:
                stop = bool(cb.on_epoch_end(self, epoch, logs)) or stop
            if stop:
                break
        stopper.restore(self._modules())
        return epoch + 1, stopper.best_epoch

    def _log_epoch(self, loss: float, val_loss: float = float("nan")) -> dict:
        """Append one ``history_`` entry (``epoch``, ``loss``, ``val_loss``, ``time``) and return it.

        Every training loop logs its epochs (or EM rounds) here, so this is also where the
        fit's progress bar and callback are told (:mod:`crowdlearn.core.progress`).
        """
        logs = {"epoch": len(self.history_), "loss": float(loss), "val_loss": float(val_loss),
                "time": time.perf_counter() - self._t0}
        self.history_.append(logs)
        reporter = getattr(self, "_progress", None)
        if reporter is not None and reporter.active:
            reporter.step(logs["loss"])
        return logs

    def _planned_epochs(self, data: CrowdLabels) -> int | None:
        """Epochs the fit plans, for the progress bar (None when early stopping or a refit
        makes the count unknown in advance)."""
        epochs = getattr(self, "epochs", None)
        if not isinstance(epochs, (int, np.integer)):
            return None
        stops_early = getattr(self, "validation_fraction", 0) and getattr(self, "patience", None)
        return None if stops_early or (getattr(self, "refit", False) and getattr(self, "validation_fraction", 0)) else int(epochs)

    def _posteriors(self, idx: np.ndarray) -> np.ndarray:
        for m in self._modules():
            m.eval()
        out = []
        with torch.no_grad():
            for s in range(0, len(idx), 1024):
                b = self._batch(idx[s : s + 1024])
                out.append(self._task_posterior(self.net_(b.x), b).double().cpu().numpy())
        return np.concatenate(out)

    def _finalize(self, data: CrowdLabels) -> None:
        """Set the worker-model attributes after training (default: ``confusions_``)."""
        if self.head_ is not None:
            with torch.no_grad():
                logc = self._log_confusions()
            if logc is not None:
                c = logc.exp().double().cpu().numpy()
                self.confusions_ = c / c.sum(-1, keepdims=True)

    # ------------------------------------------------------------------ predict
    def _net_proba(self, Xt: "torch.Tensor") -> "torch.Tensor":
        """``softmax(net_(x))`` in eval mode, no gradient (a method may shift the logits)."""
        self.net_.eval()
        with torch.no_grad():
            return torch.softmax(self.net_(Xt), -1)

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities of the trained classifier ``f(x)``, shape (n_samples, K), rows sum 1."""
        check_fitted(self)
        if isinstance(X, pd.DataFrame):
            X = X.to_numpy()
        X = check_features(X)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, the model was fitted with {self.n_features_in_}")
        p = self._net_proba(self._to_tensor(X)).double().cpu().numpy()
        return p / p.sum(1, keepdims=True)

    def predict(self, X, *args, **kwargs) -> np.ndarray:
        """Most probable class (in the user's class labels) for each row of ``X``.

        Extra arguments go to ``predict_proba`` (e.g. Max-MIG's ``predict(X, labels)``).
        """
        p = self.predict_proba(X, *args, **kwargs)  # first: raises the clear "not fitted" error
        codes = argmax_random_ties(np.asarray(p), resolve_random_state(self.random_state))
        return self.classes_.take(codes).to_numpy()


class CustomLoopClassifier(CrowdClassifier):
    """Thin base of the methods that keep their own training loop (EM, VI, alternating, ...).

    Same input path, seeding, backbone, prediction and outputs as :class:`CrowdClassifier`;
    instead of the ``_build``/``_loss`` hooks a subclass implements

    ``_fit_model(X, data) -> posteriors (N, K)``
        ``X``: float32 tensor of the standardised features of ``data.tasks`` (row n = task
        code n); ``net_`` is the fresh backbone.  Return the training-task posteriors that
        become ``probas_``.  Draw every random number from ``self._rng`` (``_batches``) or
        torch's seeded generator; ``_train_epoch`` runs one optimisation pass and
        records it (``_log_epoch(loss)`` records progress of other loops).

    Such methods have no validation split, early stopping or callbacks (they train for their
    fixed budget); they use Adam unless they build their own optimiser.
    """

    def _fit_model(self, X, data):  # pragma: no cover - abstract
        raise NotImplementedError

    def _batches(self, n: int, drop_last: bool = False):
        """Shuffled batches of task codes ``0..n-1`` from the estimator's seeded generator."""
        return iterate_minibatches(np.arange(n), self.batch_size, self._rng, drop_last=drop_last)

    def _train_epoch(self, batches, batch_loss, opt, sched=None) -> float:
        """One pass: an ``opt`` step (and ``sched`` step) on ``batch_loss(b)`` for each batch ``b``.

        Records the mean batch loss in ``history_`` and returns it.  Train/eval modes are the
        caller's.
        """
        tot, nb = 0.0, 0
        for b in batches:
            loss = batch_loss(b)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
            tot += float(loss.detach())
            nb += 1
        return self._log_epoch(tot / max(nb, 1))["loss"]
