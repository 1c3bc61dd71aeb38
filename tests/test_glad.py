"""GLAD (Whitehill et al., 2009): planted-parameter recovery, exactness, gold, real data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import accuracy, coin_crowd, load_shared_text
from scipy.special import expit, logsumexp
from scipy.stats import spearmanr
from sklearn.base import clone

from crowdlearn.aggregation.glad import GLAD
from crowdlearn.aggregation.majority_vote import MajorityVote
from crowdlearn.core.stats import vote_fractions
from crowdlearn.core.data import CrowdLabels


def glad_crowd(n_tasks=600, n_workers=40, k=3, per_task=15, seed=0):
    """Answers drawn from the GLAD model itself, with known alpha and beta."""
    rng = np.random.default_rng(seed)
    alpha = rng.uniform(-0.5, 3.0, n_workers)
    beta = np.exp(rng.normal(0.0, 1.0, n_tasks))
    truth = rng.integers(0, k, n_tasks)
    task = np.repeat(np.arange(n_tasks), per_task)
    worker = np.argsort(rng.random((n_tasks, n_workers)), axis=1)[:, :per_task].ravel()
    right = rng.random(len(task)) < expit(alpha[worker] * beta[task])
    label = np.where(right, truth[task], (truth[task] + rng.integers(1, k, len(task))) % k)
    data = CrowdLabels.from_codes(
        task, worker, label, n_tasks=n_tasks, n_workers=n_workers, n_classes=k, truth=truth
    )
    return data, alpha, beta


# ------------------------------------------------------------------ planted recovery
@pytest.mark.parametrize("seed", [0, 1])
def test_beats_majority_vote_and_ranks_workers(seed):
    data, acc, spam = coin_crowd(seed=seed)
    glad = GLAD().fit(data)
    mv = accuracy(MajorityVote().fit(data), data)
    # measured: GLAD 0.876 / 0.856 vs MV 0.798 / 0.767
    assert accuracy(glad, data) > mv + 0.04
    assert spearmanr(glad.skills_, acc)[0] > 0.8
    # a uniform spammer is right 1/K of the time: sigmoid(alpha) = 1/4 -> alpha < 0
    assert glad.skills_[spam].max() < 0 < glad.skills_[~spam].median()
    assert glad.converged_ and glad.n_iter_ == len(glad.history_)


def test_recovers_planted_abilities_and_difficulties():
    data, alpha, beta = glad_crowd()
    glad = GLAD().fit(data)
    assert accuracy(glad, data) > 0.97
    assert np.corrcoef(glad.skills_, alpha)[0, 1] > 0.9
    assert spearmanr(glad.difficulties_, beta)[0] > 0.7  # measured 0.85
    assert np.all(glad.difficulties_ > 0)


def test_posteriors_are_distributions_and_labels_are_argmax():
    data, _, _ = coin_crowd(n_tasks=400, seed=3)
    glad = GLAD().fit(data)
    p = glad.probas_.to_numpy()
    assert np.all(np.isfinite(p)) and np.all(p >= 0)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(glad.label_codes_, p.argmax(axis=1))
    assert glad.priors_.sum() == pytest.approx(1.0)


def test_history_never_decreases():
    data, _, _ = coin_crowd(n_tasks=800, seed=4)
    for kw in ({}, {"fit_priors": True}, {"m_step_max_iter": 1}):
        h = np.asarray(GLAD(max_iter=60, tol=0, **kw).fit(data).history_)
        assert len(h) == 60
        assert np.all(np.diff(h) >= -1e-9 * np.abs(h[1:])), kw


# ------------------------------------------------------------------ exactness
def _small_crowd():
    rng = np.random.default_rng(1)
    n, m, k = 40, 6, 3
    acc = rng.uniform(0.4, 0.9, m)
    truth = rng.integers(0, k, n)
    task = np.repeat(np.arange(n), 4)
    worker = np.concatenate([rng.choice(m, 4, replace=False) for _ in range(n)])
    right = rng.random(len(task)) < acc[worker]
    label = np.where(right, truth[task], (truth[task] + rng.integers(1, k, len(task))) % k)
    return CrowdLabels.from_codes(task, worker, label, n_tasks=n, n_workers=m, n_classes=k)


def _map_objective(data, alpha, log_beta, log_prior, prior_alpha):
    """The GLAD log posterior written with explicit loops (the reference for the vectorised fit)."""
    k = data.n_classes
    logits = np.tile(log_prior, (data.n_tasks, 1))
    for t, w, l in zip(data.task, data.worker, data.label):
        s = expit(alpha[w] * np.exp(log_beta[t]))
        for j in range(k):
            logits[t, j] += np.log(s) if j == l else np.log((1 - s) / (k - 1))
    return (
        logsumexp(logits, axis=1).sum()
        - 0.5 * np.sum((alpha - 1.0) ** 2)
        - 0.5 * np.sum(log_beta**2)
        + prior_alpha * log_prior.sum()
    ), logits


def test_fit_is_a_stationary_point_of_the_map_objective():
    data = _small_crowd()
    glad = GLAD(max_iter=2000, tol=0, m_step_max_iter=5, fit_priors=True).fit(data)
    a = glad.skills_.to_numpy()
    u = np.log(glad.difficulties_.to_numpy())
    lp = np.log(glad.priors_.to_numpy())
    obj, logits = _map_objective(data, a, u, lp, 1.0)
    assert glad.history_[-1] == pytest.approx(obj, rel=1e-10)
    # the returned posteriors are those of the returned parameters
    np.testing.assert_allclose(glad.probas_.to_numpy(), np.exp(logits - logsumexp(logits, axis=1, keepdims=True)), atol=1e-12)
    h = 1e-5
    for vec, name in ((a, "alpha"), (u, "log beta")):
        grad = []
        for i in range(len(vec)):
            e = np.zeros_like(vec)
            e[i] = h
            plus = _map_objective(data, *((a + e, u) if name == "alpha" else (a, u + e)), lp, 1.0)[0]
            minus = _map_objective(data, *((a - e, u) if name == "alpha" else (a, u - e)), lp, 1.0)[0]
            grad.append((plus - minus) / (2 * h))
        assert np.max(np.abs(grad)) < 1e-6, name


def test_single_class_and_tiny_inputs():
    one = CrowdLabels.from_records([(f"t{i}", f"w{i % 2}", "x") for i in range(4)])
    g = GLAD().fit(one)
    assert (g.labels_ == "x").all() and np.allclose(g.probas_.to_numpy(), 1.0)
    lone = CrowdLabels.from_records([("t", "w", "y")], classes=["n", "y"])
    assert GLAD().fit(lone).labels_.loc["t"] == "y"


# ------------------------------------------------------------------ contract
def test_deterministic_and_clonable():
    data, _, _ = coin_crowd(n_tasks=500, seed=5)
    a = GLAD().fit(data)
    b = clone(GLAD()).fit(data)
    pd.testing.assert_frame_equal(a.probas_, b.probas_, check_exact=True)
    pd.testing.assert_series_equal(a.skills_, b.skills_, check_exact=True)
    est = GLAD(max_iter=7, alpha_prior_var=2.0)
    assert clone(est).get_params() == est.get_params()
    assert est.get_params()["alpha_prior_var"] == 2.0


def test_gold_tasks_are_clamped_and_calibrate_abilities():
    """Six adversarial workers outvote four good ones; 10% gold exposes them."""
    rng = np.random.default_rng(0)
    n, k = 400, 2
    acc = np.array([0.15] * 6 + [0.85] * 4)
    truth = rng.integers(0, k, n)
    task = np.repeat(np.arange(n), 10)
    worker = np.tile(np.arange(10), n)
    label = np.where(rng.random(len(task)) < acc[worker], truth[task], 1 - truth[task])
    data = CrowdLabels.from_codes(task, worker, label, n_tasks=n, n_workers=10, n_classes=k)
    gold = pd.Series(truth[:40], index=data.tasks[:40])

    blind = GLAD().fit(data)
    assert np.mean(blind.label_codes_[40:] == truth[40:]) < 0.1  # follows the majority

    informed = GLAD().fit(data, gold=gold)
    np.testing.assert_array_equal(informed.label_codes_[:40], truth[:40])
    p = informed.probas_.to_numpy()[:40]
    np.testing.assert_array_equal(p, np.eye(k)[truth[:40]])
    assert np.mean(informed.label_codes_[40:] == truth[40:]) > 0.95
    assert informed.skills_.iloc[:6].max() < 0 < informed.skills_.iloc[6:].min()


def test_init_posteriors_are_the_starting_point():
    data, _, _ = coin_crowd(n_tasks=300, seed=6)
    start = GLAD(max_iter=0).fit(data)
    np.testing.assert_allclose(start.probas_.to_numpy(), vote_fractions(data))
    init = np.random.default_rng(0).random((data.n_tasks, data.n_classes))
    given = GLAD(max_iter=0).fit(data, init=init)
    np.testing.assert_allclose(given.probas_.to_numpy(), init / init.sum(axis=1, keepdims=True))
    # a perfect start stays (nearly) perfect
    oracle = np.eye(data.n_classes)[data.truth]
    assert accuracy(GLAD().fit(data, init=oracle), data) >= accuracy(GLAD().fit(data), data)


def test_predict_proba_scores_new_tasks():
    data, alpha, beta = glad_crowd(seed=1)
    fitted = GLAD().fit(data)
    # on the training data it reproduces the fitted posteriors
    np.testing.assert_allclose(fitted.predict_proba(data).to_numpy(), fitted.probas_.to_numpy(), atol=1e-12)

    tasks = np.asarray(data.tasks)
    train = data.subset(tasks=tasks[:400])
    test = data.subset(tasks=tasks[400:])
    model = GLAD().fit(train)
    proba = model.predict_proba(test)
    assert list(proba.index) == list(test.tasks)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    # unseen tasks get beta = 1: the posterior is the alpha-weighted one-coin vote
    a = model.skills_.reindex(test.workers).to_numpy()
    s = expit(a[test.worker])
    k = test.n_classes
    logits = np.tile(np.log(model.priors_.reindex(test.classes).to_numpy()), (test.n_tasks, 1))
    np.add.at(logits, (test.task, test.label), np.log(s) - np.log((1 - s) / (k - 1)))
    np.testing.assert_allclose(proba.to_numpy(), np.exp(logits - logsumexp(logits, axis=1, keepdims=True)), atol=1e-10)
    held_out = float(np.mean(proba.to_numpy().argmax(axis=1) == test.truth))
    assert held_out > 0.95


@pytest.mark.parametrize(
    "kw", [{"max_iter": -1}, {"alpha_prior_var": 0.0}, {"log_beta_prior_var": -1.0}, {"m_step_max_iter": 0}]
)
def test_invalid_parameters(kw):
    data, _, _ = coin_crowd(n_tasks=50, seed=7)
    with pytest.raises(ValueError):
        GLAD(**kw).fit(data)


def test_large_crowd_beats_mv():
    """100k answers (speed is measured in benchmarks/, never asserted in tests)."""
    data, _, _ = coin_crowd(n_tasks=20_000, n_workers=200, k=5, per_task=5, seed=8)
    glad = GLAD(max_iter=10, tol=0).fit(data)
    assert glad.n_iter_ == 10
    assert accuracy(glad, data) > accuracy(MajorityVote().fit(data), data)


# ------------------------------------------------------------------ real data
# measured with the defaults: bluebirds GLAD 0.722 (MV 0.759: the symmetric error model
# cannot express these workers' bias toward class 0; DS reaches 0.898), dog 0.834 (MV 0.825)
# bluebirds with the paper's uniform class prior: with the learned prior (the default, chosen
# on simulated crowds) GLAD's symmetric error model drifts to the majority class there
# (benchmarks/RESULTS.md, section 0c), which this floor does not hide.
@pytest.mark.parametrize("name, kwargs, floor", [("bluebirds", {"fit_priors": False}, 0.70), ("dog", {}, 0.83)])
def test_real_data_accuracy(name, kwargs, floor):
    data, truth = load_shared_text(name)
    glad = GLAD(**kwargs).fit(data)
    acc = float((glad.labels_.loc[truth.index] == truth).mean())
    assert acc >= floor
    if name == "dog":
        mv = MajorityVote().fit(data)
        assert acc >= float((mv.labels_.loc[truth.index] == truth).mean())
    assert glad.converged_


@pytest.mark.parametrize("stream", [False, True])
def test_predict_proba_finds_a_fitted_task_named_as_text(stream):
    # tasks fitted as numbers and scored from a CSV (text ids) keep their fitted difficulty,
    # as workers and classes are matched by value
    data, _, _ = glad_crowd(n_tasks=60, n_workers=8, per_task=4, seed=2)
    frame = data.to_frame()
    model = GLAD().partial_fit(frame) if stream else GLAD().fit(frame)
    part = frame.iloc[:12]
    as_text = part.assign(task=part["task"].astype(str))
    np.testing.assert_allclose(model.predict_proba(as_text).to_numpy(), model.predict_proba(part).to_numpy(),
                               atol=1e-12)
