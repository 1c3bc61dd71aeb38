"""Hierarchical Dawid-Skene (``hds``): empirical-Bayes population prior, starts, real data."""

import numpy as np
import pandas as pd
import pytest

import crowdlearn as cl
from crowdlearn.aggregation import hierarchical_ds as hds_module
from crowdlearn.aggregation.hierarchical_ds import (
    EVIDENCE_MARGIN,
    HierarchicalDawidSkene,
    diagonal_floor,
    dirichlet_multinomial_loglik,
    fit_dirichlet_rows,
)
from crowdlearn.benchmarking import gold_accuracy
from conftest import SHARED_DATA, load_shared, skip_missing


def _population_crowd(n_tasks, n_workers, per_task, mu, strength, seed, sparse_workers=0):
    """Workers' confusion rows drawn from Dirichlet(strength * mu[j]); returns frame, truth, confusions."""
    rng = np.random.default_rng(seed)
    k = mu.shape[0]
    conf = np.stack([[rng.dirichlet(strength * mu[j]) for j in range(k)] for _ in range(n_workers)])
    truth = rng.integers(0, k, n_tasks)
    rows = []
    for t in range(n_tasks):
        for w in rng.choice(n_workers - sparse_workers, per_task, replace=False):
            rows.append((t, w, rng.choice(k, p=conf[w, truth[t]])))
    for i, w in enumerate(range(n_workers - sparse_workers, n_workers)):  # two answers each
        for t in (2 * i, 2 * i + 1):
            rows.append((t, w, rng.choice(k, p=conf[w, truth[t]])))
    df = pd.DataFrame(rows, columns=["task", "worker", "label"])
    return df, pd.Series(truth, index=range(n_tasks)), conf


MU = np.array([[0.8, 0.15, 0.05], [0.1, 0.7, 0.2], [0.05, 0.25, 0.7]])


def test_fit_dirichlet_rows_recovers_a_planted_dirichlet_from_counts():
    rng = np.random.default_rng(0)
    alpha = 12.0 * MU
    probs = np.stack([[rng.dirichlet(alpha[j]) for j in range(3)] for _ in range(3000)])
    counts = np.stack([[rng.multinomial(30, probs[w, j]) for j in range(3)] for w in range(3000)]).astype(float)
    est = fit_dirichlet_rows(counts, np.ones((3, 3)), max_iter=2000, tol=1e-10)
    np.testing.assert_allclose(est / est.sum(1, keepdims=True), MU, atol=0.01)
    np.testing.assert_allclose(est.sum(1), 12.0, rtol=0.1)
    # the estimate is a maximum of the Dirichlet-multinomial likelihood
    best = dirichlet_multinomial_loglik(counts, est)
    for scale in (0.8, 1.25):
        assert dirichlet_multinomial_loglik(counts, est * scale) < best


def test_recovers_the_planted_population_and_strength():
    df, truth, _ = _population_crowd(3000, 60, 5, MU, 10.0, seed=1)
    est = HierarchicalDawidSkene().fit(df)
    np.testing.assert_allclose(est.population_.to_numpy(), MU, atol=0.04)
    assert np.all((est.strength_ > 5.0) & (est.strength_ < 20.0)), est.strength_
    acc = (est.labels_.sort_index().to_numpy() == truth.to_numpy()).mean()
    ds = (cl.DawidSkene().fit(df).labels_.sort_index().to_numpy() == truth.to_numpy()).mean()
    assert acc >= ds - 0.005


def test_sparse_workers_borrow_the_population_and_dense_workers_keep_their_own():
    df, truth, conf = _population_crowd(2000, 40, 4, MU, 6.0, seed=2, sparse_workers=10)
    est = HierarchicalDawidSkene().fit(df)
    pos = {w: i for i, w in enumerate(est.skills_.index)}
    pop = est.population_.to_numpy()
    dense = [pos[w] for w in range(30)]
    sparse = [pos[w] for w in range(30, 40)]
    fitted = est.confusions_
    # a two-answer worker sits near the population; a dense worker near its planted matrix
    assert np.abs(fitted[sparse] - pop).mean() < 0.05
    assert np.abs(fitted[dense] - conf[:30]).mean() < np.abs(pop - conf[:30]).mean() / 2


def test_starts_are_compared_by_evidence_and_a_given_init_replaces_them():
    df, _, _ = _population_crowd(800, 20, 4, MU, 8.0, seed=3)
    est = HierarchicalDawidSkene().fit(df)
    assert list(est.starts_.index) == ["mv", "spectral"]
    ev = est.starts_["evidence"]
    expected = "spectral" if ev["spectral"] > ev["mv"] + EVIDENCE_MARGIN else "mv"
    assert est.init_ == expected and est.evidence_ == pytest.approx(ev[expected])
    init = np.full((800, 3), 1 / 3)
    assert list(HierarchicalDawidSkene().fit(df, init=init).starts_.index) == ["init"]
    with pytest.raises(ValueError, match="unknown start"):
        HierarchicalDawidSkene(starts=("mv", "best")).fit(df)


def test_a_start_behind_at_equal_effort_is_abandoned_and_the_kept_run_is_uninterrupted(monkeypatch):
    # after SCREEN_ITER iterations a later start more than EVIDENCE_MARGIN behind the kept
    # one stops there; the kept start, run in two stages, gives exactly the fit of one run
    # (on this crowd the moment start is ahead of majority vote for its first iterations)
    df, _, _ = _population_crowd(800, 20, 4, MU, 8.0, seed=3)
    alone = HierarchicalDawidSkene(starts=("spectral",)).fit(df)
    rows = {}
    for screen in (1, 2, 3, 5, 8):
        monkeypatch.setattr(hds_module, "SCREEN_ITER", screen)
        est = HierarchicalDawidSkene(starts=("spectral", "mv")).fit(df)
        if est.init_ != "spectral":
            continue
        np.testing.assert_array_equal(est.probas_.to_numpy(), alone.probas_.to_numpy())
        assert est.history_ == alone.history_ and est.n_iter_ == alone.n_iter_
        assert est.evidence_ == alone.evidence_
        rows[screen] = est.starts_.loc["mv"]
    abandoned = {s: r for s, r in rows.items() if r["error"].startswith("abandoned")}
    assert abandoned, "the spectral start was never far enough behind to test abandoning it"
    for screen, row in abandoned.items():
        assert row["n_iter"] == screen and row["evidence"] < alone.evidence_


def test_a_start_that_cannot_run_is_recorded_not_fatal():
    # two workers: the three-view moment step is undefined
    df = pd.DataFrame({"task": [0, 0, 1, 1, 2, 2], "worker": [0, 1] * 3, "label": [0, 0, 1, 1, 0, 1]})
    est = HierarchicalDawidSkene().fit(df)
    assert est.init_ == "mv" and est.starts_.loc["spectral", "error"] != ""
    assert len(est.labels_) == 3 and np.isfinite(est.probas_.to_numpy()).all()


@pytest.mark.parametrize("name", ["imagenet15n", "bluebirds"])
def test_no_worse_than_ds_where_fixed_smoothing_is_hardest(name):
    # imagenet15n: 15 classes, 1.3 answers per task (ds needs its fixed diagonal prior there);
    # bluebirds: dense class-biased workers (full confusions win)
    data = load_shared(name)
    ds = gold_accuracy(cl.DawidSkene().fit(data).labels_, data)
    hds = gold_accuracy(HierarchicalDawidSkene().fit(data).labels_, data)
    assert hds >= ds, (hds, ds)


def test_diagonal_floor_raises_only_rows_below_their_mean_off_diagonal():
    alpha = np.array([[5.0, 1.0, 1.0], [3.0, 0.5, 2.0], [2.0, 4.0, 3.0]])
    out = diagonal_floor(alpha)
    # row 2: its diagonal is below one off-diagonal cell but not below their mean
    np.testing.assert_array_equal(out[[0, 2]], alpha[[0, 2]])
    np.testing.assert_array_equal(out[1], [3.0, 2.5, 2.0])
    assert alpha[1, 1] == 0.5  # the input is not modified


def test_look_alike_classes_leave_the_floor_inactive(monkeypatch):
    # truth 2 is answered as 3 more often than as 2 (two look-alike classes, which
    # Dawid-Skene can still separate): the floor must not touch such a population, so the
    # fit equals the unconstrained one (a constraint "diagonal >= every off-diagonal cell"
    # changes it: 0.73/0.75 against 0.73/0.84 accuracy on these two crowds)
    mu = np.array([[0.7, 0.1, 0.1, 0.1], [0.1, 0.7, 0.1, 0.1], [0.05, 0.1, 0.35, 0.5], [0.05, 0.1, 0.15, 0.7]])
    crowds = [_population_crowd(1000, 30, 5, mu, 10.0, seed)[0] for seed in (0, 1)]
    floored = [HierarchicalDawidSkene().fit(df).labels_ for df in crowds]
    monkeypatch.setattr(hds_module, "diagonal_floor", lambda a: np.array(a, dtype=float))
    for df, labels in zip(crowds, floored):
        free = HierarchicalDawidSkene().fit(df).labels_
        assert (free == labels).mean() > 0.99


def test_a_one_off_label_does_not_become_a_catch_all_class():
    # zencrowd_us with one answer changed to a label nobody else gives (a typo): its
    # population row must not learn "the crowd's mix of 0 and 1" and claim the tasks whose
    # answers disagree (before the diagonal constraint: 11 tasks)
    folder = SHARED_DATA / "zencrowd_us"
    skip_missing(folder)
    frame = pd.read_csv(folder / "labels.csv", dtype=str)
    clean = HierarchicalDawidSkene().fit(frame).labels_
    frame.loc[0, "label"] = "typo"
    est = HierarchicalDawidSkene().fit(frame)
    assert (est.labels_ == "typo").sum() <= 1
    assert (est.labels_.drop(frame.task[0]) == clean.drop(frame.task[0])).mean() > 0.995


def test_compiled_fixed_point_sums_match_numpy():
    # the numba passes skip zero counts and take the small ones from power sums of a Taylor
    # series, split once and again whenever a pseudo-count halves: the fixed point must land
    # where the numpy sums do (soft counts down to 1e-9 of a cell; starts far above and far
    # below the optimum, so that most counts are small, then most are not)
    pytest.importorskip("numba")
    from scipy.special import digamma

    from crowdlearn.core import compiled

    x = np.concatenate([np.logspace(-7, 6, 400), np.linspace(0.5, 8.0, 50)])
    got = np.array([compiled.digamma(v) for v in x])
    np.testing.assert_allclose(got, digamma(x), rtol=1e-13, atol=1e-13)
    rng = np.random.default_rng(3)
    counts = rng.gamma(0.3, 2.0, size=(400, 4, 4)) * (rng.random((400, 4, 4)) < 0.7)
    counts[rng.random((400, 4, 4)) < 0.3] *= 1e-9  # confident posteriors' soft counts
    for start in (np.ones((4, 4)) + 3 * np.eye(4), 500 * (np.ones((4, 4)) + 3 * np.eye(4)), np.full((4, 4), 1e-3)):
        a = fit_dirichlet_rows(counts, start, max_iter=200, backend="numpy")
        b = fit_dirichlet_rows(counts, start, max_iter=200, backend="numba")
        np.testing.assert_allclose(b, a, rtol=1e-7)
        np.testing.assert_allclose(fit_dirichlet_rows(counts, start, max_iter=3, backend="numba"),
                                   fit_dirichlet_rows(counts, start, max_iter=3, backend="numpy"), rtol=1e-8)
