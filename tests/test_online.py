"""Online (stepwise) EM: DawidSkene.partial_fit (and its variants), GLAD.partial_fit."""

import numpy as np
import pandas as pd
import pytest

from crowdlearn import GLAD, DawidSkene, OneCoinDawidSkene, simulate
from crowdlearn.registry import get_method


def _batches(data, n, seed=0):
    frame = data.to_frame().sample(frac=1.0, random_state=seed)
    return [frame.iloc[p] for p in np.array_split(np.arange(len(frame)), n)]


def test_state_does_not_grow_with_the_answers_seen():
    data = simulate.dawid_skene(300, 10, 3, labels_per_task=4, seed=0)
    est = DawidSkene()
    sizes = []
    for rep in range(3):  # the same tasks and workers again and again
        for b in _batches(data, 5, seed=rep):
            est.partial_fit(b, classes=list(data.classes))
        st = est._online
        sizes.append((st["raw"].shape, st["evidence"].shape, st["prior_stat"].shape, len(st["task_ids"])))
    # the evidence table has spare capacity (it doubles when full), but no more passes grow it
    assert sizes[0] == sizes[1] == sizes[2]
    assert 30 <= sizes[0][0][0] < 60 and sizes[0][0][1:] == (3,)  # workers x K rows, K columns and sizes[0][2:] == ((3,), 300) and 300 <= sizes[0][1][0] < 600


def test_new_tasks_and_workers_in_later_batches_and_every_task_out():
    data = simulate.dawid_skene(400, 20, 3, labels_per_task=4, seed=1)
    frame = data.to_frame()
    first = frame[frame["worker"].isin(data.workers[:10])]
    rest = frame[~frame["worker"].isin(data.workers[:10])]
    est = DawidSkene().partial_fit(first, classes=list(data.classes)).partial_fit(rest)
    assert set(est.workers_) == set(data.workers) and set(est.tasks_) == set(data.tasks)
    assert est.confusions_.shape == (20, 3, 3) and np.allclose(est.confusions_.sum(axis=2), 1)
    assert np.isfinite(est.probas_.to_numpy()).all() and len(est.labels_) == data.n_tasks
    assert est.predict_proba(data).shape == (data.n_tasks, 3)


def test_one_pass_then_more_passes_approach_the_batch_fit():
    data = simulate.dawid_skene(1500, 30, 3, labels_per_task=5, accuracy=(0.55, 0.9), seed=2)
    truth = data.classes.take(data.truth)
    batch_est = DawidSkene().fit(data)
    batch = np.mean(batch_est.labels_.to_numpy() == truth)
    est = DawidSkene()
    for b in _batches(data, 10):
        est.partial_fit(b, classes=list(data.classes))
    streamed = np.mean(est.labels_.reindex(data.tasks).to_numpy() == truth)
    assert streamed >= batch - 0.05  # one pass, evidence scored with the parameters of its time
    err1 = np.abs(est.confusions_ - batch_est.confusions_).mean()
    for rep in range(1, 4):
        for b in _batches(data, 10, seed=rep):
            est.partial_fit(b)
    err4 = np.abs(est.confusions_ - batch_est.confusions_).mean()
    assert err4 < 0.7 * err1  # more passes move the worker model toward batch EM's


def test_variants_inherit_it_and_bad_input_is_refused():
    data = simulate.dawid_skene(200, 8, 2, labels_per_task=3, seed=3)
    est = OneCoinDawidSkene()
    for b in _batches(data, 4):
        est.partial_fit(b, classes=list(data.classes))
    p = est.confusions_
    assert np.allclose(p[:, 0, 0], p[:, 1, 1])  # one coin: one accuracy per worker
    with pytest.raises(ValueError, match="not among the classes"):
        est.partial_fit(pd.DataFrame({"task": [1], "worker": [1], "label": ["new"]}))
    with pytest.raises(ValueError, match="step_power"):
        DawidSkene().partial_fit(data, step_power=0.4)
    with pytest.raises(NotImplementedError, match="hds"):
        get_method("hds")().partial_fit(data)
    # a batch fit afterwards starts afresh
    ds = DawidSkene().partial_fit(data).fit(data)
    assert "_online" not in ds.__dict__


def test_glad_online_tracks_the_batch_fit():
    """GLAD's stepwise EM on its IRLS surrogate: one pass close to the batch fit, abilities
    ordered like the planted accuracies, more passes move it toward batch GLAD."""
    data = simulate.dawid_skene(1500, 30, 3, labels_per_task=5, accuracy=(0.45, 0.9), seed=4)
    truth = data.classes.take(data.truth)
    batch_est = GLAD().fit(data)
    batch = np.mean(batch_est.labels_.to_numpy() == truth)
    est = GLAD()
    for b in _batches(data, 10):
        est.partial_fit(b, classes=list(data.classes))
    streamed = np.mean(est.labels_.reindex(data.tasks).to_numpy() == truth)
    assert streamed >= batch - 0.03
    assert np.isfinite(est.probas_.to_numpy()).all() and len(est.labels_) == data.n_tasks
    # abilities: one pass leaves them shrunk toward the prior (early batches' surrogates are
    # centred on early estimates); more passes move them toward the batch fit's
    skills = est.skills_.reindex(batch_est.skills_.index)
    corr1 = np.corrcoef(skills, batch_est.skills_)[0, 1]
    gap1 = np.abs(skills - batch_est.skills_).mean()
    assert corr1 > 0.4
    for rep in range(1, 4):
        for b in _batches(data, 10, seed=rep):
            est.partial_fit(b)
    skills = est.skills_.reindex(batch_est.skills_.index)
    assert np.corrcoef(skills, batch_est.skills_)[0, 1] > max(corr1, 0.8)
    assert np.abs(skills - batch_est.skills_).mean() < gap1
    assert est.predict_proba(data).shape == (data.n_tasks, 3)
    assert est.difficulties_.index.equals(est.tasks_) and (est.difficulties_ > 0).all()


def test_glad_online_state_is_bounded_and_a_batch_fit_starts_afresh():
    data = simulate.dawid_skene(300, 10, 2, labels_per_task=4, seed=5)
    est = GLAD()
    shapes = []
    for rep in range(3):
        for b in _batches(data, 5, seed=rep):
            est.partial_fit(b, classes=list(data.classes))
        st = est._online
        shapes.append((st["raw"].shape, st["task_stat"].shape, st["evidence"].shape))
    assert shapes[0] == shapes[1] == shapes[2]
    est.fit(data)
    assert "_online" not in est.__dict__ and len(est.difficulties_) == data.n_tasks
    with pytest.raises(ValueError, match="step_power"):
        GLAD().partial_fit(data, step_power=1.5)


def test_regression_on_leave_one_out_posteriors_recovers_a_confusion():
    """E[r e_a^T] = E[r r^T] Pi when r is a calibrated posterior that does not see the answer:
    the regression recovers Pi where the plain normalised counts are pulled toward the
    answers' marginal."""
    from crowdlearn.aggregation.online import regressed_counts

    rng = np.random.default_rng(0)
    k, n = 3, 20000
    conf = np.array([[0.8, 0.1, 0.1], [0.2, 0.6, 0.2], [0.05, 0.15, 0.8]])
    r = rng.dirichlet(np.full(k, 0.7), size=n)  # weak, calibrated posteriors
    truth = (r.cumsum(axis=1) > rng.random(n)[:, None]).argmax(axis=1)
    answer = (conf[truth].cumsum(axis=1) > rng.random(n)[:, None]).argmax(axis=1)
    s = np.zeros((k, k))  # rows answered, columns true (the statistics' layout)
    np.add.at(s, answer, r)
    rr = r.T @ r
    counts = regressed_counts(s, rr, s, rr, anchor=1e-3)  # one worker: it is the population
    est = counts.T / counts.T.sum(axis=1, keepdims=True)
    naive = s.T / s.T.sum(axis=1, keepdims=True)
    assert np.abs(est - conf).max() < 0.05
    assert np.abs(naive - conf).max() > 0.2


def test_leave_one_out_stream_knows_its_spammers():
    """One shuffled pass: with plain stepwise statistics every worker vouches for itself
    (most tasks have one answer per batch) and spammers look reliable; leave-one-out
    statistics rank the workers like their planted accuracies."""
    from scipy.stats import spearmanr

    data = simulate.dawid_skene(1000, 40, 4, labels_per_task=5, accuracy=(0.5, 0.85), spammers=0.3,
                                adversaries=0.1, seed=0)
    task, worker, label = np.asarray(data.task), np.asarray(data.worker), np.asarray(data.label)
    planted = pd.Series(label == np.asarray(data.truth)[task]).groupby(worker).mean()
    rho = {}
    for loo in (True, False):
        est = DawidSkene()
        for b in _batches(data, 10):
            est.partial_fit(b, classes=list(data.classes), leave_one_out=loo)
        rho[loo] = spearmanr(est.skills_.reindex(data.workers).to_numpy(), planted.to_numpy()).statistic
    assert rho[True] > 0.8 and rho[True] > rho[False] + 0.08


def test_leave_one_out_numba_and_numpy_agree_and_options_are_fixed():
    pytest.importorskip("numba")
    data = simulate.dawid_skene(600, 20, 3, labels_per_task=4, spammers=0.2, seed=6)
    out = {}
    for backend in ("numpy", "numba"):
        est = DawidSkene(backend=backend)
        for b in _batches(data, 5):
            est.partial_fit(b, classes=list(data.classes))
        out[backend] = (est.probas_.to_numpy(), est.confusions_)
    assert np.allclose(out["numpy"][0], out["numba"][0], atol=1e-9)
    assert np.allclose(out["numpy"][1], out["numba"][1], atol=1e-9)
    est = DawidSkene().partial_fit(_batches(data, 2)[0], leave_one_out=False)
    est.partial_fit(_batches(data, 2)[1], leave_one_out=True)  # ignored: fixed at the first call
    assert est._online["leave_one_out"] is False
    with pytest.raises(ValueError, match="anchor"):
        DawidSkene().partial_fit(data, anchor=0.0)


def test_compiled_worker_regressions_match_numpy():
    pytest.importorskip("numba")
    from crowdlearn.aggregation.online import regressed_counts

    rng = np.random.default_rng(2)
    k, m = 4, 30
    held = rng.dirichlet(np.ones(k), size=(m, 25))
    answers = rng.integers(0, k, size=(m, 25))
    s = np.zeros((m * k, k))
    r = np.zeros((m * k, k))
    for w in range(m):
        np.add.at(s, w * k + answers[w], held[w])
        r[w * k:(w + 1) * k] = held[w].T @ held[w]
    pop_s, pop_r = s.reshape(m, k, k).sum(0), r.reshape(m, k, k).sum(0)
    a = regressed_counts(s, r, pop_s, pop_r, 5.0, "numpy")
    b = regressed_counts(s, r, pop_s, pop_r, 5.0, "numba")
    assert np.allclose(a, b, atol=1e-10)
    # class mass is kept: each worker's counts per true class sum to its soft count
    assert np.allclose(a.reshape(m, k, k).sum(axis=1), s.reshape(m, k, k).sum(axis=1))


def test_ids_and_classes_match_by_value_across_batches():
    """A stream read from Parquet parts (numbers) and then CSV parts (text): task 11573 and
    "11573" are one task, and classes given as text match number labels (they were two
    tasks, and ``classes=["0", "1"]`` with number labels was refused)."""
    data = simulate.dawid_skene(200, 10, 2, labels_per_task=4, seed=3)
    frame = data.to_frame()
    numeric = frame.assign(task=frame["task"].astype(int), worker=frame["worker"].astype(int),
                           label=frame["label"].astype(int))
    head, tail = numeric.iloc[:400], numeric.iloc[400:]
    for first, second in ((head, tail.astype(str)), (head.astype(str), tail)):
        est = DawidSkene().partial_fit(first, classes=["0", "1"]).partial_fit(second)
        assert len(est.tasks_) == 200 and len(est.workers_) == 10
        assert list(est.classes_) == ["0", "1"]
        assert np.isfinite(est.probas_.to_numpy()).all()
    with pytest.raises(ValueError, match="class 2 is not among the classes"):
        DawidSkene().partial_fit(head, classes=["0", "1"]).partial_fit(tail.assign(label=2))
