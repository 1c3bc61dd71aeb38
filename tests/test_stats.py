"""core.stats: the crowd statistics every method shares, against definitions and planted models."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import beta as beta_fn
from scipy.special import logsumexp

from crowdlearn import CrowdLabels, simulate
from crowdlearn.core import kernels, stats


@pytest.fixture(scope="module")
def planted():
    return simulate.dawid_skene(3000, 12, 3, labels_per_task=6, accuracy=(0.55, 0.9), seed=4)


def small():
    # task 2 has no answers; worker 2 answers twice on task 0
    return CrowdLabels.from_codes(
        task=[0, 0, 0, 0, 1, 1, 3], worker=[0, 1, 2, 2, 0, 2, 1], label=[1, 1, 0, 2, 2, 2, 0],
        n_tasks=4, n_workers=3, n_classes=3,
    )


def test_votes_and_fractions():
    data = small()
    votes = stats.weighted_votes(data)
    np.testing.assert_array_equal(votes, [[1, 2, 1], [0, 0, 2], [0, 0, 0], [1, 0, 0]])
    frac = stats.vote_fractions(data)
    np.testing.assert_allclose(frac.sum(axis=1), 1.0)
    np.testing.assert_allclose(frac[2], 1 / 3)  # no answer: uniform
    np.testing.assert_allclose(frac[0], [0.25, 0.5, 0.25])
    w = np.array([2.0, 0.0, 1.0])  # worker weights
    np.testing.assert_allclose(stats.weighted_votes(data, w)[0], [1, 2, 1])
    np.testing.assert_allclose(stats.vote_fractions(data, w)[3], 1 / 3)  # only a zero weight


def test_split_ties_agreement_and_clamp():
    data = small()
    top = stats.split_ties(np.array([[0.4, 0.4, 0.2], [0.1, 0.2, 0.7]]))
    np.testing.assert_allclose(top, [[0.5, 0.5, 0], [0, 0, 1]])
    gold = np.array([2, -1])
    proba = np.array([[0.4, 0.4, 0.2], [0.1, 0.2, 0.7]])
    np.testing.assert_allclose(stats.split_ties(proba, gold)[0], [0, 0, 1])
    agree = stats.agreement_with(data, np.array([1, 2, 0, 2]))
    np.testing.assert_allclose(agree, [1.0, 0.5, 1 / 3])
    post = np.full((4, 3), 1 / 3)
    out = stats.clamp_to_gold(post, np.array([-1, 0, -1, 2]))
    assert out is post  # in place
    np.testing.assert_allclose(post[[1, 3]], [[1, 0, 0], [0, 0, 1]])
    np.testing.assert_allclose(post[[0, 2]], 1 / 3)
    assert stats.clamp_to_gold(post, None) is post


def test_soft_counts_match_their_definition(planted):
    rng = np.random.default_rng(0)
    post = rng.dirichlet(np.ones(3), size=planted.n_tasks)
    counts = stats.soft_confusion_counts(planted, post)
    ref = np.zeros_like(counts)
    for t, w, l in zip(planted.task, planted.worker, planted.label):
        ref[w, :, l] += post[t]
    np.testing.assert_allclose(counts, ref, rtol=1e-12, atol=1e-12)
    # the M-step kernel computes the same statistic in its own layout
    kern, _ = kernels.mstep(planted, post, "numpy")
    np.testing.assert_allclose(counts, kern.reshape(12, 3, 3).transpose(0, 2, 1), rtol=1e-12)
    np.testing.assert_allclose(counts.sum(axis=(1, 2)), planted.labels_per_worker())


def test_soft_confusions_recover_planted_workers(planted):
    truth = np.eye(3)[planted.truth]
    conf = stats.soft_confusions(planted, truth, 0.0)
    np.testing.assert_allclose(conf.sum(axis=2), 1.0)
    # ~1500 answers per worker: each row within a few binomial standard errors
    assert np.max(np.abs(conf - planted.planted.confusions)) < 0.06
    skills = stats.expected_skills(conf, np.bincount(planted.truth) / planted.n_tasks)
    assert np.max(np.abs(skills - planted.planted.accuracy)) < 0.03


def test_answer_log_sum_is_the_ds_estep(planted):
    conf = planted.planted.confusions
    log_prior = np.log(planted.planted.class_prior)
    s = stats.answer_log_sum(planted, np.log(conf), start=log_prior)
    post = np.exp(s - logsumexp(s, axis=1, keepdims=True))
    log_table = np.log(conf).transpose(0, 2, 1).reshape(-1, 3)
    ref, _ = kernels.estep(planted, log_table, log_prior, "numpy")
    np.testing.assert_allclose(post, ref, atol=1e-12)
    np.testing.assert_allclose(stats.confusions_from_log_table(log_table, 12), conf, rtol=1e-12)
    no_prior = stats.answer_log_sum(planted, np.log(conf))
    np.testing.assert_allclose(no_prior, s - log_prior, atol=1e-9)


def test_dirichlet_and_beta_expected_logs_by_sampling():
    rng = np.random.default_rng(1)
    conc = np.array([[0.7, 2.0, 5.0], [3.0, 3.0, 0.4]])
    for row, exp in zip(conc, stats.dirichlet_expected_log(conc)):
        draws = rng.dirichlet(row, size=400_000)
        np.testing.assert_allclose(np.log(draws).mean(axis=0), exp, atol=0.02)
    a, b = np.array([0.8, 4.0]), np.array([2.5, 1.2])
    right, wrong = stats.beta_expected_logs(a, b)
    two = stats.dirichlet_expected_log(np.stack([a, b], axis=1))
    np.testing.assert_allclose(right, two[:, 0], rtol=1e-14)
    np.testing.assert_allclose(wrong, two[:, 1], rtol=1e-14)


@pytest.mark.parametrize("a,b", [(1.0, 1.0), (2.0, 1.0), (0.6, 3.5)])
def test_gauss_jacobi_is_exact_for_polynomials(a, b):
    n = 6
    q, omq, logw = stats.gauss_jacobi(n, a, b)
    np.testing.assert_allclose(q + omq, 1.0)
    scale = beta_fn(a, b) / np.exp(logw).sum()  # the rule's weights integrate the Beta kernel
    for p in range(2 * n):  # E[q^p] = B(a + p, b) / B(a, b), exactly up to degree 2n - 1
        got = scale * np.sum(np.exp(logw) * q**p)
        np.testing.assert_allclose(got, beta_fn(a + p, b), rtol=1e-10)
    assert not q.flags.writeable  # cached arrays are shared


def test_logsumexp_is_scipys_to_the_bit():
    # the fast path takes the row maximum and its ties out of the sum as SciPy does; rows with
    # a non-finite maximum, other dtypes and empty arrays are SciPy's own
    rng = np.random.default_rng(0)
    for trial in range(200):
        shape = tuple(rng.integers(1, 30, size=rng.integers(1, 4)))
        a = rng.normal(size=shape) * rng.choice([1e-3, 1.0, 30.0, 700.0])
        if trial % 3 == 0:
            a = np.round(a)  # tied maxima
        if trial % 4 == 0:
            a[rng.random(shape) < 0.3] = -np.inf
        if trial % 5 == 0:
            a = np.asfortranarray(a)
        for axis in range(-a.ndim, a.ndim):
            for keepdims in (False, True):
                got = stats.logsumexp(a, axis=axis, keepdims=keepdims)
                want = logsumexp(a, axis=axis, keepdims=keepdims)
                assert got.shape == want.shape
                np.testing.assert_array_equal(got, want)
    odd = np.array([[0.0, 1.0], [-np.inf, -np.inf], [np.inf, 0.0], [np.nan, 0.0]])
    np.testing.assert_array_equal(stats.logsumexp(odd, axis=1), logsumexp(odd, axis=1))
    np.testing.assert_array_equal(stats.logsumexp(np.zeros((0, 3)), axis=1), logsumexp(np.zeros((0, 3)), axis=1))
    small32 = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(stats.logsumexp(small32, axis=1), logsumexp(small32, axis=1))


def test_ties_are_drawn_alike_for_number_ids_and_their_text():
    """The same file read from Parquet (number ids) and from CSV (text ids): every exact tie
    of majority vote must go the same way (29 of dog's 807 labels differed)."""
    import crowdlearn as cl
    from crowdlearn import simulate

    frame = simulate.dawid_skene(500, 12, 3, labels_per_task=2, seed=4).to_frame().astype(int)
    numbers = cl.get_method("mv")().fit(frame)
    text = cl.get_method("mv")().fit(frame.astype(str))
    tied = (numbers.probas_.max(axis=1) < 0.75).sum()
    assert tied > 100
    a = numbers.labels_.astype(str).set_axis(numbers.labels_.index.astype(str))
    pd.testing.assert_series_equal(a.sort_index(), text.labels_.sort_index(), check_index_type=False)
