"""Intervals and paired tests of accuracies against gold (crowdlearn.diagnostics.significance)."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from crowdlearn import simulate
from crowdlearn.benchmarking import run_methods
from crowdlearn.cli import main
from crowdlearn.diagnostics.significance import accuracy_interval, correct_per_task, paired_comparison


def test_wilson_interval_textbook_value():
    # 8 of 10 at 95%: (0.490, 0.943) (Newcombe 1998, Statistics in Medicine 17, table I)
    low, high = accuracy_interval([1] * 8 + [0] * 2)
    assert low == pytest.approx(0.4902, abs=1e-4)
    assert high == pytest.approx(0.9433, abs=1e-4)


def test_wilson_interval_stays_in_unit_interval_and_covers():
    assert accuracy_interval([1] * 20)[1] == 1.0
    assert accuracy_interval([0] * 20)[0] == 0.0
    assert np.isnan(accuracy_interval([])[0])
    # coverage near the boundary, where the Wald interval fails: p = 0.95, n = 40
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(2000):
        low, high = accuracy_interval(rng.random(40) < 0.95)
        hits += low <= 0.95 <= high
    assert 0.92 <= hits / 2000 <= 0.99
    with pytest.raises(ValueError, match="level"):
        accuracy_interval([1, 0], level=1.5)


def test_paired_comparison_counts_discordant_tasks_only():
    a = np.array([1] * 10 + [0] * 2 + [1] * 50 + [0] * 38, dtype=bool)
    b = np.array([0] * 10 + [1] * 2 + [1] * 50 + [0] * 38, dtype=bool)
    out = paired_comparison(a, b)
    assert (out["only_a"], out["only_b"], out["n"]) == (10, 2, 100)
    assert out["difference"] == pytest.approx(0.08)
    # exact McNemar: 2 P(X <= 2), X ~ Binomial(12, 1/2) = 2 * 79 / 4096
    assert out["p_value"] == pytest.approx(158 / 4096)
    assert out["low"] < out["difference"] < out["high"]
    swapped = paired_comparison(b, a)
    assert swapped["difference"] == pytest.approx(-out["difference"])
    assert swapped["p_value"] == pytest.approx(out["p_value"])
    same = paired_comparison(a, a)
    assert same["difference"] == 0.0 and same["p_value"] == 1.0
    with pytest.raises(ValueError, match="one length"):
        paired_comparison(a, b[:-1])


def test_paired_interval_matches_mean_of_paired_differences():
    rng = np.random.default_rng(1)
    a, b = rng.random(300) < 0.8, rng.random(300) < 0.7
    d = a.astype(float) - b.astype(float)
    out = paired_comparison(a, b)
    half = stats.norm.ppf(0.975) * d.std() / np.sqrt(len(d))  # population sd: the plug-in variance
    assert out["high"] - out["difference"] == pytest.approx(half)


def test_correct_per_task_counts_missing_labels_as_wrong():
    truth = pd.Series(["a", "b", "a"], index=["t1", "t2", "t3"])
    labels = pd.Series(["a", "b"], index=["t1", "t2"])
    assert correct_per_task(labels, truth).tolist() == [1.0, 1.0, 0.0]


def test_run_methods_reports_intervals_and_test_against_best():
    data = simulate.dawid_skene(n_tasks=300, n_workers=20, n_classes=3, labels_per_task=5,
                                spammers=0.3, seed=0)
    long = run_methods({"sim": data}, ["mv", "ds"])
    assert (long["n_gold"] == 300).all()
    assert (long["low"] <= long["accuracy"]).all() and (long["accuracy"] <= long["high"]).all()
    best = long["accuracy"].idxmax()
    assert np.isnan(long.loc[best, "vs_best_p"])
    other = long.drop(index=best)
    assert ((other["vs_best_p"] > 0) & (other["vs_best_p"] <= 1)).all()
    assert (long["log_loss"] > 0).all() and long["ece"].between(0, 1).all()


def test_run_methods_reports_a_missing_optional_dependency(monkeypatch):
    """A method whose optional dependency is missing (MMLC without torch, now that folders'
    features reach it) is one row's error, not the end of the table."""
    from crowdlearn.aggregation.majority_vote import MajorityVote

    def no_torch(self, *args, **kwargs):
        raise ImportError("No module named 'torch'")

    monkeypatch.setattr(MajorityVote, "fit", no_torch)
    data = simulate.dawid_skene(n_tasks=50, n_workers=8, n_classes=2, labels_per_task=3, seed=0)
    long = run_methods({"sim": data}, ["mv", "ds"]).set_index("method")
    assert long.loc["mv", "error"] == "No module named 'torch'" and np.isnan(long.loc["mv", "accuracy"])
    assert long.loc["ds", "accuracy"] > 0.5


def test_benchmark_prints_interval_and_calibration(tmp_path, capsys):
    data = simulate.dawid_skene(n_tasks=120, n_workers=10, n_classes=2, labels_per_task=4, seed=3)
    frame = data.to_frame()
    frame.to_csv(tmp_path / "labels.csv", index=False)
    data.truth_series().rename_axis("task").reset_index().to_csv(tmp_path / "truth.csv", index=False)
    assert main(["benchmark", str(tmp_path), "--methods", "mv,ds"]) == 0
    out = capsys.readouterr().out
    assert "95% CI" in out and "ECE" in out and "p vs best" in out
    assert "120 gold tasks" in out
