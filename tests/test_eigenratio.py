"""EigenRatio (Dalvi et al. 2013): one-coin skills from the ratio of two eigenvectors."""

import numpy as np
import pytest

import crowdlearn as cl
from crowdlearn import simulate
from crowdlearn.aggregation.eigenratio import EigenRatio
from crowdlearn.benchmarking import gold_accuracy


@pytest.mark.parametrize("k", [2, 3, 5])
def test_recovers_planted_one_coin_accuracies(k):
    data = simulate.one_coin(3000, 40, k, labels_per_task=5, accuracy=(0.55, 0.9), seed=k)
    est = EigenRatio().fit(data)
    fitted = np.einsum("wkk->wk", est.confusions_).mean(axis=1)
    assert np.abs(fitted - data.planted.accuracy).mean() < 0.04
    np.testing.assert_allclose(est.confusions_.sum(axis=2), 1.0)


def test_adversaries_get_negative_skill_and_help_instead_of_hurting():
    data = simulate.one_coin(3000, 40, 2, labels_per_task=5, accuracy=(0.6, 0.9), adversaries=0.25, seed=0)
    est = EigenRatio().fit(data)
    adv = data.planted.kind == "adversary"
    assert (est.worker_skill_[adv] < 0).all() and (est.worker_skill_[~adv] > 0).all()
    mv = gold_accuracy(cl.MajorityVote().fit(data).labels_, data)
    assert gold_accuracy(est.labels_, data) > mv + 0.1


def test_disconnected_workers_and_components_are_completed():
    # two separate crowds (no shared tasks) plus a lone worker: every worker gets a skill
    a = simulate.one_coin(600, 10, 2, labels_per_task=4, seed=1).to_frame()
    b = simulate.one_coin(600, 10, 2, labels_per_task=4, seed=2).to_frame()
    b["task"] = "b" + b["task"].astype(str)
    b["worker"] = "b" + b["worker"].astype(str)
    a["task"] = a["task"].astype(str)
    a["worker"] = a["worker"].astype(str)
    lone = a.iloc[:1].copy()
    lone["task"], lone["worker"] = "alone", "loner"
    import pandas as pd

    data = cl.CrowdLabels.from_frame(pd.concat([a, b, lone]))
    est = EigenRatio().fit(data)
    assert np.all(np.isfinite(est.worker_skill_))
    assert est.probas_.index.equals(data.tasks)
