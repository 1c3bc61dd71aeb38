"""End-to-end learners: shared checks over every registered method, base-API and simulator tests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from sklearn.base import clone  # noqa: E402

from crowdlearn.simulate import features as sf  # noqa: E402
from crowdlearn.core.data import CrowdLabels  # noqa: E402
from crowdlearn.learning import make_classifier, methods  # noqa: E402
from crowdlearn.learning.base import Callback, ProgressBar  # noqa: E402
from crowdlearn.learning.data import TaskAnswers, align_features, annotation_matrix, check_features  # noqa: E402
from crowdlearn.testing.data import clusters, planted_confusions  # noqa: E402
from crowdlearn.testing.learning import confusion_error  # noqa: E402

# the mini-batch-trainer methods of crowdlearn.learning.base and DoctorNet (the shared checks
# of every learner run in test_conformance.py)
MINE = ["two-stage", "crowd-layer", "conal", "ccem", "geocrowdnet-f", "geocrowdnet-w", "tracereg",
        "doctornet"]


@pytest.fixture(autouse=True)
def _one_thread():
    # several processes share two cores: oversubscribed intra-op threads make tiny nets 10x slower
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_registry_and_factory():
    ms = methods()
    for name in MINE:
        assert name in ms
    est = make_classifier("ccem", epochs=3)
    assert type(est).__name__ == "CCEM" and est.epochs == 3
    with pytest.raises(ValueError, match="unknown learning method"):
        make_classifier("nope")


def _data(n=150, seed=0):
    X, y = clusters(n=n, k=3, d=5, seed=seed)
    labels, _ = sf.annotate(y, planted_confusions(6, 3, seed=seed), 3, seed=seed)
    return X, y, labels


def test_crowd_layer_modes_and_orientation():
    X, y, labels = _data(300)
    for mode in ["MW", "VW", "VB", "VW+B"]:
        m = make_classifier("crowd-layer", mode=mode, epochs=15).fit(X, labels)
        assert m.confusions_.shape == (6, 3, 3)
        assert np.allclose(m.confusions_.sum(-1), 1)
        assert np.mean(m.predict(X) == y) > 0.8, mode
    with pytest.raises(ValueError, match="mode"):
        make_classifier("crowd-layer", mode="XX").fit(X, labels)
    m = make_classifier("conal", epochs=15).fit(X, labels)
    assert m.common_confusion_.shape == (3, 3) and m.gates_.shape == (6,)
    assert np.all((m.gates_ > 0) & (m.gates_ < 1)) and np.mean(m.predict(X) == y) > 0.8


def test_asymmetric_confusion_orientation():
    # worker 0 answers class 1 whenever the truth is 0 (and is right otherwise): the recovered
    # matrix must put that mass at [true 0, answered 1], not at its transpose
    X, y = clusters(n=600, k=3, d=6, seed=5)
    conf = np.stack([0.9 * np.eye(3) + 0.1 / 3] * 6)
    conf[0] = np.eye(3)
    conf[0, 0] = [0.0, 1.0, 0.0]
    labels, _ = sf.annotate(y, conf, 4, seed=5)
    for name in ["ccem", "crowd-layer"]:
        m = make_classifier(name, epochs=40, patience=40).fit(X, labels)
        c = m.confusions_[0]
        # the crowd layer's unnormalised logits move slowly from identity: direction only
        lo = 0.7 if name == "ccem" else c[1, 0] + 0.15
        assert c[0, 1] > lo and c[1, 0] < 0.2, (name, np.round(c, 2))


def test_doctornet_beats_majority_vote_then_train_with_one_expert():
    # one 95 %-accurate annotator, six uniform spammers, 4 answers per task: majority vote is
    # wrong on half the tasks; the expert's head decides DoctorNet's averaged prediction
    X, y = clusters(n=1200, k=3, d=8, separation=3.0, seed=4)
    conf = np.full((7, 3, 3), 1 / 3)
    conf[0] = 0.95 * np.eye(3) + 0.025 * (1 - np.eye(3))
    labels, _ = sf.annotate(y[:600], conf, 4, seed=4)
    assert np.mean(labels.vote_counts().argmax(1) == y[:600]) < 0.6
    test = labels.classes[y[600:]]
    dn = make_classifier("doctornet", epochs=60).fit(X[:600], labels)
    mv = make_classifier("two-stage", aggregator="mv", epochs=60).fit(X[:600], labels)
    acc_dn, acc_mv = np.mean(dn.predict(X[600:]) == test), np.mean(mv.predict(X[600:]) == test)
    assert acc_dn > 0.85 and acc_dn > acc_mv + 0.15, (acc_dn, acc_mv)
    w = dn.doctor_weights_
    assert list(w.index) == list(labels.workers) and np.isclose(w.sum(), 1)
    with pytest.raises(ValueError, match="weight_epochs"):
        make_classifier("doctornet", weight_epochs=-1).fit(X[:600], labels)


def test_two_stage_soft_ds_and_estimator():
    from crowdlearn.aggregation.dawid_skene import DawidSkene

    X, y, labels = _data(300)
    for agg in ["ds", DawidSkene()]:
        m = make_classifier("two-stage", aggregator=agg, soft=True, epochs=20).fit(X, labels)
        assert m.confusions_.shape == (6, 3, 3)
        assert np.mean(m.predict(X) == y) > 0.8
    with pytest.raises(ValueError, match="unknown method"):
        make_classifier("two-stage", aggregator="nope", epochs=1).fit(X, labels)


def test_early_stopping_history_and_callbacks(capsys):
    X, y, labels = _data()

    class StopAt(Callback):
        def on_epoch_end(self, est, epoch, logs):
            self.last = logs
            return epoch == 4

    cb = StopAt()
    m = make_classifier("ccem", epochs=50, callbacks=(cb, ProgressBar(every=2))).fit(X, labels)
    assert m.n_epochs_ == 5 and len([h for h in m.history_ if not h.get("refit")]) == 5
    assert m.refit_epochs_ >= 1 and sum(h.get("refit", False) for h in m.history_) == m.refit_epochs_
    assert set(cb.last) >= {"loss", "val_loss", "epoch", "time"}
    assert "epoch 2/50" in capsys.readouterr().err
    # patience: validation loss cannot keep improving with a huge learning rate for long
    m = make_classifier("ccem", epochs=200, patience=2, lr=0.5).fit(X, labels)
    assert m.n_epochs_ < 200 and m.best_epoch_ <= m.n_epochs_ - 1
    m = make_classifier("ccem", epochs=3, validation_fraction=0.0).fit(X, labels)
    assert np.isnan(m.history_[0]["val_loss"]) and m.n_epochs_ == 3
    assert m.refit_epochs_ == 0 and len(m.history_) == 3


@pytest.mark.parametrize("name", ["ccem", "two-stage"])
def test_refit_is_a_full_data_run_for_the_chosen_epochs(name):
    # refit retrains from the same seeded start on every labelled task: exactly the model of a
    # plain run without a validation split for refit_epochs_ epochs
    X, y, labels = _data(300)
    m = make_classifier(name, epochs=30, patience=3).fit(X, labels)
    n_train = len(labels.tasks) - round(0.1 * len(labels.tasks))
    assert m.refit_epochs_ == max(1, round((m.best_epoch_ + 1) * len(labels.tasks) / n_train))
    plain = make_classifier(name, epochs=m.refit_epochs_, validation_fraction=0.0).fit(X, labels)
    np.testing.assert_allclose(m.predict_proba(X), plain.predict_proba(X), atol=1e-6)
    no_refit = make_classifier(name, epochs=30, patience=3, refit=False).fit(X, labels)
    assert no_refit.refit_epochs_ == 0 and no_refit.best_epoch_ == m.best_epoch_
    assert not np.allclose(no_refit.predict_proba(X), m.predict_proba(X))


def test_feature_alignment():
    X, y, labels = _data()
    # a DataFrame indexed by task ids in another order, and labels with features attached
    df = pd.DataFrame(X, index=labels.tasks)[::-1]
    a = make_classifier("ccem", epochs=3).fit(df, labels)
    b = make_classifier("ccem", epochs=3).fit(labels.with_features(X))
    assert np.array_equal(a.predict_proba(X), b.predict_proba(X))
    # integer task ids index a larger X
    sub = labels.subset(tasks=labels.tasks[::2]) if "tasks" in labels.subset.__code__.co_varnames else None
    if sub is not None:
        assert np.array_equal(align_features(X, sub), X[np.asarray(sub.tasks)])
    with pytest.raises(ValueError, match="no row for task"):
        align_features(X[:10], labels, task_index=np.arange(10))
    with pytest.raises(ValueError, match="one row per task"):
        make_classifier("ccem").fit(X[:, :3].T, labels)
    with pytest.raises(ValueError, match="NaN"):
        make_classifier("ccem").fit(np.full_like(X, np.nan), labels)
    with pytest.raises(ValueError, match="no features"):
        make_classifier("ccem").fit(labels)
    with pytest.raises(ValueError, match="not fitted"):
        make_classifier("ccem").predict(X)
    with pytest.raises(ValueError, match="epochs"):
        make_classifier("ccem", epochs=0).fit(X, labels)


def test_feature_rows_are_found_by_value_and_repeated_ids_are_refused():
    # answers read from a text file name task "3", a feature table read with pandas task 3
    labels = CrowdLabels.from_frame(pd.DataFrame({"task": ["5", "3", "10", "1"], "worker": ["a"] * 4,
                                                  "label": [0, 1, 0, 1]}))
    X = pd.DataFrame(np.arange(10.0).reshape(5, 2), index=[1, 3, 5, 10, 11])
    expected = X.loc[[int(t) for t in labels.tasks]].to_numpy()
    assert np.array_equal(align_features(X, labels), expected)
    numbers = CrowdLabels.from_frame(pd.DataFrame({"task": [5, 3, 10, 1], "worker": ["a"] * 4,
                                                   "label": [0, 1, 0, 1]}))
    assert np.array_equal(align_features(X.set_axis(X.index.astype(str)), numbers), X.loc[[1, 3, 5, 10]].to_numpy())
    with pytest.raises(ValueError, match="more than once"):
        align_features(X.to_numpy(), numbers, task_index=[1, 1, 3, 5, 10])


def test_integer_ids_without_task_0_do_not_index_a_larger_X():
    # 1-based ids 2..4 of a 4-row table (task 1 unanswered): positions would be one row off
    labels = CrowdLabels.from_frame(pd.DataFrame({"task": [2, 3, 4], "worker": ["w"] * 3,
                                                  "label": [0, 1, 0]}))
    X = np.arange(8.0).reshape(4, 2)
    with pytest.raises(ValueError, match="start at 0"):
        align_features(X, labels)
    assert np.array_equal(align_features(X, labels, task_index=[1, 2, 3, 4]), X[1:])
    zero_based = CrowdLabels.from_frame(pd.DataFrame({"task": [0, 2, 3], "worker": ["w"] * 3,
                                                      "label": [0, 1, 0]}))
    assert np.array_equal(align_features(X, zero_based), X[[0, 2, 3]])


def test_a_non_finite_feature_is_named_by_its_task_and_column():
    labels = CrowdLabels.from_frame(pd.DataFrame({"task": ["a", "b", "c"], "worker": ["w"] * 3,
                                                  "label": [0, 1, 0]}))
    X = np.ones((3, 2))
    X[1, 1] = np.inf
    with pytest.raises(ValueError, match=r"inf in the row of task 'b', column 1 \(1 row\(s\) of 3"):
        align_features(X, labels)
    with pytest.raises(ValueError, match="in the row of task 'b', column 1"):
        align_features(pd.DataFrame(X, index=["a", "b", "c"]), labels)
    with pytest.raises(ValueError, match="row 1, column 1"):
        check_features(X)  # no ids given: the position


def test_answer_tensors_and_annotation_matrix():
    labels = CrowdLabels.from_codes(np.array([0, 0, 2]), np.array([1, 0, 1]), np.array([2, 1, 0]),
                                    n_tasks=3, n_workers=2, n_classes=3)
    ta = TaskAnswers.from_labels(labels)
    assert ta.mask.tolist() == [[True, True], [False, False], [True, False]]
    assert sorted(zip(ta.workers[0].tolist(), ta.answers[0].tolist())) == [(0, 1), (1, 2)]
    mat = annotation_matrix(labels)
    assert mat.tolist() == [[1, 2], [-1, -1], [-1, 0]]
    t, w, l = annotation_matrix(labels, limit=1)
    assert len(t) == 3
    # a task without answers still gets a posterior row
    X = np.random.default_rng(0).normal(size=(3, 2))
    m = make_classifier("ccem", epochs=2, validation_fraction=0).fit(X, labels)
    assert m.probas_.shape == (3, 3)


def test_clone_with_module_backbone():
    X, y, labels = _data()
    net = torch.nn.Sequential(torch.nn.Linear(5, 3))
    est = make_classifier("crowd-layer", backbone=net, epochs=2)
    c = clone(est)
    c.fit(X, labels)
    # the user's module is never trained in place
    assert torch.equal(net[0].weight, est.backbone[0].weight)
    assert not torch.equal(net[0].weight, c.net_[0].weight)


# ---------------------------------------------------------------- simulated annotators on features (crowdlearn.simulate)
def test_annotate_recovers_planted_frequencies():
    y = np.arange(3000) % 3
    conf = planted_confusions(4, 3, seed=1)
    labels, planted = sf.annotate(y, conf, 4, seed=1)
    assert labels.n_labels == 12000 and np.array_equal(labels.truth, y)
    emp = np.zeros_like(conf)
    np.add.at(emp, (labels.worker, y[labels.task], labels.label), 1)
    emp /= emp.sum(-1, keepdims=True)
    assert confusion_error(emp, conf) < 0.08
    a, _ = sf.annotate(y, conf, 2, seed=3)
    b, _ = sf.annotate(y, conf, 2, seed=3)
    assert np.array_equal(a.label, b.label) and np.array_equal(a.worker, b.worker)
