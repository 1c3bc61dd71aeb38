"""MMLC: oracle estimators, the network, MMLC-owf and MMLC-df."""

import numpy as np
import pandas as pd
import pytest

from crowdlearn.core.data import CrowdLabels
from crowdlearn.mmlc.oracle_estimators import (
    ESTIMATORS, bandwidths, estimate_oracle, kde_mode_1d, kde_mode_multivariate,
)

torch = pytest.importorskip("torch")

from crowdlearn.mmlc import MMLC, MMLCFill, MMLCOracle  # noqa: E402
from crowdlearn.mmlc.fill import density_threshold, fill_gate, fill_labels, sweep_density  # noqa: E402
from crowdlearn.mmlc.worker_space import plot_worker_space, worker_space  # noqa: E402

SMALL = dict(n_experts=4, expert_hidden=(16,), expert_out=8, tower_hidden=(8,), epochs=40, batch_size=64, lr=1e-2)


def _attach_features(data: CrowdLabels, seed: int = 0, noise: float = 0.5) -> CrowdLabels:
    """Features that reveal the truth up to Gaussian noise (class centroids 3 apart)."""
    rng = np.random.default_rng(seed)
    centres = 3.0 * np.eye(data.n_classes, 6)
    return data.with_features(centres[data.truth] + noise * rng.standard_normal((data.n_tasks, 6)))


def _crowd(accs, n_tasks=150, k=3, per_task=None, seed=0):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, n_tasks)
    W = len(accs)
    rows = []
    for t in range(n_tasks):
        ws = range(W) if per_task is None else rng.choice(W, per_task, replace=False)
        for w in ws:
            lab = truth[t] if rng.random() < accs[w] else (truth[t] + rng.integers(1, k)) % k
            rows.append((f"t{t}", f"w{w}", f"c{lab}"))
    df = pd.DataFrame(rows, columns=["task", "worker", "label"])
    gold = pd.Series([f"c{c}" for c in truth], index=[f"t{t}" for t in range(n_tasks)])
    data = CrowdLabels.from_frame(df, classes=[f"c{c}" for c in range(k)], truth=gold)
    return _attach_features(data, seed)


# ----------------------------------------------------------- oracle estimators
def _cloud(seed=0, mode=(0.7, 0.2, 0.4)):
    """60 points in a tight cluster at ``mode`` plus 40 diffuse points skewed away from it."""
    rng = np.random.default_rng(seed)
    dense = np.asarray(mode) + 0.02 * rng.standard_normal((60, 3))
    diffuse = rng.uniform(0.0, 1.0, (40, 3)) ** 0.3  # mass pushed towards 1: the mean is biased
    return np.vstack([dense, diffuse]), np.asarray(mode)


@pytest.mark.parametrize("method", ["kde", "kde-multivariate", "weighted-kde", "weighted-kde-multivariate"])
@pytest.mark.parametrize("bw", ["scott", "silverman"])
def test_kde_estimators_find_the_dense_mode(method, bw):
    pts, mode = _cloud()
    o = estimate_oracle(pts, method, weights=np.ones(len(pts)), bandwidth=bw)
    assert np.max(np.abs(o - mode)) < 0.04, (method, bw, o)
    # the mean is pulled towards the diffuse mass: the test can tell the estimators apart
    assert np.max(np.abs(pts.mean(0) - mode)) > 0.1


def test_mean_median_and_weights():
    pts = np.array([[0.0], [1.0], [2.0], [10.0]])
    assert estimate_oracle(pts, "mean")[0] == pytest.approx(3.25)
    assert estimate_oracle(pts, "median")[0] == pytest.approx(1.5)
    w = np.array([1, 1, 1, 7.0])
    assert estimate_oracle(pts, "weighted-mean", weights=w)[0] == pytest.approx(7.3)
    assert estimate_oracle(pts, "weighted-median", weights=w)[0] > 2.0
    # unweighted methods ignore weights
    assert estimate_oracle(pts, "mean", weights=w)[0] == pytest.approx(3.25)
    # heavy weight on a far point moves the weighted KDE mode there
    pts2 = np.r_[0.5 + 0.01 * np.arange(10), [5.0]][:, None]
    assert kde_mode_1d(pts2[:, 0]) == pytest.approx(0.545, abs=0.05)
    assert kde_mode_1d(pts2[:, 0], weights=np.r_[np.ones(10), 100.0], bandwidth=0.1) == pytest.approx(5.0, abs=0.05)


def test_bandwidth_rules_and_degenerate_points():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((400, 2))
    h = bandwidths(x, rule="scott")
    assert np.allclose(h, x.std(0) * 400 ** -0.2)
    assert np.all(bandwidths(x, rule="silverman") < h)
    assert np.allclose(bandwidths(x, rule=0.3), 0.3)
    const = np.full((5, 2), 0.25)
    for m in ESTIMATORS:
        assert np.allclose(estimate_oracle(const, m, weights=np.arange(1, 6)), 0.25)
    assert np.allclose(kde_mode_multivariate(const), 0.25)


@pytest.mark.parametrize("bad", [
    dict(method="nope"), dict(bandwidth="wide"), dict(bandwidth=-1.0), dict(weights=[1, 2]),
])
def test_estimator_bad_input(bad):
    pts = np.random.default_rng(0).random((6, 2))
    with pytest.raises(ValueError):
        estimate_oracle(pts, **{"method": "kde", **bad})
    with pytest.raises(ValueError):
        estimate_oracle(np.array([[np.nan, 1.0]]), "mean")


# ---------------------------------------------------------------- the network
def test_mmlc_learns_workers_and_is_deterministic():
    data = _crowd([1.0, 1.0, 0.9, 0.5, 0.4], n_tasks=90)
    a = MMLC(**SMALL, random_state=3).fit(data)
    b = MMLC(**SMALL, random_state=3).fit(data)
    pa = a.predict_proba(data.features, a.worker_projections_.iloc[0].to_numpy())
    pb = b.predict_proba(data, "w0")
    np.testing.assert_array_equal(pa, pb)
    assert a.worker_projections_.shape == (5, 4)
    np.testing.assert_allclose(a.worker_projections_.sum(axis=1), 1.0, atol=1e-5)  # softmax gate
    np.testing.assert_allclose(pa.sum(1), 1.0, atol=1e-9)
    # worker w0 is perfect: its predicted answers are the truth
    assert np.mean(a.predict_worker(data.features, "w0") == data.truth) > 0.95
    assert a.history_[-1]["loss"] < a.history_[0]["loss"]
    c = MMLC(**SMALL, random_state=4).fit(data)
    assert not np.array_equal(c.worker_projections_.to_numpy(), a.worker_projections_.to_numpy())


def test_mmlc_fit_X_labels_presets_and_errors():
    data = _crowd([0.9] * 4, n_tasks=60)
    X = pd.DataFrame(data.features, index=data.tasks).iloc[::-1]  # any row order, aligned by id
    m = MMLC(**{**SMALL, "gate": "relu", "epochs": 5}).fit(X, data.with_features(None))
    m2 = MMLC(**{**SMALL, "gate": "relu", "epochs": 5}).fit(data)
    np.testing.assert_allclose(m.worker_projections_, m2.worker_projections_, atol=1e-6)
    assert MMLC.preset("music").n_experts == 10 and MMLC.preset("music").gate == "relu"
    assert MMLC.preset("LabelMe", epochs=3).n_experts == 16
    with pytest.raises(ValueError, match="preset"):
        MMLC.preset("cifar")
    with pytest.raises(ValueError, match="features"):
        MMLC().fit(data.with_features(None))
    with pytest.raises(ValueError, match="gate"):
        MMLC(gate="tanh").fit(data)
    with pytest.raises(ValueError, match="projection"):
        m.predict_proba(data.features, np.ones(3))
    # data-driven default sizes
    s = MMLC()._sizes(_crowd([0.9] * 44, n_tasks=5), 124)
    assert s["E"] == 10


# ------------------------------------------------------------------- MMLC-owf
def test_perfect_workers_give_near_perfect_oracle():
    data = _crowd([1.0] * 6, per_task=3, seed=2)
    est = MMLCOracle(model=MMLC(**SMALL)).fit(data)
    assert np.mean(est.label_codes_ == data.truth) > 0.97
    assert est.oracle_.shape == (4,) and est.oracle_.sum() == pytest.approx(1.0)


def test_oracle_beats_majority_on_a_noisy_crowd():
    from crowdlearn.aggregation.majority_vote import MajorityVote

    data = _crowd([0.9, 0.85, 0.8, 0.75, 0.7, 0.4, 0.35], per_task=3, n_tasks=240, seed=5)
    mv = MajorityVote().fit(data)
    est = MMLCOracle(model=MMLC(**{**SMALL, "epochs": 60})).fit(data)
    acc_mv = np.mean(mv.label_codes_ == data.truth)
    acc = np.mean(est.label_codes_ == data.truth)
    assert acc > acc_mv + 0.05, (acc, acc_mv)
    # other estimators without refitting the network
    for m in ("mean", "median", "kde-multivariate"):
        assert np.mean(est.predict_oracle(data.features, m).argmax(1) == data.truth) > acc_mv


def test_oracle_requires_features_with_clear_error():
    data = _crowd([0.9] * 3, n_tasks=20).with_features(None)
    with pytest.raises(ValueError, match="features"):
        MMLCOracle().fit(data)
    with pytest.raises(ValueError, match="estimator"):
        MMLCOracle(estimator="mode").fit(_crowd([0.9] * 3, n_tasks=20))


# -------------------------------------------------------------------- MMLC-df
def test_fill_keeps_real_answers_and_every_task():
    data = _crowd([0.9, 0.8, 0.7, 0.6, 0.9], per_task=2, n_tasks=80, seed=7)
    # one task with features but no answers, and one sparse worker
    extra = CrowdLabels.from_frame(
        pd.concat([data.to_frame(), pd.DataFrame({"task": ["t0"], "worker": ["rare"], "label": ["c0"]})]),
        classes=data.classes, truth=data.truth_series(), all_tasks=list(data.tasks) + ["lonely"],
    )
    feats = np.vstack([data.features, np.zeros((1, 6))])
    extra = extra.with_features(pd.DataFrame(feats, index=list(data.tasks) + ["lonely"]))
    m = MMLC(**SMALL).fit(extra)
    filled = fill_labels(m, extra, b=1)
    real = set(zip(extra.task, extra.worker, extra.label))
    got = set(zip(filled.task, filled.worker, filled.label))
    assert real <= got
    # each filled answer is that worker's own prediction (experts evaluated once for all)
    proj = m.worker_projections_
    for w in range(extra.n_workers):
        new = (filled.worker == w) & ~np.isin(filled.task, extra.task[extra.worker == w])
        if new.any():
            p = m.predict_proba(extra.features[filled.task[new]], proj.loc[extra.workers[w]].to_numpy())
            np.testing.assert_array_equal(extra.classes.get_indexer(m.classes_)[p.argmax(1)], filled.label[new])
    with pytest.raises(ValueError, match="projections"):
        m.predict_workers(extra.features, [np.arange(3)], np.zeros((2, m.n_experts_)))
    pairs = pd.Series(1, index=pd.MultiIndex.from_arrays([filled.task, filled.worker]))
    assert not pairs.index.duplicated().any()
    rare = extra.workers.get_loc("rare")
    assert np.sum(filled.worker == rare) == 1  # sparse worker not filled
    assert filled.n_labels == len(real) + (extra.n_workers - 1) * extra.n_tasks - np.sum(extra.worker != rare)
    est = MMLCFill(base="ds", b=1, model=MMLC(**SMALL)).fit(extra)
    assert list(est.labels_.index) == list(extra.tasks)
    assert np.isfinite(est.probas_.to_numpy()).all()
    table = sweep_density(extra, [0, 5, 1000], base="mv", model=MMLC(**SMALL))
    assert list(table["b"].iloc[1:]) == [0, 5, 1000]
    assert table["density"].iloc[1] > table["density"].iloc[0]
    assert table["n_labels"].iloc[-1] == extra.n_labels  # nobody has > 1000 answers


def test_gate_keeps_filling_only_where_it_helps_on_answers_set_aside():
    # good workers, features that carry nothing: filling makes the aggregate agree less with
    # answers set aside, the gate refuses it and the result is ds on the raw answers
    good = _crowd([0.9, 0.85, 0.8, 0.9, 0.85, 0.8], per_task=3, n_tasks=200, seed=5)
    blind = good.with_features(np.random.default_rng(0).standard_normal((good.n_tasks, 6)))
    est = MMLCFill(base="ds", b=0, model=MMLC(**SMALL)).fit(blind)
    assert not est.gate_["fill"]
    assert est.gate_["agreement_filled"] < est.gate_["agreement_raw"]
    assert est.gate_["held_out"] == pytest.approx(0.2 * blind.n_labels, rel=0.2)
    assert est.filled_.n_labels == blind.n_labels
    from crowdlearn import DawidSkene

    pd.testing.assert_series_equal(est.labels_, DawidSkene().fit(blind).labels_)
    # weak workers, features that reveal the truth: filling helps and is kept
    weak = _crowd([0.5, 0.45, 0.55, 0.5, 0.45, 0.55], per_task=3, n_tasks=200, seed=5)
    est = MMLCFill(base="ds", b=0, model=MMLC(**SMALL)).fit(weak)
    assert est.gate_["fill"]
    assert est.filled_.n_labels == weak.n_tasks * weak.n_workers
    both = fill_gate(weak, b=0, base=["mv", "ds"], model=MMLC(**SMALL))
    assert list(both.index) == ["mv", "ds"]
    assert both.loc["ds"].equals(est.gate_)  # same seed, same split and network
    with pytest.raises(ValueError, match="held_out"):
        fill_gate(weak, held_out=1.0)


def test_median_threshold_fills_only_the_denser_half(monkeypatch):
    data = _crowd([0.9, 0.8, 0.7, 0.6, 0.9], per_task=2, n_tasks=80, seed=3)
    # make the workers' answer counts unequal: drop most answers of two workers
    frame = data.to_frame()
    keep = ~(frame["worker"].isin(["w3", "w4"]) & (np.arange(len(frame)) % 5 != 0))
    sparse = CrowdLabels.from_frame(frame[keep], classes=data.classes, truth=data.truth_series())
    sparse = sparse.with_features(pd.DataFrame(data.features, index=data.tasks).loc[sparse.tasks])
    counts = sparse.labels_per_worker()
    b = density_threshold(sparse, "median")
    assert b == int(np.median(counts))
    est = MMLCFill(base="mv", gate=False, model=MMLC(**SMALL)).fit(sparse)
    assert est.threshold_ == b
    assert est.fill_ratio_ == pytest.approx((est.filled_.n_labels - sparse.n_labels) / sparse.n_labels)
    # filling that dwarfs the real answers gets a warning (limit lowered to this crowd's ratio)
    monkeypatch.setattr("crowdlearn.mmlc.fill.FILL_RATIO_WARNING", est.fill_ratio_ / 2)
    with pytest.warns(UserWarning, match="predicted answers per real answer"):
        MMLCFill(base="mv", gate=False, model=MMLC(**SMALL)).fit(sparse)
    filled_counts = np.bincount(est.filled_.worker, minlength=sparse.n_workers)
    dense = counts > b
    assert np.all(filled_counts[dense] == sparse.n_tasks)  # dense workers answer every task
    np.testing.assert_array_equal(filled_counts[~dense], counts[~dense])  # sparse ones untouched
    with pytest.raises(ValueError, match="median"):
        MMLCFill(b="mean", model=MMLC(**SMALL)).fit(sparse)


def test_worker_space_table_and_plot():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    data = _crowd([1.0, 0.8, 0.5], n_tasks=40)
    est = MMLCOracle(model=MMLC(**{**SMALL, "epochs": 5})).fit(data)
    table = worker_space(est, data)
    assert list(table.index[-1:]) == ["<oracle>"] and table.shape[0] == 4
    assert table.loc["w0", "accuracy"] == pytest.approx(1.0)
    ax = plot_worker_space(est, data)
    assert len(ax.collections) == 2


@pytest.mark.slow
def test_music_oracle_accuracy():
    from conftest import SHARED_DATA
    from crowdlearn.core.io import load_folder

    d = load_folder(SHARED_DATA / "music", with_features=True)
    d = d.subset(d.tasks[d.labels_per_task() > 0])
    est = MMLCOracle().fit(d)
    assert np.mean(est.label_codes_ == d.truth) > 0.75


def test_mmlc_held_out_answers_early_stopping():
    """The learner base's trainer and early-stopping rule: the restored weights are the best
    held-out epoch's, training stops ``patience`` epochs later, and the split is of answers."""
    data = _crowd([0.9, 0.8, 0.6, 0.5], n_tasks=120)
    m = MMLC(**{**SMALL, "epochs": 300, "lr": 3e-2}, validation_fraction=0.3, patience=3, random_state=1).fit(data)
    val = np.array([h["val_loss"] for h in m.history_])
    assert len(m.history_) == m.n_epochs_ < 300
    assert m.n_epochs_ == m.best_epoch_ + 1 + 3
    assert m.best_epoch_ == int(np.argmin(val))
    # the restored network scores the held-out answers at the best recorded criterion
    rng = np.random.default_rng(1)  # the split is the first draw of the seed's generator
    held = np.sort(rng.permutation(data.n_labels)[: int(round(0.3 * data.n_labels))])
    proj = m.worker_projections_.to_numpy()[data.worker[held]]
    p = m.predict_proba(data.features[data.task[held]], proj)
    ce = -np.mean(np.log(p[np.arange(len(held)), data.label[held]]))
    assert ce == pytest.approx(val.min(), rel=1e-4)
    assert not hasattr(m, "probas_")  # a model of the answers, not of the truth
    with pytest.raises(ValueError, match="patience"):
        MMLC(patience=0).fit(data)


def test_predict_worker_unknown_worker_is_one_clear_error():
    # an unseen worker used to raise a bare KeyError from the projections' .loc
    frame = pd.DataFrame({"task": ["a", "a", "b", "b"], "worker": ["w0", "w1", "w0", "w1"],
                          "label": ["x", "x", "y", "x"]})
    X = np.array([[0.0, 1.0], [1.0, 0.0]])
    m = MMLC(epochs=2).fit(X, CrowdLabels.from_frame(frame))
    assert m.predict_worker(X, "w0").shape == (2,)
    with pytest.raises(ValueError, match="worker 'zz' was not seen during fit"):
        m.predict_worker(X, "zz")
    with pytest.raises(ValueError, match="worker 'zz' was not seen during fit"):
        m.predict_proba(X, "zz")


def test_worker_ids_are_found_by_value():
    """Worker "7" (read from a CSV) is the fit's worker 7: predict_proba(X, "7") fell through
    to "projection must be a finite vector", predict_worker called it unseen."""
    frame = pd.DataFrame({"task": ["a", "a", "b", "b"], "worker": [7, 8, 7, 8], "label": ["x", "x", "y", "x"]})
    X = np.array([[0.0, 1.0], [1.0, 0.0]])
    m = MMLC(epochs=2).fit(X, CrowdLabels.from_frame(frame))
    np.testing.assert_array_equal(m.predict_proba(X, "7"), m.predict_proba(X, 7))
    np.testing.assert_array_equal(m.predict_worker(X, "8"), m.predict_worker(X, 8))
