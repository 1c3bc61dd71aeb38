"""Ready-made crowds of the literature, each a thin call into :func:`~crowdlearn.simulate.crowds.crowd`.

* :func:`dawid_skene` and :func:`one_coin`: the two classic worker models, optionally with
  a share of spammers, adversaries, colluders and fixed-class workers.
* :func:`hammer_spammer`: Karger, Oh and Shah's hammers and spammers.
* :func:`sparse_regular`: deepBP's sparse ``(l, r)``-regular crowd (Kim et al., AISTATS
  2022) with Beta-distributed one-coin accuracies and optional spammers.
* :func:`maxmig_structures`: the three information structures of Max-MIG (Cao et al.,
  ICLR 2019).

Every scenario returns a :class:`~crowdlearn.simulate.crowds.SimulatedLabels`; those that
accept ``truth`` and ``features`` can be laid on real items.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from .assignment import Assignment, assign_workers
from .crowds import Planted, SimulatedLabels, crowd
from .workers import Beta, Range, WorkerSpec, one_coin_confusions

__all__ = ["dawid_skene", "hammer_spammer", "maxmig_structures", "one_coin", "sparse_regular"]


def _special_specs(
    n_workers: int,
    spammers: float,
    adversaries: float,
    colluders: float,
    fixed_class: float,
    colluder_group_size: int,
    accuracy: Range,
) -> tuple[int, list[WorkerSpec]]:
    counts = {}
    for name, frac in (
        ("spammers", spammers),
        ("adversaries", adversaries),
        ("colluders", colluders),
        ("fixed_class", fixed_class),
    ):
        if not 0.0 <= frac <= 1.0:
            raise ValueError(f"{name} is a fraction of n_workers in [0, 1], got {frac!r}")
        counts[name] = int(round(frac * n_workers))
    n_special = sum(counts.values())
    if n_special > n_workers:
        raise ValueError(
            f"the fractions of special workers add up to {n_special} > n_workers={n_workers}"
        )
    specs = []
    if counts["spammers"]:
        specs.append(WorkerSpec.spammer(counts["spammers"]))
    if counts["adversaries"]:
        specs.append(WorkerSpec.adversary(counts["adversaries"], accuracy=accuracy))
    if counts["colluders"]:
        specs.append(WorkerSpec.colluders(counts["colluders"], group_size=colluder_group_size))
    if counts["fixed_class"]:
        specs.append(WorkerSpec.fixed_class(counts["fixed_class"]))
    return n_workers - n_special, specs


def dawid_skene(
    n_tasks: int,
    n_workers: int,
    n_classes: int,
    labels_per_task: int = 5,
    confusions: np.ndarray | None = None,
    class_prior: Sequence[float] | None = None,
    accuracy: Range = (0.6, 0.9),
    assignment: Assignment = "random",
    seed: Any = 0,
    *,
    concentration: float = 1.0,
    spammers: float = 0.0,
    adversaries: float = 0.0,
    colluders: float = 0.0,
    fixed_class: float = 0.0,
    colluder_group_size: int = 5,
) -> SimulatedLabels:
    """Crowd of Dawid-Skene workers, optionally with a share of unreliable ones.

    Parameters
    ----------
    n_tasks, n_workers, n_classes : int
    labels_per_task : int
        Distinct workers per task.
    confusions : ndarray (n_regular, K, K) or (K, K), optional
        Planted confusions of the regular workers ([w, true, answered]), where
        ``n_regular`` is ``n_workers`` minus the special workers (so ``n_workers`` without
        fractions); a single matrix is shared.  Default: drawn, see ``accuracy``.
    class_prior : array (K,), optional
        Distribution of the true classes; uniform by default.
    accuracy : float, (low, high) or array
        Diagonal of the drawn confusions: a (low, high) tuple draws each (worker, class)
        entry uniformly; off-diagonal mass follows a symmetric Dirichlet(``concentration``).
    assignment : {"random", "regular"}
        See :func:`assign_workers`.
    concentration : float
        Dirichlet concentration of the errors (small: errors on one class; large: uniform).
    spammers, adversaries, colluders, fixed_class : float
        Fractions of ``n_workers`` (rounded) replaced by uniform spammers, adversaries
        (permuted one-coin workers drawn in ``accuracy``), colluders (groups of
        ``colluder_group_size`` copying a spammer leader) and fixed-class workers.  They come
        after the regular workers in worker code order; ``planted.kind`` tells them apart.
    colluder_group_size : int
    seed : int, Generator or None

    Returns
    -------
    SimulatedLabels
        See :func:`crowd`.
    """
    n_base, specs = _special_specs(
        n_workers, spammers, adversaries, colluders, fixed_class, colluder_group_size, accuracy
    )
    if confusions is not None:
        conf = np.asarray(confusions, dtype=np.float64)
        if conf.ndim == 3 and conf.shape[0] != n_base:
            raise ValueError(
                f"confusions hold {conf.shape[0]} workers but {n_base} regular workers are "
                f"simulated (n_workers={n_workers} minus special workers)"
            )
        base = WorkerSpec.custom(conf, n=n_base)
    else:
        base = WorkerSpec.diligent(n_base, accuracy=accuracy, concentration=concentration)
    return crowd(
        n_tasks, n_classes, [base, *specs], labels_per_task=labels_per_task,
        assignment=assignment, class_prior=class_prior, seed=seed,
    )


def one_coin(
    n_tasks: int,
    n_workers: int,
    n_classes: int,
    labels_per_task: int = 5,
    accuracy: Range = (0.6, 0.9),
    class_prior: Sequence[float] | None = None,
    assignment: Assignment = "random",
    seed: Any = 0,
    *,
    spammers: float = 0.0,
    adversaries: float = 0.0,
    colluders: float = 0.0,
    fixed_class: float = 0.0,
    colluder_group_size: int = 5,
) -> SimulatedLabels:
    """Crowd of one-coin workers (one accuracy each, errors uniform over other classes).

    Parameters
    ----------
    n_tasks, n_workers, n_classes : int
    labels_per_task : int
    accuracy : float, (low, high) or array (n_workers - special,)
        Worker accuracies; a tuple draws them uniformly.
    class_prior : array (K,), optional
    assignment : {"random", "regular"}
    spammers, adversaries, colluders, fixed_class : float
        Fractions of ``n_workers`` (rounded) replaced by uniform spammers, adversaries
        (permuted one-coin workers drawn in ``accuracy``), colluders (groups of
        ``colluder_group_size`` copying a spammer leader) and fixed-class workers.  They come
        after the regular workers in worker code order; ``planted.kind`` tells them apart.
    colluder_group_size : int
    seed : int, Generator or None

    Returns
    -------
    SimulatedLabels
        See :func:`crowd`.
    """
    n_base, specs = _special_specs(
        n_workers, spammers, adversaries, colluders, fixed_class, colluder_group_size, accuracy
    )
    return crowd(
        n_tasks, n_classes, [WorkerSpec.one_coin(n_base, accuracy), *specs],
        labels_per_task=labels_per_task, assignment=assignment, class_prior=class_prior,
        seed=seed,
    )


def hammer_spammer(
    n_tasks: int,
    n_workers: int,
    n_classes: int = 2,
    labels_per_task: int = 5,
    hammers: float = 0.5,
    hammer_accuracy: float = 1.0,
    class_prior: Sequence[float] | None = None,
    assignment: Assignment = "regular",
    seed: Any = 0,
    *,
    truth: np.ndarray | None = None,
    features: np.ndarray | None = None,
) -> SimulatedLabels:
    """The hammer-spammer model (Karger, Oh and Shah, 2011).

    A fraction ``hammers`` of the workers (rounded) answer correctly with probability
    ``hammer_accuracy`` (1: always right); the rest are uniform spammers.  The default
    assignment is the ``(l, r)``-regular graph of the original analysis.

    Parameters
    ----------
    n_tasks, n_workers : int
    n_classes : int
    labels_per_task : int
    hammers : float
        Fraction of hammers in [0, 1].
    hammer_accuracy : float
    class_prior : array (K,), optional
    assignment : {"regular", "random"}
    seed : int, Generator or None
    truth, features : arrays, optional
        Given true classes and item features (see :func:`~crowdlearn.simulate.crowds.crowd`).

    Returns
    -------
    SimulatedLabels
        Hammers are the first workers, ``kind == "one_coin"``; spammers ``kind == "spammer"``.
    """
    if not 0.0 <= hammers <= 1.0:
        raise ValueError(f"hammers is a fraction in [0, 1], got {hammers!r}")
    n_hammers = int(round(hammers * n_workers))
    specs = [
        WorkerSpec.hammer(n_hammers, float(hammer_accuracy)),
        WorkerSpec.spammer(n_workers - n_hammers),
    ]
    return crowd(
        n_tasks, n_classes, specs, labels_per_task=labels_per_task, assignment=assignment,
        class_prior=class_prior, seed=seed, truth=truth, features=features,
    )



def sparse_regular(
    n_tasks: int,
    l: int = 3,
    r: int = 4,
    n_classes: int = 2,
    accuracy: Range = Beta(2.0, 1.0),
    spammers: float = 0.0,
    dense_spammers: int = 0,
    seed: Any = 0,
    *,
    truth: np.ndarray | None = None,
    features: np.ndarray | None = None,
) -> SimulatedLabels:
    """deepBP's sparse crowd: one-coin workers on an ``(l, r)``-regular design.

    ``n_workers = n_tasks * l / r`` workers each label exactly ``r`` tasks and every task
    gets exactly ``l`` distinct workers (Kim et al., AISTATS 2022; Karger, Oh and Shah,
    2011).  Accuracies are drawn from ``accuracy`` (default Beta(2, 1)); errors are uniform
    over the other classes.

    Parameters
    ----------
    n_tasks : int
        ``n_tasks * l`` must be divisible by ``r``.
    l, r : int
        Workers per task and tasks per worker.
    n_classes : int
    accuracy : float, (low, high), Beta or array
    spammers : float
        Fraction of the ``n_tasks * l / r`` regular workers (rounded) replaced by uniform
        spammers; they keep the regular degrees and come last among them.
    dense_spammers : int
        Extra uniform spammers who label *every* task (the "extreme spammers" that break
        message passing on sparse graphs), after the regular workers in code order.
    seed : int, Generator or None
    truth, features : arrays, optional
        Given true classes and item features.

    Returns
    -------
    SimulatedLabels
    """
    n_tasks, l, r = int(n_tasks), int(l), int(r)
    if l < 1 or r < 1 or (n_tasks * l) % r:
        raise ValueError(f"n_tasks * l must be divisible by r, got {n_tasks} * {l} / {r}")
    if not 0.0 <= spammers <= 1.0:
        raise ValueError(f"spammers is a fraction in [0, 1], got {spammers!r}")
    if int(dense_spammers) < 0:
        raise ValueError("dense_spammers must be a non-negative count")
    m = n_tasks * l // r
    n_spam = int(round(spammers * m))
    specs = [WorkerSpec.one_coin(m - n_spam, accuracy), WorkerSpec.spammer(n_spam)]
    if dense_spammers:
        specs.append(WorkerSpec.spammer(int(dense_spammers)))
    rng = np.random.default_rng(seed)
    task, worker = assign_workers(n_tasks, m, l, "regular", rng)
    if dense_spammers:
        task = np.concatenate([task, np.tile(np.arange(n_tasks, dtype=np.int32), dense_spammers)])
        extra = m + np.arange(int(dense_spammers), dtype=np.int32)
        worker = np.concatenate([worker, np.repeat(extra, n_tasks)])
    return crowd(
        n_tasks, n_classes, specs, assignment=(task, worker), seed=rng, truth=truth,
        features=features,
    )


# Max-MIG's Dogs-vs-Cats experts (Cao et al., ICLR 2019): the five binary senior matrices of
# the high-expertise setting, and the number of juniors per (expertise, structure)
_MAXMIG_HIGH_BINARY = np.array([
    [[0.6, 0.4], [0.1, 0.9]], [[0.8, 0.2], [0.4, 0.6]], [[0.6, 0.4], [0.4, 0.6]],
    [[0.7, 0.3], [0.3, 0.7]], [[0.7, 0.3], [0.4, 0.6]],
])
_MAXMIG_JUNIORS = {
    ("high", "independent"): 0, ("high", "naive_majority"): 5, ("high", "correlated"): 5,
    ("low", "independent"): 0, ("low", "naive_majority"): 15, ("low", "correlated"): 2,
}


def maxmig_structures(
    n_tasks: int,
    structure: str = "independent",
    expertise: str = "high",
    n_classes: int = 2,
    seed: Any = 0,
    *,
    truth: np.ndarray | None = None,
    features: np.ndarray | None = None,
    class_prior: Sequence[float] | None = None,
) -> SimulatedLabels:
    """Max-MIG's information structures (Cao et al., ICLR 2019); every expert labels every item.

    Seniors: ``expertise="high"``: 5 seniors (K = 2: the paper's five matrices; K > 2:
    one-coin accuracies 0.6, 0.7, 0.75, 0.8, 0.9); ``"low"``: 10 one-coin seniors of accuracy
    0.55 (K = 2, the paper) or ``1/K + 0.15`` (K > 2).  Juniors:

    ``"independent"``
        none: seniors only, conditionally independent given the truth.
    ``"naive_majority"``
        juniors who always answer class 0 (``kind == "fixed_class"``), as many as the
        seniors (5 more in low expertise), so that they outvote them.
    ``"correlated"``
        juniors copying senior 0 or senior 1 in turn (5 in high, 2 in low expertise):
        colluders (``kind == "colluder"``) whose ``planted.leader`` is the copied senior.

    The seniors are drawn first, by :func:`~crowdlearn.simulate.crowds.crowd`, and the
    juniors' answers follow from theirs: for one seed and truth the seniors give the same
    answers in every structure, so structures are compared on common random numbers.

    Expert counts are the paper's Dogs-vs-Cats ones: low 10 / 25 / 12, high 5 / 10 / 10
    for independent / naive majority / correlated.

    Returns
    -------
    SimulatedLabels
        Seniors first (``planted.group == 0``, ``kind == "custom"``), then the juniors
        (``planted.group == 1``); ``planted.confusions`` of a junior is its marginal
        behaviour (a copier's is its senior's), and a copied senior is its own leader.
    """
    if structure not in ("independent", "naive_majority", "correlated"):
        raise ValueError(
            f"structure must be 'independent', 'naive_majority' or 'correlated', got {structure!r}"
        )
    if expertise not in ("high", "low"):
        raise ValueError(f"expertise must be 'high' or 'low', got {expertise!r}")
    k = int(n_classes)
    if expertise == "high":
        seniors = _MAXMIG_HIGH_BINARY if k == 2 else one_coin_confusions([0.6, 0.7, 0.75, 0.8, 0.9], k)
    else:
        seniors = one_coin_confusions(np.full(10, 0.55 if k == 2 else 1.0 / k + 0.15), k)
    n_junior = _MAXMIG_JUNIORS[expertise, structure]
    n_senior = len(seniors)
    rng = np.random.default_rng(seed)
    senior_crowd = crowd(
        n_tasks, k, WorkerSpec.custom(seniors), labels_per_task=n_senior, class_prior=class_prior,
        seed=rng, truth=truth, features=features,
    )
    if not n_junior:
        return senior_crowd
    n_tasks = senior_crowd.n_tasks
    answers = np.empty((n_tasks, n_senior + n_junior), dtype=np.int32)
    answers[senior_crowd.task, senior_crowd.worker] = senior_crowd.label
    sp = senior_crowd.planted
    leader = np.full(n_senior + n_junior, -1, dtype=np.int64)
    juniors = np.arange(n_senior, n_senior + n_junior)
    if structure == "naive_majority":
        answers[:, juniors] = 0
        junior_conf = np.zeros((n_junior, k, k))
        junior_conf[:, :, 0] = 1.0
        junior_kind = "fixed_class"
    else:
        copied = (juniors - n_senior) % 2  # senior 0, senior 1, senior 0, ...
        answers[:, juniors] = answers[:, copied]
        junior_conf = sp.confusions[copied]
        junior_kind = "colluder"
        leader[juniors] = copied
        leader[:2] = [0, 1]
    n_workers = n_senior + n_junior
    planted = Planted(
        confusions=np.concatenate([sp.confusions, junior_conf]),
        class_prior=sp.class_prior,
        kind=np.array([*sp.kind, *[junior_kind] * n_junior]),
        group=np.repeat([0, 1], [n_senior, n_junior]),
        leader=leader,
        copy_prob=(leader >= 0).astype(np.float64),
        outlier_prob=np.zeros(n_workers),
        outlier_class=sp.outlier_class,
    )
    return SimulatedLabels(
        np.repeat(np.arange(n_tasks, dtype=np.int32), n_workers),
        np.tile(np.arange(n_workers, dtype=np.int32), n_tasks),
        answers.reshape(-1),
        tasks=senior_crowd.tasks,
        workers=pd.RangeIndex(n_workers, name="worker"),
        classes=senior_crowd.classes,
        truth=senior_crowd.truth,
        features=senior_crowd.features,
        planted=planted,
    )
