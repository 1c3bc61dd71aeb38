"""Checks of what an end-to-end learner (tag ``kind="learning"``) learns.

A learner trains a classifier ``f(x)`` from item features and crowd answers and models each
annotator by a confusion matrix ``confusions_[w, j, l] = P(w answers l | true class j)``.
Two properties are checked on seeded synthetic problems (Gaussian class clusters as features,
annotators drawn by :func:`crowdlearn.simulate.features.annotate`):

* with perfect annotators on separable clusters, ``f`` classifies held-out points almost
  perfectly;
* planted asymmetric confusions are recovered: the mean over workers of
  ``||C_hat_w - C_w||_F`` is at most the tag ``confusion_tol`` (after the best common class
  permutation when the tag ``identifiable`` is False).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.base import clone

from ..core.base import get_tags
from .checks import describe
from .data import perfect_crowd, planted_crowd

__all__ = ["TRAIN_PARAMS", "check_perfect_annotators", "check_recovers_confusions",
           "confusion_error", "trained"]

#: training budget of the learning checks (applied only to the parameters a learner has):
#: enough for a small network to fit a few hundred separable points
TRAIN_PARAMS: dict[str, Any] = {"epochs": 40, "patience": 40, "max_iter": 8, "random_state": 0}


def trained(est: Any, **overrides: Any):
    """A clone of ``est`` with :data:`TRAIN_PARAMS` (and ``overrides``) where it has them."""
    est = clone(est)
    params = est.get_params(deep=False)
    est.set_params(**{k: v for k, v in {**TRAIN_PARAMS, **overrides}.items() if k in params})
    return est


def confusion_error(est_conf, true_conf, permute: bool = False) -> float:
    """Mean over workers of ``||C_hat_w - C_w||_F``.

    With ``permute`` the estimated classes are first relabelled by the assignment (Hungarian
    algorithm) that best matches the confusions summed over workers, for models whose classes
    are identified only up to a permutation.
    """
    est_conf = np.asarray(est_conf, float)
    true_conf = np.asarray(true_conf, float)
    if permute:
        score = np.einsum("wjl,wil->ji", true_conf, est_conf)  # true class j vs estimated i
        _, col = linear_sum_assignment(-score)
        est_conf = est_conf[:, col][:, :, col]
    return float(np.mean(np.linalg.norm(est_conf - true_conf, axis=(1, 2))))


def check_perfect_annotators(est: Any, min_accuracy: float = 0.95, **overrides: Any) -> None:
    """Perfect annotators on separable features give a near-perfect ``f`` on held-out points."""
    who = describe(est)
    labels, X, y = perfect_crowd()
    n = labels.n_tasks
    m = trained(est, **overrides).fit(X[:n], labels)
    acc = float(np.mean(m.predict(X[n:]) == labels.classes[y[n:]]))
    assert acc >= min_accuracy, f"{who}: accuracy {acc:.3f} < {min_accuracy} with perfect annotators"


def check_recovers_confusions(est: Any, tol: float | None = None, **overrides: Any) -> None:
    """Planted confusions are recovered within the tag ``confusion_tol`` (skipped when the
    fitted model has no ``confusions_``)."""
    who, tags = describe(est), get_tags(est)
    labels, X, _, conf = planted_crowd(seed=2)
    m = trained(est, **overrides).fit(X, labels)
    if getattr(m, "confusions_", None) is None:
        return
    c = np.asarray(m.confusions_)
    assert c.shape == conf.shape, f"{who}: confusions_ shape {c.shape}, expected {conf.shape}"
    assert np.allclose(c.sum(-1), 1, atol=1e-6), f"{who}: confusion rows must sum to 1"
    tol = tags.confusion_tol if tol is None else tol
    err = confusion_error(c, conf, permute=not tags.identifiable)
    base = confusion_error(np.full_like(conf, 1 / conf.shape[-1]), conf)
    assert err <= tol, f"{who}: confusion error {err:.3f} > {tol} (uniform guess {base:.3f})"
