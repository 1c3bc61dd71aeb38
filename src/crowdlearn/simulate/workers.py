"""Worker models of the simulator: who answers what, given the true class.

A :class:`WorkerSpec` describes a group of ``n`` workers of one kind; its parameters are
drawn (:meth:`WorkerSpec.sample`) when a crowd is simulated, from the crowd's seed, as
confusion matrices in the library orientation ``conf[w, true, answered]``.  Accuracies are
given as a float, a ``(low, high)`` range drawn uniformly, a :class:`Beta` distribution, or
one value per worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..core.stats import one_coin_confusions

__all__ = ["Beta", "WorkerSpec", "one_coin_confusions"]


@dataclass(frozen=True)
class Beta:
    """Accuracies drawn from a Beta(a, b) distribution, one per value needed.

    The prior of worker reliability in the sparse-crowd analyses (e.g. deepBP, Kim et al.,
    AISTATS 2022, draw binary one-coin accuracies from Beta(2, 1)).
    """

    a: float
    b: float

    def __post_init__(self) -> None:
        if not (self.a > 0 and self.b > 0):
            raise ValueError(f"Beta parameters must be positive, got a={self.a}, b={self.b}")


Range = float | tuple[float, float] | Beta | np.ndarray


def _as_values(value: Range, shape: tuple[int, ...], rng: np.random.Generator, what: str) -> np.ndarray:
    """A float, a (low, high) tuple drawn uniformly, a :class:`Beta` drawn, or an array
    broadcast to ``shape``."""
    if isinstance(value, Beta):
        return rng.beta(value.a, value.b, size=shape)
    if isinstance(value, tuple):
        if len(value) != 2:
            raise ValueError(f"{what} range must be a (low, high) pair, got {value!r}")
        lo, hi = float(value[0]), float(value[1])
        if not (0.0 <= lo <= hi <= 1.0):
            raise ValueError(f"{what} range must satisfy 0 <= low <= high <= 1, got {value!r}")
        return rng.uniform(lo, hi, size=shape)
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim and arr.shape[0] != shape[0]:
        raise ValueError(f"{what} array must have one entry per worker ({shape[0]}), got {arr.shape}")
    if arr.ndim == 1 and len(shape) == 2:
        arr = arr[:, None]
    out = np.broadcast_to(arr, shape).astype(np.float64)
    if np.any((out < 0) | (out > 1)) or not np.all(np.isfinite(out)):
        raise ValueError(f"{what} values must lie in [0, 1]")
    return out


def _dirichlet_confusions(diag: np.ndarray, k: int, concentration: float, rng) -> np.ndarray:
    """diag (n, k) -> (n, k, k): given diagonal, off-diagonal mass split by a Dirichlet."""
    n = diag.shape[0]
    share = rng.dirichlet(np.full(k - 1, float(concentration)), size=n * k).reshape(n, k, k - 1)
    conf = np.empty((n, k, k))
    off_mask = ~np.eye(k, dtype=bool)
    conf[:, off_mask] = (share * (1.0 - diag)[:, :, None]).reshape(n, k * (k - 1))
    idx = np.arange(k)
    conf[:, idx, idx] = diag
    return conf


@dataclass(frozen=True)
class WorkerSpec:
    """A group of ``n`` simulated workers of one kind.

    Build them with the constructors below and pass a list to :func:`crowd`; each group's
    parameters are drawn when the crowd is simulated, from the crowd's seed.

    ``diligent(n, accuracy, concentration)``
        Dawid-Skene workers: per (worker, true class) accuracy drawn in ``accuracy``, the
        remaining mass spread over the other classes by a symmetric Dirichlet.
    ``one_coin(n, accuracy)``
        One accuracy per worker, errors uniform over the other classes.
    ``spammer(n, p=None, concentration=None)``
        Answers independent of the truth: uniform over the classes, drawn from ``p``, or
        from a per-worker distribution drawn from a symmetric Dirichlet(``concentration``).
    ``hammer(n, accuracy=1.0)``
        The hammers of the hammer-spammer model: one-coin workers, always right by default
        (``kind == "one_coin"``).
    ``adversary(n, accuracy)``
        Below-chance workers: a one-coin worker of accuracy ``a`` whose answers are relabelled
        by a per-worker cyclic shift ``l -> (l + s) mod K`` (``s != 0``); their accuracy is
        ``(1 - a) / (K - 1)`` but their answers stay informative once un-permuted.
    ``fixed_class(n, cls=None)``
        Always answer class code ``cls`` (a random class per worker when None).
    ``colluders(n, group_size, base=None, copy_prob=1.0)``
        Groups of ``group_size`` workers (the last may be smaller).  The first member of a
        group is its leader; every member gives the group's shared answer on a task (the
        leader's answer, drawn once per task from the leader's confusion) with probability
        ``copy_prob``, else answers from its own confusion.  Members' confusions are drawn
        from ``base`` (default: uniform spammers, a Sybil attack).
    ``custom(confusions)``
        Fixed confusion matrices, shape (n, K, K) or (K, K) with ``n`` given.
    ``instance_dependent(n, base=None, outlier_prob=0.8)``
        Workers of ``base`` (default: one-coin in (0.6, 0.9)) whose errors also depend on
        the item: on a task the crowd flags as an instance outlier (``outlier_class`` of
        :func:`~crowdlearn.simulate.crowds.crowd`, e.g. an item that looks like another
        class), they answer the flagged class with probability ``outlier_prob`` and follow
        their confusion otherwise (COINNet's setting, Nguyen et al., NeurIPS 2024).
    """

    kind: str
    n: int
    params: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if int(self.n) != self.n or self.n < 0:
            raise ValueError(f"worker count must be a non-negative integer, got {self.n!r}")

    # ------------------------------------------------------------ constructors
    @classmethod
    def diligent(cls, n: int, accuracy: Range = (0.6, 0.9), concentration: float = 1.0) -> "WorkerSpec":
        """Dawid-Skene workers (class-dependent accuracy drawn in ``accuracy``)."""
        if concentration <= 0:
            raise ValueError("concentration must be positive")
        return cls("diligent", int(n), {"accuracy": accuracy, "concentration": concentration})

    @classmethod
    def one_coin(cls, n: int, accuracy: Range = (0.6, 0.9)) -> "WorkerSpec":
        """Workers with one accuracy for all classes and uniform errors."""
        return cls("one_coin", int(n), {"accuracy": accuracy})

    @classmethod
    def spammer(
        cls, n: int, p: Sequence[float] | None = None, concentration: float | None = None
    ) -> "WorkerSpec":
        """Workers answering independently of the truth: uniformly, from ``p``, or from
        a per-worker distribution ~ Dirichlet(``concentration``)."""
        if p is not None and concentration is not None:
            raise ValueError("give the spammers' answer distribution p or a concentration, not both")
        if concentration is not None and not concentration > 0:
            raise ValueError("concentration must be positive")
        return cls(
            "spammer", int(n),
            {"p": None if p is None else np.asarray(p, float), "concentration": concentration},
        )

    @classmethod
    def hammer(cls, n: int, accuracy: Range = 1.0) -> "WorkerSpec":
        """Hammers: one-coin workers of ``accuracy`` (1: always right)."""
        return cls.one_coin(n, accuracy)

    @classmethod
    def instance_dependent(
        cls, n: int, base: "WorkerSpec | None" = None, outlier_prob: float = 0.8
    ) -> "WorkerSpec":
        """Workers of ``base`` who answer an outlier task's flagged class with probability
        ``outlier_prob`` (see the class docstring)."""
        if not 0.0 <= outlier_prob <= 1.0:
            raise ValueError("outlier_prob must lie in [0, 1]")
        if base is not None and base.kind in ("colluder", "instance_dependent"):
            raise ValueError(f"the base of instance-dependent workers cannot be {base.kind}")
        return cls(
            "instance_dependent", int(n), {"base": base, "outlier_prob": float(outlier_prob)}
        )

    @classmethod
    def adversary(cls, n: int, accuracy: Range = (0.6, 0.9)) -> "WorkerSpec":
        """Workers whose (one-coin) answers are systematically permuted: below chance."""
        return cls("adversary", int(n), {"accuracy": accuracy})

    @classmethod
    def fixed_class(cls, n: int, cls_code: int | None = None) -> "WorkerSpec":
        """Workers that always give class code ``cls_code`` (random per worker if None)."""
        return cls("fixed_class", int(n), {"cls": cls_code})

    @classmethod
    def colluders(
        cls,
        n: int,
        group_size: int = 5,
        base: "WorkerSpec | None" = None,
        copy_prob: float = 1.0,
    ) -> "WorkerSpec":
        """Groups of workers copying their leader's answers (see the class docstring)."""
        if int(group_size) < 1:
            raise ValueError("group_size must be at least 1")
        if not 0.0 <= copy_prob <= 1.0:
            raise ValueError("copy_prob must lie in [0, 1]")
        if base is not None and base.kind in ("colluder", "instance_dependent"):
            raise ValueError(f"the base of colluders cannot be {base.kind} workers")
        return cls(
            "colluder",
            int(n),
            {"group_size": int(group_size), "base": base, "copy_prob": float(copy_prob)},
        )

    @classmethod
    def custom(cls, confusions: np.ndarray, n: int | None = None) -> "WorkerSpec":
        """Workers with the given confusion matrices ([w, true, answered], rows sum to 1)."""
        conf = np.asarray(confusions, dtype=np.float64)
        if conf.ndim == 2:
            conf = np.broadcast_to(conf, (1 if n is None else int(n),) + conf.shape)
        if conf.ndim != 3 or conf.shape[1] != conf.shape[2]:
            raise ValueError(f"confusions must have shape (n, K, K) or (K, K), got {conf.shape}")
        if n is not None and conf.shape[0] != n:
            raise ValueError(f"confusions hold {conf.shape[0]} workers, n={n}")
        if not np.all(np.isfinite(conf)) or np.any(conf < 0):
            raise ValueError("confusions must be finite and non-negative")
        sums = conf.sum(axis=2)
        if not np.allclose(sums, 1.0, atol=1e-6):
            raise ValueError("each confusion row (true class) must sum to 1")
        return cls("custom", conf.shape[0], {"confusions": conf / sums[:, :, None]})

    # ---------------------------------------------------------------- sampling
    def sample(self, n_classes: int, rng: np.random.Generator) -> np.ndarray:
        """Draw the (n, K, K) confusions of this group's workers (colluders: their own)."""
        k, n, p = n_classes, self.n, self.params
        if self.kind == "diligent":
            diag = _as_values(p["accuracy"], (n, k), rng, "accuracy")
            return _dirichlet_confusions(diag, k, p["concentration"], rng)
        if self.kind == "one_coin":
            return one_coin_confusions(_as_values(p["accuracy"], (n,), rng, "accuracy"), k)
        if self.kind == "spammer":
            if p.get("concentration") is not None:
                dist = rng.dirichlet(np.full(k, float(p["concentration"])), size=n)
                return np.repeat(dist[:, None, :], k, axis=1)
            dist = np.full(k, 1.0 / k) if p["p"] is None else p["p"]
            if dist.shape != (k,) or np.any(dist < 0) or dist.sum() <= 0:
                raise ValueError(f"spammer p must be {k} non-negative weights")
            return np.broadcast_to(dist / dist.sum(), (n, k, k)).copy()
        if self.kind == "adversary":
            honest = one_coin_confusions(_as_values(p["accuracy"], (n,), rng, "accuracy"), k)
            shift = rng.integers(1, k, size=n)
            cols = (np.arange(k)[None, :] - shift[:, None]) % k  # answered m <- honest m - s
            return np.take_along_axis(honest, cols[:, None, :].repeat(k, axis=1), axis=2)
        if self.kind == "fixed_class":
            c = p["cls"]
            if c is None:
                chosen = rng.integers(0, k, size=n)
            else:
                if not 0 <= int(c) < k:
                    raise ValueError(f"fixed class code {c} is not in [0, {k})")
                chosen = np.full(n, int(c))
            conf = np.zeros((n, k, k))
            conf[np.arange(n), :, chosen] = 1.0
            return conf
        if self.kind == "colluder":
            base = p["base"] if p["base"] is not None else WorkerSpec.spammer(n)
            return WorkerSpec(base.kind, n, base.params).sample(k, rng)
        if self.kind == "instance_dependent":
            base = p["base"] if p["base"] is not None else WorkerSpec.one_coin(n)
            return WorkerSpec(base.kind, n, base.params).sample(k, rng)
        if self.kind == "custom":
            conf = p["confusions"]
            if conf.shape[1] != k:
                raise ValueError(f"custom confusions are {conf.shape[1]}x{conf.shape[1]}, n_classes={k}")
            return conf.copy()
        raise ValueError(f"unknown worker kind {self.kind!r}")


