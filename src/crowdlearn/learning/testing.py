"""Shared checks for every end-to-end learner (any class with ``fit(X, labels)``,
``predict_proba(X)``, ``probas_`` and optionally ``confusions_`` [worker, true, answered]).

Each check builds a small seeded synthetic problem (Gaussian class clusters as features,
annotators from :mod:`crowdlearn.simulate.features`), trains a few epochs and raises
``AssertionError`` with a message on failure.  ``CHECKS`` lists them; use::

    for check in CHECKS:
        check(make_classifier("ccem"))

Speed parameters (``epochs``, ``patience``) are overridden through ``set_params`` when the
estimator has them, so each check runs in a couple of seconds on one CPU thread.
"""

from __future__ import annotations


import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.base import clone

from ..simulate.features import annotate

__all__ = ["CHECKS", "clusters", "fast", "check_perfect_annotators", "check_recovers_confusions",
           "check_posteriors_sum_to_one", "check_deterministic", "check_clone", "confusion_error"]

#: parameter overrides that keep the checks fast (applied only where the estimator has them)
FAST = {"epochs": 40, "patience": 40, "random_state": 0}


def fast(est, **extra):
    """A clone of ``est`` with the :data:`FAST` overrides (and ``extra``) it accepts."""
    est = clone(est)
    names = est.get_params(deep=False)
    est.set_params(**{k: v for k, v in {**FAST, **extra}.items() if k in names})
    return est


def clusters(n=400, k=3, d=8, separation=4.0, seed=0):
    """Separable Gaussian clusters: features (n, d), labels (n,) balanced over k classes."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, d))
    centres *= separation / np.linalg.norm(centres, axis=1, keepdims=True)
    y = np.arange(n) % k
    rng.shuffle(y)
    return centres[y] + rng.normal(size=(n, d)), y


def planted_confusions(n_workers=8, k=3, seed=0):
    """Asymmetric diagonally dominant confusions [worker, true, answered] (diag 0.6-0.85)."""
    rng = np.random.default_rng(seed)
    conf = np.empty((n_workers, k, k))
    for w in range(n_workers):
        for j in range(k):
            off = rng.dirichlet(np.full(k - 1, 0.7)) * (1 - rng.uniform(0.6, 0.85))
            conf[w, j] = np.insert(off, j, 0.0)
            conf[w, j, j] = 1 - off.sum()
    return conf


def confusion_error(est_conf, true_conf, permute=False) -> float:
    """Mean over workers of ‖Ĉ_w - C_w‖_F; with ``permute`` the best common class relabelling
    (Hungarian on the summed confusions) is applied first — for non-identifiable methods."""
    est_conf = np.asarray(est_conf, float)
    if permute:
        score = np.einsum("wjl,wil->ji", true_conf, est_conf)  # match true class j to estimated i
        _, col = linear_sum_assignment(-score)
        est_conf = est_conf[:, col][:, :, col]
    return float(np.mean(np.linalg.norm(est_conf - true_conf, axis=(1, 2))))


def check_perfect_annotators(est, min_accuracy=0.95):
    """Perfect annotators on separable features -> a near-perfect classifier on new points."""
    X, y = clusters(n=450, seed=1)
    k = int(y.max()) + 1
    labels, _ = annotate(y[:300], np.stack([np.eye(k)] * 5), 2, seed=1)
    m = fast(est).fit(X[:300], labels)
    acc = float(np.mean(m.predict(X[300:]) == labels.classes[y[300:]]))
    assert acc >= min_accuracy, f"{type(est).__name__}: accuracy {acc:.3f} with perfect annotators"


def check_recovers_confusions(est, tol=0.25):
    """Recover planted confusions (mean Frobenius error <= tol, up to a class permutation when
    the class declares ``_identifiable = False``; a class may set ``_confusion_tol``).  Skipped
    when the model has no ``confusions_``."""
    X, y = clusters(n=900, d=8, separation=3.0, seed=2)
    conf = planted_confusions(8, int(y.max()) + 1, seed=2)
    labels, _ = annotate(y, conf, 4, seed=2)
    m = fast(est).fit(X, labels)
    if getattr(m, "confusions_", None) is None:
        return
    c = np.asarray(m.confusions_)
    assert c.shape == conf.shape, f"confusions_ shape {c.shape}, expected {conf.shape}"
    assert np.allclose(c.sum(-1), 1, atol=1e-6), "confusion rows must sum to 1"
    tol = getattr(est, "_confusion_tol", tol)  # a method may declare a looser, documented bound
    err = confusion_error(c, conf, permute=not getattr(est, "_identifiable", True))
    base = confusion_error(np.full_like(conf, 1 / conf.shape[-1]), conf)
    assert err <= tol, f"{type(est).__name__}: confusion error {err:.3f} > {tol} (uniform guess {base:.3f})"


def _small():
    X, y = clusters(n=120, k=3, d=5, seed=3)
    conf = planted_confusions(6, 3, seed=3)
    labels, _ = annotate(y, conf, 3, seed=3)
    return X, labels


def check_posteriors_sum_to_one(est):
    """``probas_`` covers every task, is finite, rows sum to 1; so do ``predict_proba`` rows."""
    X, labels = _small()
    m = fast(est, epochs=3).fit(X, labels)
    p = m.probas_
    assert list(p.index) == list(labels.tasks), "probas_ must have one row per training task, in order"
    v = p.to_numpy(float)
    assert np.all(np.isfinite(v)) and np.allclose(v.sum(1), 1, atol=1e-6), "probas_ rows must sum to 1"
    q = m.predict_proba(X)
    assert q.shape == (len(X), labels.n_classes), f"predict_proba shape {q.shape}"
    assert np.all(np.isfinite(q)) and np.allclose(q.sum(1), 1, atol=1e-6), "predict_proba rows must sum to 1"
    assert set(np.unique(m.predict(X))) <= set(labels.classes), "predict must return known classes"


def check_deterministic(est):
    """Same data + same random_state -> identical predictions and posteriors."""
    X, labels = _small()
    a = fast(est, epochs=3).fit(X, labels)
    b = fast(est, epochs=3).fit(X, labels)
    assert np.array_equal(a.predict_proba(X), b.predict_proba(X)), "predict_proba differs between two seeded fits"
    assert np.array_equal(a.probas_.to_numpy(), b.probas_.to_numpy()), "probas_ differs between two seeded fits"


def check_clone(est):
    """``sklearn.clone`` reproduces the parameters, and the clone fits."""
    c = clone(est)
    p, q = est.get_params(deep=False), c.get_params(deep=False)
    assert p.keys() == q.keys(), "clone changed the parameter names"
    for k in p:
        assert type(p[k]) is type(q[k]), f"clone changed parameter {k!r}"
    X, labels = _small()
    fast(c, epochs=2).fit(X, labels)


CHECKS = [check_posteriors_sum_to_one, check_deterministic, check_clone, check_perfect_annotators,
          check_recovers_confusions]
