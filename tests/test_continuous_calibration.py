"""CalibratedContinuous: standard errors calibrated on gold values (continuous.calibration)."""

import numpy as np
import pandas as pd
import pytest

from crowdlearn.continuous import CalibratedContinuous, ContinuousAnswers
from crowdlearn.continuous.calibration import fit_variance_calibration
from crowdlearn.registry import get_method


def _shared_error_crowd(n_tasks=3000, tau=1.0, noise=2.0, seed=0):
    """Every worker of a task misreads it by the same delta_t ~ N(0, tau^2): the crowd's
    spread cannot show it, so the mean's standard error misses tau.  Tasks get 2 to 12
    answers, so that the standard errors differ and the scale a and floor b of the
    calibration are told apart."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(0.0, 3.0, n_tasks)
    delta = rng.normal(0.0, tau, n_tasks)
    per_task = rng.integers(2, 13, n_tasks)
    task = np.repeat(np.arange(n_tasks), per_task)
    worker = np.concatenate([rng.choice(40, n, replace=False) for n in per_task])
    value = truth[task] + delta[task] + rng.normal(0.0, noise, len(task))
    frame = pd.DataFrame({"task": task, "worker": worker, "label": value})
    return ContinuousAnswers.from_frame(frame), pd.Series(truth, index=np.arange(n_tasks))


def test_fit_variance_calibration_recovers_planted_scale_and_floor():
    rng = np.random.default_rng(1)
    se = rng.uniform(0.2, 2.0, 20_000)
    r = rng.normal(0.0, np.sqrt(2.0 * se**2 + 0.5))
    a, b = fit_variance_calibration(r, se)
    assert abs(np.log(a / 2.0)) < 0.08 and abs(b - 0.5) < 0.08
    assert fit_variance_calibration(np.zeros(5), np.ones(5)) == (1.0, 0.0)
    with pytest.raises(ValueError, match="one standard error per residual"):
        fit_variance_calibration(np.zeros(3), np.ones(2))


def test_calibrated_mean_covers_the_gold_of_other_tasks():
    data, truth = _shared_error_crowd()
    gold = truth.sample(300, random_state=0)
    rest = truth.drop(gold.index)
    raw = get_method("mean")().fit(data, gold=gold)
    est = CalibratedContinuous("mean").fit(data, gold=gold)
    pd.testing.assert_series_equal(est.estimates_, raw.estimates_)  # only the errors change
    assert (est.stderr_.loc[gold.index] == 0).all() and (est.estimates_.loc[gold.index] == gold).all()

    def coverage(fit):
        z = (rest - fit.estimates_.loc[rest.index]).abs() / fit.stderr_.loc[rest.index]
        return float((z <= 1.96).mean())

    assert coverage(raw) < 0.85 and 0.92 < coverage(est) < 0.98
    # residual variance = se^2 + tau^2 for the mean: a near 1, b near tau^2 = 1
    assert abs(np.log(est.stderr_scale_)) < 0.35 and 0.6 < est.stderr_floor_ < 1.5
    cal = est.calibration_
    assert cal["n_gold"] == 300 and cal["coverage95_after"] > cal["coverage95_before"]
    assert 1.0 < cal["rmse"] < 1.6  # sqrt(tau^2 + noise^2 / answers): 1.0 to 1.7


def test_calibrated_gaussian_em_keeps_the_worker_model_and_needs_gold():
    data, truth = _shared_error_crowd(n_tasks=600, seed=2)
    est = CalibratedContinuous("gaussian-em", cv=3).fit(data, gold=truth.iloc[:60])
    assert est.worker_noise_.index.equals(est.base_.worker_noise_.index)
    np.testing.assert_allclose(est.worker_noise_, est.base_.worker_noise_)
    with pytest.raises(ValueError, match="needs at least 3 gold tasks"):
        CalibratedContinuous("mean").fit(data)
    with pytest.raises(ValueError, match="cv must be an integer >= 2"):
        CalibratedContinuous("mean", cv=1).fit(data, gold=truth.iloc[:10])


def test_cli_calibrates_continuous_standard_errors(tmp_path, capsys):
    from crowdlearn.cli import main

    data, truth = _shared_error_crowd(n_tasks=800, seed=3)
    src, gold, out = tmp_path / "a.csv", tmp_path / "gold.csv", tmp_path / "out.csv"
    data.to_frame().to_csv(src, index=False)
    truth.iloc[:200].rename_axis("task").rename("truth").reset_index().to_csv(gold, index=False)
    assert main(["aggregate", str(src), "--kind", "continuous", "--method", "mean", "--gold", str(gold),
                 "--calibrate", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "standard errors calibrated on 200 gold tasks" in err and "95% intervals cover" in err
    res = pd.read_csv(out).set_index("task")
    rest = truth.iloc[200:]
    z = (rest - res["estimate"].loc[rest.index]).abs() / res["stderr"].loc[rest.index]
    assert 0.9 < (z <= 1.96).mean() < 0.99
    assert main(["aggregate", str(src), "--kind", "similarity", "--calibrate", "--gold", str(gold)]) == 2
    assert "not similarity answers" in capsys.readouterr().err
