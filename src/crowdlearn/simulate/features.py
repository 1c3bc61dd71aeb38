"""Synthetic annotators on real features (numpy only, seeded; no torch).

Every generator takes true labels ``y`` (int codes 0..K-1, e.g. ``load_digits().target`` or the
truth of music / labelme) and optionally the features ``X`` (rows = items), and returns a
:class:`~crowdlearn.core.data.CrowdLabels` with ``truth`` and ``features`` attached plus a dict of
planted information.  Confusions are ``[worker, true, answered]`` (rows sum to 1).

* :func:`annotate` — any planted confusions, ``labels_per_task`` random distinct workers per item.
* :func:`maxmig_structures` — Max-MIG's three information structures (Cao et al., ICLR 2019,
  methods notes §5.4): ``"independent"`` senior experts; ``"naive_majority"`` seniors plus
  juniors who always answer class 0; ``"correlated"`` seniors plus juniors who copy senior 0 or
  senior 1 — in ``"high"`` / ``"low"`` expertise, generalised to K classes.
* :func:`hammer_spammer` — hammers answer correctly, spammers uniformly at random.
* :func:`sparse_regular` — deepBP's (l, r)-regular bipartite assignment (Kim et al., AISTATS
  2022, notes §7.4): one-coin workers with accuracy ~ Beta(a, b) (K = 2) or a Dirichlet
  confusion row prior, plus optional extreme spammers.
* :func:`instance_outliers` — COINNet-style instance-dependent outliers (Nguyen et al., NeurIPS
  2024, notes §6): on the items nearest another class's centroid in feature space, every
  annotator answers that other class with high probability; the outlier mask is returned.
"""

from __future__ import annotations

import numpy as np

from ..core.data import CrowdLabels

__all__ = ["annotate", "maxmig_structures", "hammer_spammer", "sparse_regular", "instance_outliers"]


def _check(y, X, n_classes=None):
    y = np.asarray(y)
    if y.ndim != 1 or len(y) == 0 or y.dtype.kind not in "iu" or y.min() < 0:
        raise ValueError("y must be a non-empty 1-D array of non-negative integer class codes")
    k = int(y.max()) + 1 if n_classes is None else int(n_classes)
    if k < 2 or y.max() >= k:
        raise ValueError(f"need at least 2 classes and y < n_classes, got K={k}")
    if X is not None:
        X = np.asarray(X, dtype=float)
        if X.ndim != 2 or len(X) != len(y):
            raise ValueError(f"X must be 2-D with one row per label of y ({len(y)}), got shape {X.shape}")
    return y.astype(np.int64), X, k


def _draw(rows: np.ndarray, rng) -> np.ndarray:
    """One categorical draw per row of ``rows`` (probabilities)."""
    c = np.cumsum(rows, 1)
    u = rng.random(len(rows))[:, None] * c[:, -1:]
    return np.minimum((u > c).sum(1), rows.shape[1] - 1)


def _build(task, worker, label, n, w, k, y, X) -> CrowdLabels:
    return CrowdLabels.from_codes(task, worker, label, n_tasks=n, n_workers=w, n_classes=k,
                                  truth=y, features=X)


def annotate(y, confusions, labels_per_task=3, X=None, seed=0, n_classes=None):
    """Each item gets ``labels_per_task`` distinct random workers answering from ``confusions``.

    Returns ``(labels, planted)`` with ``planted = {"confusions": (W, K, K)}``.
    """
    conf = np.asarray(confusions, dtype=float)
    y, X, k = _check(y, X, n_classes if n_classes is not None else (conf.shape[-1] if conf.ndim == 3 else None))
    if conf.ndim != 3 or conf.shape[1:] != (k, k) or np.any(conf < 0):
        raise ValueError(f"confusions must be a non-negative (W, {k}, {k}) array")
    conf = conf / conf.sum(-1, keepdims=True)
    w = conf.shape[0]
    if not 1 <= labels_per_task <= w:
        raise ValueError(f"labels_per_task must be in [1, {w}], got {labels_per_task}")
    rng = np.random.default_rng(seed)
    n = len(y)
    workers = np.argsort(rng.random((n, w)), 1)[:, :labels_per_task].ravel()
    task = np.repeat(np.arange(n), labels_per_task)
    label = _draw(conf[workers, y[task]], rng)
    return _build(task, workers, label, n, w, k, y, X), {"confusions": conf}


def _flip(acc: float, k: int) -> np.ndarray:
    return acc * np.eye(k) + (1 - acc) * (1 - np.eye(k)) / (k - 1)


def maxmig_structures(y, structure="independent", expertise="high", X=None, seed=0, n_classes=None):
    """Max-MIG's information structures; every expert labels every item.

    ``expertise="high"``: 5 seniors (K = 2: the paper's five matrices; K > 2: one-coin
    accuracies 0.6, 0.7, 0.75, 0.8, 0.9).  ``"low"``: 10 seniors of accuracy 0.55 (K = 2, the
    paper) or ``1/K + 0.15`` (K > 2).  ``"naive_majority"`` adds juniors who always answer class 0
    (as many as the seniors, 5 more in low expertise, so they outvote them); ``"correlated"``
    adds juniors each copying the answers of senior 0 or senior 1 (5 in high, 2 in low
    expertise).  Expert counts are the paper's Dogs-vs-Cats ones: low 10 / 25 / 12, high
    5 / 10 / 10 for independent / naive majority / correlated.

    Returns ``(labels, planted)`` with ``planted`` holding ``confusions`` (the seniors'; for
    juniors their marginal behaviour), ``kind`` ("senior" / "junior") and ``copies`` (the senior
    copied by each correlated junior, -1 otherwise).
    """
    y, X, k = _check(y, X, n_classes)
    if structure not in ("independent", "naive_majority", "correlated"):
        raise ValueError(f"structure must be 'independent', 'naive_majority' or 'correlated', got {structure!r}")
    if expertise not in ("high", "low"):
        raise ValueError(f"expertise must be 'high' or 'low', got {expertise!r}")
    rng = np.random.default_rng(seed)
    if expertise == "high":
        if k == 2:
            seniors = np.array([[[.6, .4], [.1, .9]], [[.8, .2], [.4, .6]], [[.6, .4], [.4, .6]],
                                [[.7, .3], [.3, .7]], [[.7, .3], [.4, .6]]])
        else:
            seniors = np.stack([_flip(a, k) for a in (0.6, 0.7, 0.75, 0.8, 0.9)])
    else:
        seniors = np.stack([_flip(0.55 if k == 2 else 1.0 / k + 0.15, k)] * 10)
    s = len(seniors)
    n_junior = {("high", "independent"): 0, ("high", "naive_majority"): 5, ("high", "correlated"): 5,
                ("low", "independent"): 0, ("low", "naive_majority"): 15, ("low", "correlated"): 2}[
        expertise, structure]
    n = len(y)
    ans = np.empty((n, s + n_junior), np.int64)
    for m in range(s):
        ans[:, m] = _draw(seniors[m][y], rng)
    copies = np.full(s + n_junior, -1)
    junior_conf = []
    for j in range(n_junior):
        if structure == "naive_majority":
            ans[:, s + j] = 0
            junior_conf.append(np.tile(np.eye(k)[0], (k, 1)))
        else:
            src = j % 2
            ans[:, s + j] = ans[:, src]
            copies[s + j] = src
            junior_conf.append(seniors[src])
    conf = np.concatenate([seniors, np.array(junior_conf).reshape(-1, k, k)])
    w = s + n_junior
    task = np.repeat(np.arange(n), w)
    worker = np.tile(np.arange(w), n)
    labels = _build(task, worker, ans.ravel(), n, w, k, y, X)
    kind = np.array(["senior"] * s + ["junior"] * n_junior)
    return labels, {"confusions": conf, "kind": kind, "copies": copies}


def hammer_spammer(y, n_workers=10, hammer_fraction=0.3, labels_per_task=3, X=None, seed=0, n_classes=None):
    """Hammers (perfect) and spammers (uniform answers); ``planted["hammer"]`` flags the hammers."""
    y, X, k = _check(y, X, n_classes)
    if not 0 <= hammer_fraction <= 1:
        raise ValueError(f"hammer_fraction must be in [0, 1], got {hammer_fraction}")
    rng = np.random.default_rng(seed)
    hammer = np.zeros(n_workers, bool)
    hammer[rng.permutation(n_workers)[: int(round(hammer_fraction * n_workers))]] = True
    conf = np.where(hammer[:, None, None], np.eye(k), np.full((k, k), 1.0 / k))
    labels, planted = annotate(y, conf, labels_per_task, X, seed=rng.integers(2**31), n_classes=k)
    planted["hammer"] = hammer
    return labels, planted


def sparse_regular(y, l=3, r=4, a=2.0, b=1.0, extreme_spammers=0.0, X=None, seed=0, n_classes=None):
    """(l, r)-regular assignment: each item gets ``l`` workers, each worker ``r`` items.

    Worker accuracies ~ Beta(a, b) (one-coin, errors uniform over the other classes); a fraction
    ``extreme_spammers`` of the workers answer uniformly at random.  ``n_workers = N l / r``.
    """
    y, X, k = _check(y, X, n_classes)
    n = len(y)
    if (n * l) % r:
        raise ValueError(f"n_tasks * l must be divisible by r, got {n} * {l} / {r}")
    rng = np.random.default_rng(seed)
    w = n * l // r
    acc = rng.beta(a, b, size=w)
    spam = np.zeros(w, bool)
    spam[rng.permutation(w)[: int(round(extreme_spammers * w))]] = True
    conf = np.stack([_flip(p, k) for p in acc])
    conf[spam] = 1.0 / k
    # configuration model: l slots per item matched to r slots per worker, repaired so no
    # worker answers the same item twice
    slots = np.repeat(np.arange(w), r)
    for _ in range(100):
        slots = rng.permutation(slots)
        if all(len(set(row)) == l for row in slots.reshape(n, l)):
            break
    task = np.repeat(np.arange(n), l)
    label = _draw(conf[slots, y[task]], rng)
    labels = _build(task, slots, label, n, w, k, y, X)
    return labels, {"confusions": conf, "accuracy": acc, "spammer": spam}


def instance_outliers(y, X, outlier_fraction=0.1, n_workers=20, labels_per_task=3, accuracy=0.8,
                      outlier_accuracy=0.1, seed=0, n_classes=None):
    """COINNet-style outliers: the ``outlier_fraction`` of items closest to another class's centroid
    (relative to their own) are answered as that class with probability ``1 - outlier_accuracy``
    by every annotator; other items follow one-coin workers of ``accuracy``.

    ``planted`` holds ``outlier`` (bool mask), ``confusions`` (of regular items) and ``target``.
    """
    y, X, k = _check(y, X, n_classes)
    if X is None:
        raise ValueError("instance_outliers needs the features X")
    rng = np.random.default_rng(seed)
    cent = np.stack([X[y == c].mean(0) if np.any(y == c) else np.full(X.shape[1], np.inf) for c in range(k)])
    d = ((X[:, None, :] - cent[None]) ** 2).sum(-1)
    own = d[np.arange(len(y)), y]
    d_other = d.copy()
    d_other[np.arange(len(y)), y] = np.inf
    target = d_other.argmin(1)
    ratio = own / np.maximum(d_other.min(1), 1e-12)  # large: the item looks like another class
    n_out = int(round(outlier_fraction * len(y)))
    outlier = np.zeros(len(y), bool)
    outlier[np.argsort(-ratio, kind="stable")[:n_out]] = True
    conf = np.stack([_flip(accuracy, k)] * n_workers)
    labels, _ = annotate(y, conf, labels_per_task, X, seed=rng.integers(2**31), n_classes=k)
    lab = labels.label.copy()
    hit = outlier[labels.task] & (rng.random(len(lab)) >= outlier_accuracy)
    lab[hit] = target[labels.task[hit]]
    labels = _build(labels.task, labels.worker, lab, len(y), n_workers, k, y, X)
    return labels, {"outlier": outlier, "confusions": conf, "target": target}
