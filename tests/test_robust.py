"""Spammer / adversary detection and the SpammerFiltered wrapper."""

import numpy as np
import pandas as pd
import pytest

import crowdlearn as cl
from crowdlearn import simulate
from crowdlearn.benchmarking import gold_accuracy
from crowdlearn.diagnostics.detection import detect_adversaries, detect_spammers, second_order_model


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_spammers_found_with_high_sensitivity_and_specificity(seed):
    # the setting of issue 3: N = 10,000, K = 4, M = 20, 25% uniform spammers
    data = simulate.dawid_skene(10_000, 20, 4, labels_per_task=5, spammers=0.25, seed=seed)
    table = detect_spammers(data)
    planted = data.planted.kind == "spammer"
    flag = table["spammer"].to_numpy()
    assert flag[planted].mean() > 0.9
    assert (~flag[~planted]).mean() > 0.9
    # the low-rank factor rows of spammers are near zero, those of honest workers are not
    score = table["score"].to_numpy()
    assert score[planted].max() < 0.5 * score[~planted].min()


@pytest.mark.parametrize("seed", [1, 2])
def test_many_classes_good_workers_are_not_spammers(seed):
    """35 classes, 3 answers per task: a worker right 60-80% of the time fills a sparse
    35 x 35 table whose chi-square test has almost no power, and was flagged as a spammer
    (8 of 15 at seed 1; DS on the rest then fell from 0.70 to 0.51); its agreement with the
    majority, far above chance, says otherwise."""
    from crowdlearn.simulate import WorkerSpec, crowd

    k = 35
    data = crowd(600, k, [WorkerSpec.one_coin(15, (0.6, 0.8)), WorkerSpec.one_coin(5, 1.0 / k)],
                 labels_per_task=3, seed=seed)
    flag = detect_spammers(data)["spammer"].to_numpy()
    assert not flag[:15].any()
    assert flag[15:].sum() >= 3
    filtered = cl.get_method("spammer-filtered")().fit(data)
    assert gold_accuracy(filtered.labels_, data) >= gold_accuracy(cl.DawidSkene().fit(data).labels_, data)


def test_no_spammer_no_flag():
    data = simulate.dawid_skene(5000, 20, 4, labels_per_task=5, accuracy=(0.35, 0.6), seed=3)
    assert not detect_spammers(data)["spammer"].any()


def test_too_few_answers_is_not_evidence():
    # 1-2 answers per task from 60 workers: nobody can be judged a spammer
    data = simulate.dawid_skene(300, 60, 3, labels_per_task=2, spammers=0.3, seed=0)
    table = detect_spammers(data, min_answers=20)
    few = table["basis"] == "too few answers"
    assert few.any()
    assert not table.loc[few, "spammer"].any()


def test_low_rank_model_recovers_spammer_blocks_as_zero():
    data = simulate.dawid_skene(8000, 12, 3, labels_per_task=6, spammers=0.25, seed=4)
    model = second_order_model(data)
    norms = np.linalg.norm(model.factors.reshape(len(model.workers), -1), axis=1)
    spam = data.planted.kind[model.workers] == "spammer"
    assert norms[spam].max() < 0.3 * norms[~spam].min()
    # the fit explains most of the honest covariance
    res = model.residuals()
    honest_pair = ~spam[model.pair_m] & ~spam[model.pair_l]
    tot = (model.blocks[honest_pair] ** 2).sum()
    assert res[honest_pair].sum() < 0.2 * tot


def test_colluders_and_below_chance_workers_are_flagged():
    data = simulate.dawid_skene(5000, 30, 3, labels_per_task=6, colluders=0.2, adversaries=0.1, seed=1)
    table = detect_adversaries(data)
    kind = data.planted.kind
    assert table["colluding"].to_numpy()[kind == "colluder"].all()
    assert table["below_chance"].to_numpy()[kind == "adversary"].all()
    honest = (kind == "diligent")
    assert not table["adversary"].to_numpy()[honest].any()


def test_every_worker_reported_with_unicode_ids():
    data = simulate.dawid_skene(500, 10, 3, seed=0).to_frame()
    data["worker"] = data["worker"].map(lambda w: f"работник-{w}")
    labels = cl.CrowdLabels.from_frame(data)
    for table in (detect_spammers(labels), detect_adversaries(labels)):
        assert table.index.equals(labels.workers)


def test_filtering_spammers_improves_mv_and_keeps_ds():
    data = simulate.dawid_skene(3000, 20, 4, labels_per_task=5, spammers=0.4, accuracy=(0.5, 0.8), seed=7)
    for base, gain in (("mv", 0.01), ("ds", -0.002)):
        plain = gold_accuracy(cl.get_method(base)().fit(data).labels_, data)
        filt = cl.SpammerFiltered(base=base).fit(data)
        assert gold_accuracy(filt.labels_, data) >= plain + gain
        assert filt.spammers_["spammer"].sum() >= 6


def test_filtered_keeps_every_task():
    data = simulate.dawid_skene(400, 12, 3, labels_per_task=3, spammers=0.5, seed=2)
    est = cl.SpammerFiltered(base="mv").fit(data)
    assert est.probas_.index.equals(data.tasks)
    np.testing.assert_allclose(est.probas_.to_numpy().sum(axis=1), 1.0)
    # orphans (all answers from spammers) are reported and still present
    assert set(est.orphans_) <= set(data.tasks)


def test_filtered_accepts_an_estimator_and_does_not_modify_it():
    base = cl.DawidSkene(max_iter=7)
    data = simulate.dawid_skene(1000, 15, 3, spammers=0.2, seed=1)
    est = cl.SpammerFiltered(base=base).fit(data)
    assert not hasattr(base, "labels_")
    assert est.base_.max_iter == 7


def test_filtering_without_spammers_changes_nothing():
    data = simulate.dawid_skene(2000, 15, 4, labels_per_task=5, accuracy=(0.5, 0.8), seed=5)
    for base in ("mv", "ds"):
        plain = cl.get_method(base)().fit(data)
        filt = cl.SpammerFiltered(base=base).fit(data)
        assert filt.n_removed_ == 0 and not filt.spammers_["flag"].any()
        np.testing.assert_allclose(filt.probas_.to_numpy(), plain.probas_.to_numpy())


def test_too_many_classes_flags_nobody():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"task": rng.integers(0, 50, 400), "worker": rng.integers(0, 5, 400),
                          "label": rng.integers(0, 60, 400)})
    table = detect_spammers(frame)
    assert (table["basis"] == "too many classes").all() and not table["flag"].any()
    assert not detect_adversaries(frame)["adversary"].any()
