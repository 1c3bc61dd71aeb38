"""Tests of crowdlearn.simulate: planted parameters are what the data shows."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from scipy import stats

from crowdlearn import metrics, simulate
from crowdlearn.core.data import CrowdLabels
from crowdlearn.simulate import WorkerSpec


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
    assert set(p.as_dict()) == {
        "confusions", "class_prior", "kind", "group", "leader", "copy_prob", "outlier_prob",
        "outlier_class",
    }
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


def test_a_million_answers_in_one_call():
    # its speed is measured in benchmarks/, not asserted here
    data = simulate.dawid_skene(200_000, 500, 4, labels_per_task=5, seed=0,
                                assignment="regular", colluders=0.1, spammers=0.1)
    assert data.n_labels == 1_000_000
    assert np.bincount(data.task).min() == np.bincount(data.task).max() == 5


@pytest.mark.slow
def test_ten_million_labels():
    data = simulate.dawid_skene(2_000_000, 1_000, 4, labels_per_task=5, seed=0,
                                spammers=0.1, colluders=0.1)
    assert data.n_labels == 10_000_000


# ------------------------------------------------------------------ repeats and designs
@pytest.mark.parametrize("kind", ["random", "regular"])
def test_repeats_only_when_asked(kind):
    task, worker = simulate.assign_workers(3_000, 6, 4, kind, seed=3)
    assert len(np.unique(task.astype(np.int64) * 6 + worker)) == len(task)
    task, worker = simulate.assign_workers(3_000, 6, 4, kind, seed=3, allow_repeats=True)
    assert np.all(np.bincount(task) == 4)
    if kind == "regular":
        assert np.all(np.bincount(worker) == 2_000)  # raw configuration model: exact degrees
    assert len(np.unique(task.astype(np.int64) * 6 + worker)) < len(task)  # repeats kept
    # more answers per task than workers: only with repeats
    task, worker = simulate.assign_workers(100, 3, 5, kind, seed=0, allow_repeats=True)
    assert len(task) == 500
    with pytest.raises(ValueError, match="labels_per_task"):
        simulate.assign_workers(100, 3, 5, kind, seed=0)


def test_assignment_seeds_reproducible():
    for kind in ("random", "regular"):
        a = simulate.assign_workers(500, 40, 7, kind, seed=11)
        b = simulate.assign_workers(500, 40, 7, kind, seed=11)
        c = simulate.assign_workers(500, 40, 7, kind, seed=12)
        np.testing.assert_array_equal(a[1], b[1])
        assert not np.array_equal(a[1], c[1])


def test_given_design_and_truth():
    task = np.array([2, 0, 0, 1, 2])
    worker = np.array([1, 0, 2, 1, 0])
    truth = np.array([1, 0, 1])
    X = np.arange(6.0).reshape(3, 2)
    data = simulate.crowd(3, 2, WorkerSpec.hammer(3), assignment=(task, worker), truth=truth,
                          features=X, seed=0)
    assert list(zip(data.task, data.worker)) == [(0, 0), (0, 2), (1, 1), (2, 0), (2, 1)]
    np.testing.assert_array_equal(data.label, truth[data.task])  # hammers are always right
    np.testing.assert_array_equal(data.features, X)
    np.testing.assert_allclose(data.planted.class_prior, [1 / 3, 2 / 3])
    with pytest.raises(ValueError, match="repeats"):
        simulate.crowd(3, 2, WorkerSpec.hammer(3), assignment=([0, 0], [1, 1]), seed=0)
    rep = simulate.crowd(3, 2, WorkerSpec.hammer(3), assignment=([0, 0], [1, 1]), seed=0,
                         allow_repeats=True)
    assert rep.n_labels == 2
    with pytest.raises(ValueError, match="truth"):
        simulate.crowd(3, 2, WorkerSpec.hammer(3), truth=[0, 2, 1], seed=0)


# ------------------------------------------------------------------- worker models
def test_one_coin_worker_matches_its_spec():
    data = simulate.crowd(40_000, 4, [WorkerSpec.one_coin(5, accuracy=[0.3, 0.5, 0.7, 0.9, 1.0])],
                          labels_per_task=2, seed=4)
    emp = empirical_confusions(data)
    planted = simulate.one_coin_confusions([0.3, 0.5, 0.7, 0.9, 1.0], 4)
    np.testing.assert_allclose(data.planted.confusions, planted)
    # ~4000 answers per (worker, true class): 4 standard errors of a proportion
    assert np.abs(emp - planted).max() < 4 * np.sqrt(0.25 / 4_000)


def test_beta_accuracies_and_dirichlet_spammers():
    data = simulate.crowd(200, 2, [WorkerSpec.one_coin(20_000, simulate.Beta(2.0, 1.0))],
                          labels_per_task=3, seed=0)
    acc = data.planted.confusions[:, 0, 0]
    assert acc.mean() == pytest.approx(2 / 3, abs=0.01)  # Beta(2, 1) mean
    assert acc.var() == pytest.approx(1 / 18, abs=0.003)  # and variance
    spam = simulate.crowd(30_000, 3, [WorkerSpec.spammer(4, concentration=1.0)], labels_per_task=2,
                          seed=1)
    conf = spam.planted.confusions
    np.testing.assert_allclose(conf, conf[:, :1, :].repeat(3, axis=1))  # rows ignore the truth
    assert not np.allclose(conf[0], conf[1])  # one distribution per spammer
    assert metrics.confusion_error(empirical_confusions(spam), conf)["max_abs"] < 0.03


# ----------------------------------------------------------------------- scenarios
def test_hammer_spammer_on_given_truth_and_features():
    truth = np.arange(600) % 3
    X, _ = simulate.class_features(truth, 3, 4, seed=0)
    data = simulate.hammer_spammer(600, 10, 3, labels_per_task=3, hammers=0.3, assignment="random",
                                   truth=truth, features=X, seed=0)
    hammer = data.planted.kind[data.worker] == "one_coin"
    assert (data.planted.kind == "one_coin").sum() == 3
    assert np.all(data.label[hammer] == truth[data.task[hammer]])
    assert abs(np.mean(data.label[~hammer] == truth[data.task[~hammer]]) - 1 / 3) < 0.06
    np.testing.assert_array_equal(data.features, X)


def test_sparse_regular():
    data = simulate.sparse_regular(400, l=3, r=4, spammers=0.2, dense_spammers=2, seed=0)
    assert data.n_workers == 302
    assert np.all(data.labels_per_task() == 5)
    per_worker = data.labels_per_worker()
    assert np.all(per_worker[:300] == 4) and np.all(per_worker[300:] == 400)
    assert len(np.unique(pairs(data))) == data.n_labels
    kind = data.planted.kind
    assert (kind[:300] == "spammer").sum() == 60 and np.all(kind[300:] == "spammer")
    big = simulate.sparse_regular(30_000, l=3, r=3, seed=1)
    acc = big.planted.confusions[:, 0, 0]
    assert acc.mean() == pytest.approx(2 / 3, abs=0.01)  # Beta(2, 1) workers
    with pytest.raises(ValueError, match="divisible"):
        simulate.sparse_regular(401, l=3, r=4)


def test_maxmig_structures():
    truth = np.arange(2000) % 2
    mv = lambda d: np.mean(d.vote_counts().argmax(1) == truth)  # noqa: E731
    for expertise, sizes in (("high", (5, 10, 10)), ("low", (10, 25, 12))):
        ind, nm, co = (simulate.maxmig_structures(2000, s, expertise, truth=truth, seed=0)
                       for s in ("independent", "naive_majority", "correlated"))
        assert (ind.n_workers, nm.n_workers, co.n_workers) == sizes
        assert np.all(ind.labels_per_task() == ind.n_workers)  # every expert labels every item
        assert mv(nm) < 0.6 < mv(ind)  # juniors answering 0 sink majority vote
        assert np.all(nm.label[nm.planted.kind[nm.worker] == "fixed_class"] == 0)
        leader = co.planted.leader
        juniors = np.flatnonzero(co.planted.group == 1)
        assert len(juniors) == sizes[2] - sizes[0] and np.all(co.planted.kind[juniors] == "colluder")
        w = co.to_wide().to_numpy()
        for j in juniors:  # a correlated junior copies senior 0 or senior 1
            assert leader[j] in (0, 1) and np.array_equal(w[:, j], w[:, leader[j]])
        # common random numbers: the seniors answer alike in every structure
        for other in (nm, co):
            np.testing.assert_array_equal(other.to_wide().to_numpy()[:, :sizes[0]], ind.to_wide().to_numpy())
        err = metrics.confusion_error(empirical_confusions(co), co.planted.confusions)
        assert err["max_abs"] < 0.1  # 1000 answers per (worker, class)
        if expertise == "high":
            np.testing.assert_allclose(ind.planted.confusions[0], [[0.6, 0.4], [0.1, 0.9]])
    d = simulate.maxmig_structures(300, "independent", "low", n_classes=4)
    assert d.n_classes == 4
    np.testing.assert_allclose(np.diagonal(d.planted.confusions, axis1=1, axis2=2), 0.4)
    with pytest.raises(ValueError, match="structure"):
        simulate.maxmig_structures(100, "bad")


def test_instance_outliers():
    truth = np.arange(3000) % 3
    X, _ = simulate.class_features(truth, 3, 4, separation=2.0, seed=0)
    data = simulate.instance_outliers(truth, X, outlier_frac=0.1, outlier_prob=0.9, seed=0)
    target = data.planted.outlier_class
    mask = target >= 0
    assert mask.sum() == 300 and np.all(target[mask] != truth[mask])
    out = mask[data.task]
    # outliers: the flagged class with probability 0.9 + 0.1 * 0.2 / 2 (a regular error)
    hit = np.mean(data.label[out] == target[data.task[out]])
    assert hit == pytest.approx(0.91, abs=3 * np.sqrt(0.09 / out.sum()))
    regular = np.mean(data.label[~out] == truth[data.task[~out]])
    assert regular == pytest.approx(0.8, abs=3 * np.sqrt(0.16 / (~out).sum()))
    # the outliers are the items nearest another class's centre
    cent = np.stack([X[truth == c].mean(0) for c in range(3)])
    d = ((X[:, None] - cent[None]) ** 2).sum(-1)
    own = d[np.arange(3000), truth]
    d[np.arange(3000), truth] = np.inf
    assert (own / d.min(1))[mask].min() >= (own / d.min(1))[~mask].max()
    with pytest.raises(ValueError, match="features X"):
        simulate.instance_outliers(truth, None)


def test_annotate_keeps_its_contract():
    y = np.arange(3000) % 3
    conf = simulate.one_coin_confusions([0.6, 0.7, 0.8, 0.9], 3)
    labels, planted = simulate.features.annotate(y, conf, 4, seed=1)
    assert labels.n_labels == 12_000 and np.array_equal(labels.truth, y)
    np.testing.assert_allclose(planted["confusions"], conf)
    assert metrics.confusion_error(empirical_confusions(labels), conf)["max_abs"] < 0.03
    a, _ = simulate.features.annotate(y, conf, 2, seed=3)
    b, _ = simulate.features.annotate(y, conf, 2, seed=3)
    assert np.array_equal(a.label, b.label) and np.array_equal(a.worker, b.worker)


_truth = np.arange(300) % 3
_X = simulate.class_features(_truth, 3, 4, seed=0)[0]
SCENARIOS = {
    "dawid_skene": lambda seed: simulate.dawid_skene(300, 12, 3, seed=seed, spammers=0.2, colluders=0.2),
    "one_coin": lambda seed: simulate.one_coin(300, 12, 3, assignment="regular", seed=seed),
    "hammer_spammer": lambda seed: simulate.hammer_spammer(300, 12, 3, seed=seed),
    "sparse_regular": lambda seed: simulate.sparse_regular(300, 3, 4, dense_spammers=1, seed=seed),
    "maxmig_structures": lambda seed: simulate.maxmig_structures(300, "correlated", "low", seed=seed),
    "instance_outliers": lambda seed: simulate.instance_outliers(_truth, _X, seed=seed),
    "annotate": lambda seed: simulate.annotate(_truth, simulate.one_coin_confusions([0.7] * 5, 3), 3,
                                               seed=seed)[0],
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_is_seeded_and_has_no_repeated_pairs(name):
    a, b, c = SCENARIOS[name](5), SCENARIOS[name](5), SCENARIOS[name](6)
    for field in ("task", "worker", "label", "truth"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    np.testing.assert_array_equal(a.planted.confusions, b.planted.confusions)
    assert not np.array_equal(a.label, c.label)
    assert len(np.unique(pairs(a))) == a.n_labels
    assert isinstance(a, simulate.SimulatedLabels)
    np.testing.assert_allclose(a.planted.confusions.sum(axis=2), 1.0)
