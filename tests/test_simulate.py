"""Tests of crowdlearn.simulate.categorical: planted parameters are what the data shows."""

from __future__ import annotations

import pickle
import time

import numpy as np
import pytest
from scipy import stats

from crowdlearn import metrics, simulate
from crowdlearn.core.data import CrowdLabels
from crowdlearn.simulate.categorical import WorkerSpec


def empirical_confusions(data: CrowdLabels) -> np.ndarray:
    k, m = data.n_classes, data.n_workers
    flat = np.bincount(
        (data.worker.astype(np.int64) * k + data.truth[data.task]) * k + data.label,
        minlength=m * k * k,
    ).reshape(m, k, k).astype(float)
    return flat / np.maximum(flat.sum(axis=2, keepdims=True), 1)


def pairs(data: CrowdLabels) -> np.ndarray:
    return data.task.astype(np.int64) * data.n_workers + data.worker


@pytest.fixture(scope="module")
def mixed():
    return simulate.dawid_skene(
        60_000, 40, 3, labels_per_task=6, seed=7, spammers=0.1, adversaries=0.1,
        colluders=0.15, fixed_class=0.05, colluder_group_size=3,
    )


# -------------------------------------------------------------------------- structure
def test_returns_crowd_labels_with_truth_and_planted(mixed):
    assert isinstance(mixed, CrowdLabels)
    assert mixed.n_tasks == 60_000 and mixed.n_workers == 40 and mixed.n_classes == 3
    assert mixed.n_labels == 60_000 * 6
    assert mixed.truth.shape == (60_000,) and mixed.truth.min() >= 0
    p = mixed.planted
    assert p.confusions.shape == (40, 3, 3)
    np.testing.assert_allclose(p.confusions.sum(axis=2), 1.0)
    kinds, counts = np.unique(p.kind, return_counts=True)
    assert dict(zip(kinds, counts)) == {
        "diligent": 24, "spammer": 4, "adversary": 4, "colluder": 6, "fixed_class": 2,
    }
    assert set(p.as_dict()) == {"confusions", "class_prior", "kind", "group", "leader", "copy_prob"}
    np.testing.assert_allclose(p.accuracy, np.einsum("wjj,j->w", p.confusions, p.class_prior))


def test_empirical_confusions_match_planted(mixed):
    err = metrics.confusion_error(empirical_confusions(mixed), mixed.planted.confusions)
    assert err["max_abs"] < 0.04  # ~9000 answers per worker, 3000 per row
    assert err["frobenius"] < 0.03


def test_diligent_confusions_follow_the_accuracy_range(mixed):
    p = mixed.planted
    diag = np.diagonal(p.confusions[p.kind == "diligent"], axis1=1, axis2=2)
    assert diag.min() >= 0.6 and diag.max() <= 0.9


def test_same_seed_same_output():
    kw = dict(labels_per_task=4, spammers=0.2, colluders=0.2, colluder_group_size=2)
    a = simulate.dawid_skene(2_000, 20, 4, seed=3, **kw)
    b = simulate.dawid_skene(2_000, 20, 4, seed=3, **kw)
    c = simulate.dawid_skene(2_000, 20, 4, seed=4, **kw)
    for field in ("task", "worker", "label", "truth"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    np.testing.assert_array_equal(a.planted.confusions, b.planted.confusions)
    assert not np.array_equal(a.label, c.label)
    gen = simulate.one_coin(500, 10, 2, seed=np.random.default_rng(1))
    assert gen.n_labels == 2_500


def test_pickle_keeps_planted(mixed):
    back = pickle.loads(pickle.dumps(mixed))
    assert isinstance(back, simulate.SimulatedLabels)
    np.testing.assert_array_equal(back.label, mixed.label)
    np.testing.assert_array_equal(back.planted.confusions, mixed.planted.confusions)


def test_class_prior():
    data = simulate.one_coin(50_000, 10, 3, class_prior=[0.6, 0.3, 0.1], seed=0)
    freq = np.bincount(data.truth, minlength=3) / data.n_tasks
    np.testing.assert_allclose(freq, [0.6, 0.3, 0.1], atol=0.01)
    np.testing.assert_allclose(data.planted.class_prior, [0.6, 0.3, 0.1])


# ------------------------------------------------------------------------- assignment
@pytest.mark.parametrize(
    "n_tasks, n_workers, l",
    [(3_000, 60, 5), (1_000, 30, 25), (400, 8, 8), (999, 7, 3), (2_000, 100, 60)],
)
def test_regular_assignment_degrees_are_exact(n_tasks, n_workers, l):
    data = simulate.hammer_spammer(n_tasks, n_workers, labels_per_task=l, seed=1)
    assert np.all(data.labels_per_task() == l)
    per_worker = data.labels_per_worker()
    r, extra = divmod(n_tasks * l, n_workers)
    if extra == 0:
        assert np.all(per_worker == r)
    else:
        assert set(np.unique(per_worker)) <= {r, r + 1}
        assert (per_worker == r + 1).sum() == extra
    assert len(np.unique(pairs(data))) == data.n_labels  # no repeated (task, worker)


def test_regular_assignment_is_random():
    # workers co-label tasks like in a uniformly random assignment: same spread, no clique
    def co_labelling(kind):
        task, worker = simulate.assign_workers(2_000, 100, 5, kind, seed=0)
        sets = np.zeros((100, 2_000), dtype=np.int32)
        sets[worker, task] = 1
        shared = sets @ sets.T
        return shared[~np.eye(100, dtype=bool)]

    regular, uniform = co_labelling("regular"), co_labelling("random")
    assert regular.mean() == pytest.approx(2_000 * 5 * 4 / (100 * 99))  # exact
    assert regular.std() == pytest.approx(uniform.std(), rel=0.15)
    assert regular.max() < 16


@pytest.mark.parametrize("n_workers, l", [(50, 5), (12, 10), (6, 6)])
def test_random_assignment(n_workers, l):
    task, worker = simulate.assign_workers(20_000, n_workers, l, "random", seed=2)
    assert np.all(np.diff(task) >= 0)
    assert np.all(np.bincount(task) == l)
    assert len(np.unique(task.astype(np.int64) * n_workers + worker)) == len(task)
    load = np.bincount(worker, minlength=n_workers)
    np.testing.assert_allclose(load / load.mean(), 1.0, atol=0.08)  # uniform workers


def test_assignment_errors():
    with pytest.raises(ValueError, match="labels_per_task"):
        simulate.dawid_skene(10, 3, 2, labels_per_task=4)
    with pytest.raises(ValueError, match="assignment"):
        simulate.assign_workers(10, 5, 2, "circular")


# ---------------------------------------------------------------------- worker kinds
def test_spammers_answer_independently_of_truth(mixed):
    spam = mixed.planted.kind[mixed.worker] == "spammer"
    table = np.zeros((3, 3))
    np.add.at(table, (mixed.truth[mixed.task[spam]], mixed.label[spam]), 1)
    assert stats.chi2_contingency(table)[1] > 1e-3
    # whereas diligent workers' answers depend on the truth
    dil = mixed.planted.kind[mixed.worker] == "diligent"
    table = np.zeros((3, 3))
    np.add.at(table, (mixed.truth[mixed.task[dil]], mixed.label[dil]), 1)
    assert stats.chi2_contingency(table)[1] < 1e-12


def test_adversaries_are_below_chance_and_permuted(mixed):
    acc = metrics.worker_accuracy(mixed)["accuracy"].to_numpy()
    adv = mixed.planted.kind == "adversary"
    assert np.all(acc[adv] < 1 / 3 - 0.05)
    # each adversary's confusion is a one-coin matrix with permuted columns
    for conf in mixed.planted.confusions[adv]:
        assert np.all(np.sort(conf.max(axis=1)) == conf.max()) and conf.max() >= 0.6
        assert len(set(conf.argmax(axis=1))) == 3 and np.all(conf.argmax(axis=1) != np.arange(3))


def test_fixed_class_workers(mixed):
    for w in np.flatnonzero(mixed.planted.kind == "fixed_class"):
        answers = np.unique(mixed.label[mixed.worker == w])
        assert len(answers) == 1
        assert np.all(mixed.planted.confusions[w][:, answers[0]] == 1.0)


def test_colluders_copy_their_leader(mixed):
    p = mixed.planted
    coll = np.flatnonzero(p.kind == "colluder")
    assert np.all(p.leader[coll][::3] == coll[::3])  # group_size 3: first member leads
    sel = np.isin(mixed.worker, coll)
    group = p.leader[mixed.worker[sel]]
    key = group.astype(np.int64) * mixed.n_tasks + mixed.task[sel]
    # every (group, task) has a single answer
    n_keys = len(np.unique(key))
    assert len(np.unique(key * 3 + mixed.label[sel])) == n_keys
    assert n_keys < sel.sum() * 0.9  # members do meet on tasks
    # spammer leader: the group's answers ignore the truth
    np.testing.assert_allclose(p.confusions[coll], 1 / 3)


def test_partial_colluders_and_custom_base():
    base = WorkerSpec.one_coin(1, accuracy=0.9)
    data = simulate.crowd(
        40_000, 2,
        [WorkerSpec.colluders(4, group_size=4, base=base, copy_prob=0.5),
         WorkerSpec.spammer(4)],
        labels_per_task=4, seed=5,
    )
    p = data.planted
    np.testing.assert_allclose(p.copy_prob, [1, 0.5, 0.5, 0.5, 0, 0, 0, 0])
    np.testing.assert_allclose(p.confusions[:4], [[[0.9, 0.1], [0.1, 0.9]]] * 4)
    err = metrics.confusion_error(empirical_confusions(data), p.confusions)
    assert err["max_abs"] < 0.02
    # members agree with each other more often than independent 0.9 workers would (0.82)
    sub = data.subset(workers=[0, 1])
    counts = sub.labels_per_task()
    both = np.flatnonzero(counts == 2)
    agree = sub.label[sub.task_ptr[both]] == sub.label[sub.task_ptr[both] + 1]
    assert agree.mean() == pytest.approx(0.5 * 1 + 0.5 * 0.82, abs=0.03)


def test_hammer_spammer():
    data = simulate.hammer_spammer(5_000, 50, n_classes=3, labels_per_task=5, hammers=0.3, seed=0)
    acc = metrics.worker_accuracy(data)["accuracy"].to_numpy()
    hammers = data.planted.kind == "one_coin"
    assert hammers.sum() == 15
    assert np.all(acc[hammers] == 1.0)
    assert np.all(np.abs(acc[~hammers] - 1 / 3) < 0.06)


def test_custom_and_given_confusions():
    conf = np.array([[[0.7, 0.2, 0.1], [0.0, 1.0, 0.0], [0.25, 0.25, 0.5]]] * 6)
    data = simulate.dawid_skene(30_000, 6, 3, confusions=conf, seed=1)
    assert np.all(data.planted.kind == "custom")
    np.testing.assert_allclose(data.planted.confusions, conf)
    emp = empirical_confusions(data)
    assert metrics.confusion_error(emp, conf)["max_abs"] < 0.02
    assert np.all(emp[:, 1, [0, 2]] == 0)  # zero-probability answers never drawn
    shared = simulate.dawid_skene(100, 4, 3, labels_per_task=2, confusions=conf[0], seed=1)
    np.testing.assert_allclose(shared.planted.confusions, conf[:4])
    with pytest.raises(ValueError, match="regular workers"):
        simulate.dawid_skene(100, 7, 3, confusions=conf, seed=1)
    with pytest.raises(ValueError, match="sum to 1"):
        WorkerSpec.custom(conf * 2)


def test_many_classes_draws():
    data = simulate.crowd(20_000, 11, [WorkerSpec.diligent(8, accuracy=(0.3, 0.5), concentration=0.3)],
                          labels_per_task=4, seed=2)
    err = metrics.confusion_error(empirical_confusions(data), data.planted.confusions)
    assert err["max_abs"] < 0.06


def test_validation():
    with pytest.raises(ValueError, match="n_workers"):
        simulate.dawid_skene(100, 10, 2, spammers=0.6, adversaries=0.6)
    with pytest.raises(ValueError, match="fraction"):
        simulate.one_coin(100, 10, 2, spammers=2)
    with pytest.raises(ValueError, match="n_classes"):
        simulate.one_coin(100, 10, 1)
    with pytest.raises(ValueError, match="accuracy"):
        simulate.one_coin(100, 10, 2, accuracy=(0.9, 0.6))
    with pytest.raises(TypeError):
        simulate.crowd(100, 2, ["spammer"])
    with pytest.raises(ValueError, match="class_prior"):
        simulate.one_coin(100, 10, 2, class_prior=[1, 2, 3])


def test_scales_vectorised():
    start = time.perf_counter()
    data = simulate.dawid_skene(200_000, 500, 4, labels_per_task=5, seed=0,
                                assignment="regular", colluders=0.1, spammers=0.1)
    assert data.n_labels == 1_000_000
    assert time.perf_counter() - start < 5.0  # ~0.2 s; generous bound for slow CI


@pytest.mark.slow
def test_ten_million_labels():
    start = time.perf_counter()
    data = simulate.dawid_skene(2_000_000, 1_000, 4, labels_per_task=5, seed=0,
                                spammers=0.1, colluders=0.1)
    assert data.n_labels == 10_000_000
    assert time.perf_counter() - start < 20.0
