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


def _in_group(data):
    """Planted colluders whose group has another member (a group of one copies nobody)."""
    leader = data.planted.leader
    size = np.bincount(leader[leader >= 0], minlength=len(leader))
    return (leader >= 0) & (size[np.maximum(leader, 0)] > 1)


def test_colluders_and_below_chance_workers_are_flagged():
    data = simulate.dawid_skene(5000, 30, 3, labels_per_task=6, colluders=0.2, adversaries=0.1, seed=1)
    table = detect_adversaries(data)
    kind = data.planted.kind
    # six colluders in groups of five: the sixth leads a group of one and copies nobody
    assert table["colluding"].to_numpy()[_in_group(data)].all()
    assert _in_group(data).sum() == 5
    assert table["below_chance"].to_numpy()[kind == "adversary"].all()
    honest = (kind == "diligent")
    assert not table["adversary"].to_numpy()[honest].any()


def _batched_crowd(seed, copier=False):
    """Binary crowd answered in separate batches, as in many real collections: 20 batches of
    50 tasks, each answered by its own 20 workers (accuracy 0.55-0.75), so that the worker
    pair graph has 20 components.  With ``copier``, worker 1 copies worker 0's answer 95% of
    the time."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, 1000)
    rows = []
    for batch in range(20):
        tasks = np.arange(batch * 50, batch * 50 + 50)
        answers = {}
        for j in range(20):
            worker = batch * 20 + j
            acc = rng.uniform(0.55, 0.75)
            answer = np.where(rng.random(50) < acc, truth[tasks], 1 - truth[tasks])
            if copier and worker == 1:
                answer = np.where(rng.random(50) < 0.95, answers[0], answer)
            answers[worker] = answer
            rows.append(pd.DataFrame({"task": tasks, "worker": worker, "label": answer}))
    return cl.CrowdLabels.from_frame(pd.concat(rows, ignore_index=True))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_workers_in_separate_batches_are_not_colluders(seed):
    """Before the second-order model was started per connected component of the pair graph,
    its factors diverged on such designs (entries in the thousands) and 40% of the honest
    workers of recidivism_race were reported as colluders."""
    data = _batched_crowd(seed)
    model = second_order_model(data)
    # U_m = A_m (D - d d^T)^(1/2): every entry of an honest worker's factor is below 1
    assert np.abs(model.factors).max() < 1.0
    assert not detect_adversaries(data)["colluding"].any()
    assert not cl.GroupAwareDawidSkene().fit(data).groups_.duplicated().any()


def test_a_copier_is_found_with_its_partner_in_a_batched_crowd():
    data = _batched_crowd(0, copier=True)
    table = detect_adversaries(data)
    assert list(table.index[table["colluding"]]) == [0, 1]
    assert table.loc[0, "partner"] == 1 and table.loc[1, "partner"] == 0


def test_below_chance_workers_do_not_make_their_partners_colluders():
    """10 classes, 3 answers per task: an honest worker and a below-chance one agree on almost
    nothing, as the model expects; a test whose variance came from the model's agreement
    (near 0) alone flagged 8 of 24 honest workers."""
    data = simulate.dawid_skene(4000, 35, 10, labels_per_task=3, colluders=0.2, colluder_group_size=3,
                                adversaries=0.1, seed=1)
    table = detect_adversaries(data)
    assert table["colluding"].to_numpy()[_in_group(data)].all()
    assert not table["adversary"].to_numpy()[data.planted.kind == "diligent"].any()


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
