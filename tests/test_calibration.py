"""CalibratedAggregator and the calibration map it fits (crowdlearn.aggregation.calibration)."""

import numpy as np
import pandas as pd
import pytest

import crowdlearn as cl
from crowdlearn.aggregation.calibration import apply_calibration, fit_calibration
from crowdlearn.diagnostics.metrics import expected_calibration_error, log_loss
from crowdlearn.simulate import WorkerSpec, crowd


def _overconfident_crowd(seed=1):
    """A crowd DS is overconfident on: a quarter of the tasks look like another class to
    the workers (instance outliers), which the conditional-independence model cannot see."""
    rng = np.random.default_rng(0)
    looks_like = np.where(rng.random(3000) < 0.25, rng.integers(0, 3, 3000), -1)
    return crowd(3000, 3, [WorkerSpec.instance_dependent(30, outlier_prob=0.7)], labels_per_task=5,
                 seed=seed, outlier_class=looks_like)


def test_apply_calibration_keeps_labels_and_rows():
    rng = np.random.default_rng(0)
    q = rng.dirichlet(np.full(4, 0.3), size=200)
    q[0] = [1.0, 0.0, 0.0, 0.0]  # an exact zero stays finite under any temperature
    np.testing.assert_allclose(apply_calibration(q, 1.0, 0.0), q, atol=1e-12)
    for t, eps in ((0.3, 0.0), (2.0, 0.1), (0.05, 0.4)):
        out = apply_calibration(q, t, eps)
        assert np.all(np.isfinite(out)) and np.allclose(out.sum(axis=1), 1.0)
        np.testing.assert_array_equal(out.argmax(axis=1), q.argmax(axis=1))
        assert out.min() >= eps / 4 - 1e-15


@pytest.mark.parametrize("temperature, eps", [(0.4, 0.0), (0.4, 0.15), (2.5, 0.05)])
def test_fit_calibration_recovers_a_planted_map(temperature, eps):
    """Gold drawn from (1 - eps) softmax(T log q) + eps/K: the fit finds T and eps."""
    rng = np.random.default_rng(3)
    q = rng.dirichlet(np.full(3, 0.15), size=20_000)  # sharp, as EM posteriors are
    p = apply_calibration(q, temperature, eps)
    y = (rng.random(len(p))[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
    t_hat, eps_hat = fit_calibration(q, y)
    assert abs(np.log(t_hat / temperature)) < 0.06
    assert abs(eps_hat - eps) < 0.01
    if eps == 0.0:  # the temperature alone, as temperature scaling fits it
        t_only, zero = fit_calibration(q, y, mix=False)
        assert zero == 0.0 and abs(np.log(t_only / temperature)) < 0.06


def test_calibrated_ds_confidences_match_accuracy_on_tasks_without_gold():
    data = _overconfident_crowd()
    truth = data.truth_series()
    gold = truth.sample(300, random_state=0)
    rest = truth.drop(gold.index)
    raw = cl.DawidSkene().fit(data, gold=gold)
    est = cl.CalibratedAggregator("ds").fit(data, gold=gold)
    # the labels are the base's with the same gold; only the confidences change
    pd.testing.assert_series_equal(est.labels_, raw.labels_)
    assert (est.probas_.loc[gold.index].max(axis=1) == 1.0).all()  # gold tasks stay clamped
    before = expected_calibration_error(raw.probas_.loc[rest.index], rest)
    after = expected_calibration_error(est.probas_.loc[rest.index], rest)
    assert before > 0.1 and after < 0.05
    assert log_loss(est.probas_.loc[rest.index], rest) < 0.8 * log_loss(raw.probas_.loc[rest.index], rest)
    assert est.temperature_ < 1.0  # DS is overconfident here: the map softens
    cal = est.calibration_
    assert cal["n_gold"] == 300 and cal["log_loss_after"] < cal["log_loss_before"]
    # same input, same seed: same output; predict_proba applies the same map to the base's
    again = cl.CalibratedAggregator("ds").fit(data, gold=gold)
    pd.testing.assert_frame_equal(again.probas_, est.probas_)
    np.testing.assert_allclose(
        est.predict_proba(data).to_numpy(),
        apply_calibration(est.base_.predict_proba(data).to_numpy(), est.temperature_, est.eps_))


def test_calibrated_aggregator_takes_an_estimator_and_leaves_it_unfitted():
    data = _overconfident_crowd(seed=2)
    gold = data.truth_series().sample(100, random_state=1)
    base = cl.MajorityVote()
    est = cl.CalibratedAggregator(base, cv=3, mix=False).fit(data, gold=gold)
    assert est.eps_ == 0.0 and not hasattr(base, "probas_")
    assert list(est.probas_.index) == list(data.tasks)  # every task is in the output


def test_calibration_needs_gold():
    data = _overconfident_crowd()
    with pytest.raises(ValueError, match="needs at least 2 gold tasks"):
        cl.CalibratedAggregator("ds").fit(data)
    with pytest.raises(ValueError, match="got 1"):
        cl.CalibratedAggregator("ds").fit(data, gold=data.truth_series().iloc[:1])
    with pytest.raises(ValueError, match="cv must be an integer >= 2"):
        cl.CalibratedAggregator("ds", cv=1).fit(data, gold=data.truth_series().iloc[:10])
    with pytest.raises(ValueError, match="one posterior row per gold class"):
        fit_calibration(np.full((3, 2), 0.5), np.array([0, 1]))


def test_base_is_a_class_label_method():
    """An unknown base named the methods of every kind; it names the class-label ones, and
    an ordinal base stays one (the CLI calibrates ordinal fits)."""
    from crowdlearn.simulate import ordinal_crowd

    data = _overconfident_crowd()
    with pytest.raises(ValueError, match="^unknown classification or ordinal method 'bt'; known: .*ds") as err:
        cl.CalibratedAggregator("bt").fit(data, gold=data.truth_series())
    assert "symnmf" not in str(err.value) and "mean" not in str(err.value)
    grades, _ = ordinal_crowd(60, 8, 4, 5, seed=0)
    est = cl.CalibratedAggregator("ordinal-ds", cv=2).fit(grades, gold=grades.truth_series().iloc[:30])
    assert len(est.labels_) == grades.n_tasks
