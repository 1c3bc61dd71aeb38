"""model_consensus: planted recovery, weights, alignment of tasks and classes, bad input."""

import numpy as np
import pandas as pd
import pytest

from crowdlearn import MajorityVote
from crowdlearn.core.data import CrowdLabels
from crowdlearn.diagnostics import model_consensus

ONE = ("one_coin", "temperature")


def simulate(model_acc=0.7, n=400, k=4, m=20, r=3, seed=0, good_classes=None):
    """One-coin crowd of known accuracy and a classifier right with ``model_acc`` (per class
    with ``good_classes``: right on those, chance elsewhere)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    acc = rng.uniform(0.35, 0.85, m)
    task = np.repeat(np.arange(n), r)
    worker = np.concatenate([rng.choice(m, r, replace=False) for _ in range(n)])
    right = rng.random(n * r) < acc[worker]
    label = np.where(right, y[task], (y[task] + rng.integers(1, k, n * r)) % k)
    if good_classes is None:
        macc = np.full(k, model_acc)
    else:
        macc = np.where(np.isin(np.arange(k), good_classes), model_acc, 0.0)
    ok = rng.random(n) < macc[y]
    pred = np.where(ok, y, (y + rng.integers(1, k, n)) % k)
    logits = rng.normal(0, 1, (n, k))
    logits[np.arange(n), pred] += 2.0
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    data = CrowdLabels.from_codes(task, worker, label, n_tasks=n, n_workers=m, n_classes=k)
    true_acc = np.bincount(worker, right, m) / np.bincount(worker, minlength=m)
    return data, p, y, true_acc, right


def codes(data, res):
    return data.classes.get_indexer(res.consensus.reindex(data.tasks))


def test_weight_grows_with_model_accuracy_and_consensus_beats_mv_and_model():
    weights = []
    for model_acc in (0.25, 0.6, 0.9):
        data, p, y, _, _ = simulate(model_acc)
        res = model_consensus(data, p, variant=ONE)
        weights.append(res.model_weight)
        if model_acc >= 0.6:
            acc = np.mean(codes(data, res) == y)
            mv = np.mean(data.classes.get_indexer(MajorityVote().fit(data).labels_) == y)
            assert acc > mv + 0.02
            assert acc > np.mean(p.argmax(axis=1) == y) + 0.02
    assert weights[0] < weights[1] < weights[2]
    assert weights[0] < 0.3  # a classifier at chance level is nearly ignored


def test_vector_calibration_trusts_the_classes_the_model_knows():
    data, p, y, _, _ = simulate(0.95, good_classes=[0, 1], seed=3)
    res = model_consensus(data, p, variant=("one_coin", "vector"))
    beta = res.model_weights.to_numpy()
    assert beta[[0, 1]].min() > beta[[2, 3]].max()


def test_quality_scores_rank_annotators_and_annotations():
    data, p, y, true_acc, right = simulate(0.7, seed=1)
    res = model_consensus(data, p, variant=ONE)
    q = res.annotators["quality"].reindex(data.workers).to_numpy()
    assert np.corrcoef(q, true_acc)[0, 1] > 0.8
    ann = res.annotations["quality"].to_numpy()
    # annotations follow the data's (task-sorted) answer order
    assert (res.annotations["worker"].to_numpy() == data.workers.take(data.worker)).all()
    assert ann[right].mean() > ann[~right].mean() + 0.3
    # consensus quality is calibrated-ish: confident tasks are more often right
    conf = res.tasks["quality"].reindex(data.tasks).to_numpy()
    hit = codes(data, res) == y
    assert hit[conf > 0.9].mean() > hit[conf < 0.6].mean()
    assert res.annotators["weight"].corr(pd.Series(true_acc, index=data.workers)) > 0.8


def test_auto_selection_is_deterministic_and_names_its_scores():
    data, p, _, _, _ = simulate(0.7, n=150, m=10, seed=2)
    a = model_consensus(data, p, n_folds=2, random_state=4)
    b = model_consensus(data, p, n_folds=2, random_state=4)
    assert a.selection is not None and len(a.selection) == 4
    assert np.isfinite(a.selection["held_out_loglik"]).all()
    assert (a.worker_model, a.calibration) in set(
        zip(a.selection["worker_model"], a.selection["calibration"]))
    pd.testing.assert_frame_equal(a.tasks, b.tasks)
    pd.testing.assert_frame_equal(a.annotators, b.annotators)
    pd.testing.assert_frame_equal(a.selection, b.selection)


def test_frame_input_aligns_by_task_and_class_and_keeps_unanswered_tasks():
    data, p, _, _, _ = simulate(0.7, n=120, m=10, seed=5)
    base = model_consensus(data, p, variant=ONE)
    frame = pd.DataFrame(p, index=data.tasks, columns=data.classes)
    extra = pd.DataFrame([[0.7, 0.1, 0.1, 0.1], [0.1, 0.1, 0.1, 0.7]],
                         index=["new1", "new2"], columns=data.classes)
    # shuffled rows and columns, plus two tasks nobody answered
    shuffled = pd.concat([frame, extra]).sample(frac=1.0, random_state=0)
    shuffled = shuffled[list(reversed(shuffled.columns))]
    res = model_consensus(data, shuffled, variant=ONE)
    assert set(res.tasks.index) == set(data.tasks) | {"new1", "new2"}
    assert len(res.tasks) == data.n_tasks + 2
    np.testing.assert_allclose(res.probas.loc[data.tasks].to_numpy(), base.probas.to_numpy(), atol=1e-6)
    new = res.tasks.loc[["new1", "new2"]]
    assert (new["n_answers"] == 0).all() and new["agreement"].isna().all()
    assert list(new["consensus_label"]) == [0, 3]
    # a Series of probability vectors indexed by task aligns the same way
    series = pd.Series(list(pd.concat([frame, extra]).to_numpy()), index=list(data.tasks) + ["new1", "new2"])
    from_series = model_consensus(data, series.iloc[::-1], variant=ONE)
    pd.testing.assert_frame_equal(from_series.probas.loc[res.probas.index], res.probas, atol=1e-6)
    # unanswered tasks get the calibrated model: softmax(beta log p + b)
    s = res.model_weights.to_numpy() * np.log(extra.to_numpy()) + res.model_bias.to_numpy()
    cal = np.exp(s - s.max(axis=1, keepdims=True))
    np.testing.assert_allclose(res.probas.loc[["new1", "new2"]].to_numpy(),
                               cal / cal.sum(axis=1, keepdims=True), atol=1e-9)


def test_long_frame_labels_and_string_ids():
    df = pd.DataFrame({"task": ["a", "a", "b", "b", "c"], "worker": ["u", "v", "u", "v", "v"],
                       "label": ["x", "x", "y", "x", "y"]})
    probs = pd.DataFrame({"x": [0.9, 0.2, 0.4], "y": [0.1, 0.8, 0.6]}, index=["a", "b", "c"])
    res = model_consensus(df, probs, variant=ONE)
    assert list(res.tasks.index) == ["a", "b", "c"]
    assert res.consensus["a"] == "x"
    assert len(res.annotations) == 5
    assert set(res.annotators.index) == {"u", "v"}


@pytest.mark.parametrize(
    "probs, match",
    [
        (np.full((3, 2), 0.5), r"shape \(n_tasks, n_classes\) = \(2, 2\)"),
        (pd.DataFrame({"x": [0.5], "y": [0.5]}, index=["a"]), r"no row for 1 answered task.*'b'"),
        (pd.DataFrame({"x": [0.5, 0.5], "z": [0.5, 0.5]}, index=["a", "b"]), r"no column .*\['y'\]"),
        (pd.DataFrame({"x": [0.5, 0.9], "y": [0.5, 0.5]}, index=["a", "b"]), r"summing to 1.*task 'b'"),
        (pd.DataFrame({"x": [0.5, np.nan], "y": [0.5, 0.5]}, index=["a", "b"]), r"task 'b'"),
        (np.array([[0.5, 0.5], [-0.1, 1.1]]), r"row position 1"),
        (pd.Series([0.5, 0.5], index=["a", "b"]), "vector of 2 class probabilities.*task 'a'"),
        (pd.DataFrame({"x": [0.5, 0.5], "y": [0.5, 0.5]}, index=["a", "a"]), "more than one row"),
    ],
)
def test_misaligned_or_bad_probabilities_raise_one_clear_error(probs, match):
    df = pd.DataFrame({"task": ["a", "b"], "worker": ["u", "u"], "label": ["x", "y"]})
    with pytest.raises(ValueError, match=match):
        model_consensus(df, probs, variant=ONE)


def test_bad_settings_raise():
    df = pd.DataFrame({"task": ["a", "b"], "worker": ["u", "u"], "label": ["x", "y"]})
    p = np.full((2, 2), 0.5)
    with pytest.raises(ValueError, match="variant"):
        model_consensus(df, p, variant=("two_coin", "temperature"))
    with pytest.raises(ValueError, match="n_folds"):
        model_consensus(df, p, n_folds=1)
    with pytest.raises(ValueError, match="alpha"):
        model_consensus(df, p, alpha=-1.0)


def test_a_class_nobody_answered_is_kept_from_the_probabilities():
    df = pd.DataFrame({"task": ["a", "b", "c"], "worker": ["u", "v", "u"], "label": ["x", "y", "x"]})
    probs = pd.DataFrame({"x": [0.6, 0.2, 0.1], "y": [0.3, 0.7, 0.1], "z": [0.1, 0.1, 0.8]},
                         index=["a", "b", "c"])
    res = model_consensus(df, probs, variant=ONE)
    assert list(res.probas.columns) == ["x", "y", "z"]
    np.testing.assert_allclose(res.probas.sum(axis=1), 1.0)
    assert res.tasks["model_share"].between(0, 1).all()


def test_auto_picks_the_full_confusion_model_when_annotators_confuse_classes_alike():
    rng = np.random.default_rng(7)
    n, k, m, r = 400, 4, 12, 3
    y = rng.integers(0, k, n)
    conf = np.empty((m, k, k))
    for w in range(m):  # each annotator mistakes class j for class j + 1 only
        a = rng.uniform(0.5, 0.8)
        conf[w] = np.full((k, k), 0.02) + np.diag(np.full(k, a))
        conf[w][np.arange(k), (np.arange(k) + 1) % k] += 1 - a
        conf[w] /= conf[w].sum(axis=1, keepdims=True)
    task = np.repeat(np.arange(n), r)
    worker = np.concatenate([rng.choice(m, r, replace=False) for _ in range(n)])
    label = np.minimum((rng.random(n * r)[:, None] > conf[worker, y[task]].cumsum(axis=1)).sum(axis=1), k - 1)
    data = CrowdLabels.from_codes(task, worker, label, n_tasks=n, n_workers=m, n_classes=k)
    p = np.full((n, k), 1.0 / k)  # an uninformative classifier
    full = model_consensus(data, p, n_folds=3)
    assert full.worker_model == "full"
    one_coin_data, p1, _, _, _ = simulate(0.7, n=300, m=12, seed=8)
    assert model_consensus(one_coin_data, p1, n_folds=3).worker_model == "one_coin"
    # with the structure learned, the consensus beats the majority vote
    mv = data.classes.get_indexer(MajorityVote().fit(data).labels_)
    assert np.mean(codes(data, full) == y) > np.mean(mv == y) + 0.05


def test_probabilities_indexed_by_numbers_score_tasks_read_as_text():
    # answers read from a CSV name task "0"; a classifier's frame read with pandas names it 0
    df = pd.DataFrame({"task": ["0", "0", "1", "1", "2"], "worker": ["u", "v", "u", "v", "v"],
                       "label": ["x", "x", "y", "x", "y"]})
    probs = pd.DataFrame({"x": [0.9, 0.2, 0.4, 0.5], "y": [0.1, 0.8, 0.6, 0.5]}, index=[0, 1, 2, 3])
    res = model_consensus(df, probs, variant=ONE)
    same = model_consensus(df, probs.set_axis(["0", "1", "2", "3"], axis=0), variant=ONE)
    np.testing.assert_allclose(res.probas.to_numpy(), same.probas.to_numpy())
    # the answered tasks as the answers name them; a task nobody answered keeps its own id
    assert list(res.probas.index) == ["0", "1", "2", 3]
