"""Robustness on unseen data: fairness, active labelling, online EM and the report (QA loop)."""

import numpy as np
import pandas as pd
import pytest

from crowdlearn import CrowdLabels
from crowdlearn.fairness import group_report, worker_bias_table


def test_fairness_compares_ids_labels_and_positive_class_by_value():
    """Labels and ids read from files are text, pd.read_csv gives numbers: positive=1 (the
    default) against labels '0'/'1' counted no positive (every rate 0 or NaN, without a word),
    and a truth or group Series read by pd.read_csv matched no task (no gold, or 'no group')."""
    from crowdlearn.fairness import fair_thresholds

    data = CrowdLabels.from_frame(pd.DataFrame({"task": ["7", "7", "8", "8", "9", "9"], "worker": ["u", "v"] * 3,
                                                "label": ["0", "0", "1", "1", "1", "0"]}))
    pred = pd.Series(["0", "1", "1"], index=["7", "8", "9"])
    truth = pd.Series([0, 1, 0], index=[7, 8, 9])            # as pd.read_csv gives them
    groups = pd.Series(["x", "y", "y"], index=[7, 8, 9])
    rep = group_report(pred, truth, groups)
    assert rep["positive_rate"].tolist() == [0.0, 1.0] and rep["gold"].tolist() == [1, 2]
    assert rep.loc["y", "tpr"] == 1.0 and rep.loc["y", "fpr"] == 1.0 and rep.loc["x", "accuracy"] == 1.0
    assert rep.equals(group_report(pred, truth.set_axis(["7", "8", "9"]).astype(str), groups, positive="1"))
    table = worker_bias_table(data, truth, groups)
    assert table["positives"].sum() == 2 and table.loc[("u", "y"), "fpr"] == 1.0
    proba = pd.DataFrame({"0": [0.9, 0.2, 0.4], "1": [0.1, 0.8, 0.6]}, index=["7", "8", "9"])
    assert fair_thresholds(proba, groups, positive=1, strength=0).tolist() == ["0", "1", "1"]
    # a positive class nobody predicted stays legal
    assert group_report(pred, None, groups, positive="2")["positive_rate"].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("name", ["ds", "onecoin", "ccds", "glad"])
def test_partial_fit_with_an_empty_batch_changes_nothing(name):
    """An empty batch (a polling round with no new answer) raised 'no crowd answers: the table
    is empty', though partial_fit meant to return unchanged."""
    from crowdlearn.registry import get_method

    frame = pd.DataFrame({"task": list("aabbcc"), "worker": list("uvuvuv"), "label": list("001101")})
    empty = frame.iloc[:0]
    est = get_method(name)().partial_fit(empty, classes=["0", "1"])  # a first call: nothing fixed
    est.partial_fit(frame.iloc[:4], classes=["0", "1"])
    before = est.probas_.copy(), est.n_iter_
    est.partial_fit(empty).partial_fit(CrowdLabels.from_frame(frame.iloc[:4]).to_frame().iloc[:0])
    assert est.probas_.equals(before[0]) and est.n_iter_ == before[1]
    est.partial_fit(frame.iloc[4:])
    assert len(est.labels_) == 3 and np.isfinite(est.probas_.to_numpy()).all()
    with pytest.raises(ValueError, match=r"missing column\(s\) \['label'\]"):
        est.partial_fit(empty.drop(columns="label"))


@pytest.mark.parametrize("name", ["ds", "onecoin", "glad"])
def test_partial_fit_after_a_batch_fit_is_refused_not_a_silent_restart(name):
    """partial_fit after fit started a new stream: labels_ then held the batch's tasks only,
    every task of the fit dropped without a word."""
    from sklearn.base import clone

    from crowdlearn.registry import get_method

    frame = pd.DataFrame({"task": list("aabbcc"), "worker": list("uvuvuv"), "label": list("001101")})
    est = get_method(name)().fit(frame)
    with pytest.raises(ValueError, match=r"partial_fit after fit: .*drop the 3 task\(s\) of the fit"):
        est.partial_fit(frame.iloc[:2])
    assert len(est.labels_) == 3  # the fit is kept
    streamed = clone(est).partial_fit(frame.iloc[:4]).partial_fit(frame.iloc[4:])
    assert len(streamed.labels_) == 3
    assert len(streamed.fit(frame).labels_) == 3  # a batch fit after a stream starts afresh


def _worker_model_methods():
    from crowdlearn.core.base import get_tags
    from crowdlearn.registry import get_method, method_kinds

    names = []
    for name, kind in method_kinds().items():
        if kind != "classification":
            continue
        tags = get_tags(get_method(name))
        if tags.has_worker_model and not tags.requires_features:
            names.append(name)
    return names


@pytest.mark.parametrize("name", _worker_model_methods())
def test_predict_proba_of_answers_by_unseen_workers_only_is_the_prior(name):
    """glad, mace and auto (through glad's coin E-step) failed with numpy's 'Cannot cast ufunc
    add output from float64 to int64' when no answer came from a worker of the fit."""
    from crowdlearn import simulate
    from crowdlearn.registry import get_method

    data = simulate.dawid_skene(60, 6, 2, labels_per_task=3, seed=0)
    est = get_method(name)().fit(data)
    unseen = pd.DataFrame({"task": ["n1", "n2"], "worker": ["ghost", "ghost2"],
                           "label": list(data.classes[:2])})
    proba = est.predict_proba(unseen)
    assert proba.shape == (2, 2) and np.isfinite(proba.to_numpy()).all()
    assert np.allclose(proba.sum(axis=1), 1) and np.allclose(proba.iloc[0], proba.iloc[1])
