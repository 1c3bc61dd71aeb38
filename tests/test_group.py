"""GroupAwareDawidSkene: dependent workers sharing a hidden group label."""

import numpy as np
import pandas as pd
import pytest

import crowdlearn as cl
from crowdlearn import simulate
from crowdlearn.aggregation.group import estimate_worker_groups
from crowdlearn.benchmarking import gold_accuracy
from crowdlearn.simulate import WorkerSpec


def _colluding_crowd(seed):
    specs = [
        WorkerSpec.diligent(15, (0.6, 0.8)),
        WorkerSpec.colluders(12, group_size=6, base=WorkerSpec.one_coin(12, (0.5, 0.6)), copy_prob=0.95),
    ]
    return simulate.crowd(3000, 3, specs, labels_per_task=6, seed=seed)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_groups_are_recovered(seed):
    data = _colluding_crowd(seed)
    groups = estimate_worker_groups(data).to_numpy()
    leader = data.planted.leader
    for lead in np.unique(leader[leader >= 0]):
        members = np.flatnonzero(leader == lead)
        assert len(set(groups[members])) == 1  # one group ...
        assert (groups == groups[members[0]]).sum() == len(members)  # ... and nobody else
    independent = leader < 0
    assert len(set(groups[independent])) == independent.sum()


def test_beats_dawid_skene_when_workers_copy_each_other():
    gains = []
    for seed in range(3):
        data = _colluding_crowd(seed)
        ds = gold_accuracy(cl.DawidSkene().fit(data).labels_, data)
        gds = gold_accuracy(cl.GroupAwareDawidSkene().fit(data).labels_, data)
        gains.append(gds - ds)
    assert min(gains) > 0.0
    assert np.mean(gains) > 0.03


def test_reduces_to_dawid_skene_for_independent_workers():
    data = simulate.dawid_skene(2000, 20, 3, seed=0)
    gds = cl.GroupAwareDawidSkene().fit(data)
    assert gds.groups_.nunique() == data.n_workers
    ds = cl.DawidSkene().fit(data)
    np.testing.assert_allclose(gds.probas_.to_numpy(), ds.probas_.to_numpy(), atol=1e-9)


def test_lone_workers_with_repeated_answers_are_exactly_dawid_skene():
    # repeated (task, worker) answers, some conflicting: each is a separate read, as in DS,
    # and nothing becomes impossible (this produced NaN on duchenne and zencrowd before)
    data = simulate.dawid_skene(400, 10, 4, labels_per_task=4, seed=3)
    frame = data.to_frame()
    repeats = frame.sample(300, random_state=0).assign(label=lambda f: np.roll(f["label"].to_numpy(), 1))
    both = cl.CrowdLabels.from_frame(pd.concat([frame, repeats], ignore_index=True))
    alone = pd.Series(range(both.n_workers), index=both.workers)
    with np.errstate(invalid="raise"):  # NaN from inf - inf raises
        gds = cl.GroupAwareDawidSkene(groups=alone, max_iter=30, tol=0).fit(both)
    ds = cl.DawidSkene(max_iter=30, tol=0).fit(both)
    np.testing.assert_allclose(gds.probas_.to_numpy(), ds.probas_.to_numpy(), atol=1e-9)
    np.testing.assert_allclose(gds.confusions_, ds.confusions_, atol=1e-9)


def test_given_groups_and_orientation():
    data = _colluding_crowd(0)
    groups = {w: (lead if lead >= 0 else 100 + w) for w, lead in enumerate(data.planted.leader)}
    est = cl.GroupAwareDawidSkene(groups=groups).fit(data)
    np.testing.assert_allclose(est.confusions_.sum(axis=2), 1.0)
    np.testing.assert_allclose(est.group_confusions_.sum(axis=2), 1.0)
    # lone workers' fidelity is the identity; copiers' fidelity is near-diagonal
    lone = data.planted.leader < 0
    np.testing.assert_allclose(est.fidelity_[lone], np.eye(3)[None].repeat(lone.sum(), 0))
    copier_diag = np.einsum("wkk->wk", est.fidelity_[~lone]).mean()
    assert copier_diag > 0.85
    with pytest.raises(ValueError, match="no group given"):
        cl.GroupAwareDawidSkene(groups={0: 1}).fit(data)


def test_no_pseudo_counts_gives_no_nan_on_sparse_crowds():
    """alpha = diag_alpha = 0: empty confusion rows are uniform, not 0/0 (NaN posteriors)."""
    from crowdlearn import simulate
    from crowdlearn.aggregation.group import GroupAwareDawidSkene

    data = simulate.dawid_skene(n_tasks=60, n_workers=40, n_classes=4, labels_per_task=2, seed=3)
    est = GroupAwareDawidSkene(alpha=0.0, diag_alpha=0.0).fit(data)
    assert np.all(np.isfinite(est.probas_.to_numpy()))
    assert np.all(np.isfinite(est.confusions_))
    np.testing.assert_allclose(est.confusions_.sum(axis=2), 1.0)
