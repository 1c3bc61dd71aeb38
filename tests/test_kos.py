"""KOS (Karger-Oh-Shah message passing): behaviour on simulated and real crowds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import load_shared_text, one_coin_crowd
from scipy.stats import spearmanr
from sklearn.base import clone

from crowdlearn import CrowdLabels
from crowdlearn.aggregation.kos import KOS
from crowdlearn.aggregation.majority_vote import MajorityVote
from crowdlearn.registry import get_method


def accuracy(est, truth):
    return float(np.mean(est.label_codes_ == truth))


# --------------------------------------------------------------------------- binary
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beats_majority_vote_with_adversaries_and_spammers(seed):
    data, truth, _ = one_coin_crowd(1000, 60, per_task=5, k=2, seed=seed)
    kos = KOS().fit(data)
    mv = MajorityVote().fit(data)
    # measured: KOS 0.89-0.92 vs MV 0.70-0.72 on these seeds
    assert accuracy(kos, truth) > accuracy(mv, truth) + 0.12
    assert accuracy(kos, truth) > 0.85


def test_skills_flag_adversaries_and_track_accuracy():
    data, truth, acc = one_coin_crowd(1000, 60, per_task=5, k=2, seed=0)
    skills = KOS().fit(data).skills_.to_numpy()
    assert np.all(np.abs(skills) <= 1 + 1e-12)
    informative = np.abs(acc - 0.5) > 0.1
    assert np.all(np.sign(skills[informative]) == np.sign(acc[informative] - 0.5))
    assert spearmanr(skills, acc).correlation > 0.85


def test_binary_posteriors_sum_to_one_and_are_informative():
    data, truth, _ = one_coin_crowd(1000, 60, per_task=5, k=2, seed=3)
    kos = KOS().fit(data)
    p = kos.probas_.to_numpy()
    assert p.shape == (1000, 2)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    assert np.all((p > 0) & (p < 1))  # never a hard 0/1
    assert len(np.unique(np.round(p[:, 1], 6))) > 50  # graded, not a two-valued vote share
    np.testing.assert_array_equal(kos.label_codes_, p.argmax(axis=1))
    conf = p.max(axis=1)
    right = kos.label_codes_ == truth
    assert conf[right].mean() > conf[~right].mean() + 0.1  # confidence means something


def test_deterministic_under_seed():
    data, _, _ = one_coin_crowd(400, 30, per_task=5, k=2, seed=4)
    a = KOS(random_state=7).fit(data).probas_
    b = KOS(random_state=7).fit(data).probas_
    pd.testing.assert_frame_equal(a, b)
    # the seed drives the N(1, 1) start: visible after one round, washed out after ten
    one_a = KOS(n_iter=1, random_state=1).fit(data).probas_.to_numpy()
    one_b = KOS(n_iter=1, random_state=2).fit(data).probas_.to_numpy()
    assert not np.allclose(one_a, one_b)
    lab_a = KOS(n_iter=30, random_state=1).fit(data).labels_
    lab_b = KOS(n_iter=30, random_state=2).fit(data).labels_
    assert (lab_a == lab_b).mean() > 0.99


def test_iteration_bookkeeping():
    data, _, _ = one_coin_crowd(300, 30, per_task=5, k=2, seed=5)
    fixed = KOS(n_iter=7, tol=0).fit(data)
    assert fixed.n_iter_ == 7 and len(fixed.history_) == 7 and not fixed.converged_
    conv = KOS(n_iter=200, tol=1e-8).fit(data)
    assert conv.converged_ and conv.n_iter_ < 200
    assert conv.history_[-1] < 1e-8
    assert conv.history_[-1] < conv.history_[0]


def test_predict_proba_on_training_answers_matches_fit():
    data, _, _ = one_coin_crowd(500, 40, per_task=5, k=2, seed=6)
    kos = KOS().fit(data)
    pred = kos.predict(data.to_frame())
    assert (pred == kos.labels_).mean() > 0.97
    proba = kos.predict_proba(data.to_frame())
    np.testing.assert_allclose(proba.to_numpy().sum(axis=1), 1.0)


# ----------------------------------------------------------------------- multi-class
def test_multiclass_easy_data_close_to_majority_vote():
    rng = np.random.RandomState(0)
    data, truth, _ = one_coin_crowd(600, 40, per_task=7, k=4, seed=0, acc=rng.uniform(0.6, 0.9, 40))
    kos = KOS().fit(data)
    mv = MajorityVote().fit(data)
    p = kos.probas_.to_numpy()
    assert p.shape == (600, 4)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    # measured: KOS 0.973, MV 0.99 (the "label > l" reduction loses a little)
    assert accuracy(kos, truth) > 0.85
    assert accuracy(kos, truth) > accuracy(mv, truth) - 0.06
    assert set(np.unique(kos.label_codes_)) == {0, 1, 2, 3}


def test_multiclass_with_adversaries_above_chance():
    data, truth, _ = one_coin_crowd(1000, 60, per_task=5, k=4, seed=1)
    kos = KOS().fit(data)
    assert accuracy(kos, truth) > 0.7  # chance is 0.25; measured 0.85
    assert kos.worker_messages_.shape == (60, 3)


# ------------------------------------------------------------------------- contract
def test_edge_cases_and_contract():
    assert get_method("kos") is KOS
    est = KOS(n_iter=3, tol=0.1, random_state=5)
    assert clone(est).get_params() == {"n_iter": 3, "tol": 0.1, "random_state": 5}
    # a task nobody answered gets the uniform distribution
    df = pd.DataFrame({"task": ["a", "a", "b", "b"], "worker": [1, 2, 1, 2], "label": ["x", "y", "y", "y"]})
    data = CrowdLabels.from_frame(df, classes=["x", "y", "z"], all_tasks=["a", "b", "c"])
    p = KOS().fit(data).probas_
    np.testing.assert_allclose(p.loc["c"].to_numpy(), 1 / 3)
    np.testing.assert_allclose(p.sum(axis=1).to_numpy(), 1.0)
    # one class only
    one = pd.DataFrame({"task": [1, 2], "worker": [1, 1], "label": ["x", "x"]})
    assert (KOS().fit(one).labels_ == "x").all()
    # gold is clamped in the output
    data, truth, _ = one_coin_crowd(200, 20, per_task=5, k=2, seed=8)
    gold = pd.Series(1 - truth[:20], index=data.tasks[:20])
    fitted = KOS().fit(data, gold=gold)
    np.testing.assert_array_equal(fitted.label_codes_[:20], 1 - truth[:20])
    with pytest.raises(ValueError):
        KOS(n_iter=-1).fit(data)


def test_tasks_no_message_reaches_follow_their_answers():
    # one worker answering everything: no two workers meet, so every aggregator returns the
    # answers' vote shares (BaseAggregator.fit), with a warning
    lone = pd.DataFrame({"task": [f"t{i}" for i in range(6)], "worker": "w", "label": [i % 2 for i in range(6)]})
    with pytest.warns(UserWarning, match="two different workers"):
        est = KOS().fit(lone)
    assert list(est.labels_) == [i % 2 for i in range(6)]
    np.testing.assert_array_equal(est.probas_.to_numpy().max(axis=1), 1.0)
    # a crowd plus tasks answered once by workers seen nowhere else
    data, truth, _ = one_coin_crowd(300, 30, per_task=5, k=3, seed=9)
    extra = pd.DataFrame({"task": ["x1", "x2", "x3"], "worker": ["solo1", "solo2", "solo3"], "label": [0, 2, 1]})
    df = pd.concat([data.to_frame(), extra], ignore_index=True)
    est = KOS().fit(df)
    assert list(est.labels_.loc[["x1", "x2", "x3"]]) == [0, 2, 1]
    crowd = est.labels_.loc[list(data.tasks)].to_numpy().astype(int)
    assert np.mean(crowd == truth) > 0.7  # the rest of the crowd is still solved


# ------------------------------------------------------------------------ real data
def test_bluebirds():
    data, gold = load_shared_text("bluebirds")
    labels = KOS().fit(data).labels_.reindex(gold.index).astype(str)
    # measured 0.722 (all seeds; MV 0.759); plain KOS is hurt by the workers' class bias here
    assert (labels == gold).mean() > 0.70


def test_dog():
    data, gold = load_shared_text("dog")
    labels = KOS().fit(data).labels_.reindex(gold.index).astype(str)
    assert (labels == gold).mean() > 0.79  # measured 0.810 (MV 0.825)


# ------------------------------------------------------------- orientation of the messages
def _rows_frame(rows):
    """Task i's answers by workers 0, 1, 2, ... given as a string of digits."""
    return pd.DataFrame(
        [(t, w, int(c)) for t, r in enumerate(rows) for w, c in enumerate(r)],
        columns=["task", "worker", "label"],
    )


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("n_iter", [3, 6, 7, 10, 11])
def test_small_clear_crowd_is_not_reversed(seed, n_iter):
    # the iteration fixes the messages only up to one global sign; on this small complete
    # graph it drifts through zero and comes out reversed (every label flipped at p ~ 0.9)
    rows = ["111", "101", "000", "111", "000", "110"]
    kos = KOS(n_iter=n_iter, tol=0, random_state=seed).fit(_rows_frame(rows))
    # the unanimous tasks always follow their answers (the 2-1 tasks may go either way: on
    # a graph this small the message direction keeps turning with n_iter)
    for task, label in [(0, 1), (2, 0), (3, 1), (4, 0)]:
        assert kos.labels_[task] == label
        assert kos.probas_.loc[task, label] > 0.5
    assert (kos.labels_.to_numpy() == [1, 1, 0, 1, 0, 1]).sum() >= 4
