"""Tests of crowdlearn.diagnostics.metrics against published worked examples and brute-force formulas."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from crowdlearn import metrics
from crowdlearn.core.data import CrowdLabels

NAN = np.nan

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C:
# 4 observers x 12 units, nominal values 1..5, missing data.
KRIPP_WIDE = pd.DataFrame(
    {
        "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
        "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
        "C": [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
        "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
    }
)

# Wikipedia, "Fleiss' kappa", worked example: 10 subjects, 14 raters, 5 categories.
FLEISS_COUNTS = np.array(
    [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
)


def counts_to_labels(counts: np.ndarray) -> CrowdLabels:
    """One answer per unit of count; worker codes are the answer's rank within its task."""
    task, label = [], []
    for i, row in enumerate(counts):
        for c, n in enumerate(row):
            task += [i] * int(n)
            label += [c] * int(n)
    task = np.array(task)
    worker = np.concatenate([np.arange(int(n)) for n in counts.sum(axis=1)])
    return CrowdLabels.from_codes(task, worker, np.array(label), n_classes=counts.shape[1])


def random_labels(seed: int, n_tasks=40, n_workers=7, n_classes=4, p_missing=0.4) -> CrowdLabels:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, n_classes, n_tasks)
    t, w = np.nonzero(rng.random((n_tasks, n_workers)) > p_missing)
    correct = rng.random(len(t)) < 0.6
    label = np.where(correct, truth[t], rng.integers(0, n_classes, len(t)))
    return CrowdLabels.from_codes(t, w, label, n_tasks=n_tasks, n_workers=n_workers,
                                  n_classes=n_classes, truth=truth)


def brute_alpha(labels: CrowdLabels, delta2) -> float:
    """Krippendorff's alpha from its pairwise definition, with explicit loops."""
    units = [labels.label[labels.task_ptr[u]:labels.task_ptr[u + 1]] for u in range(labels.n_tasks)]
    units = [v for v in units if len(v) >= 2]
    values = np.concatenate(units)
    n = len(values)
    within = sum(
        sum(delta2(a, b) for a, b in itertools.permutations(v, 2)) / (len(v) - 1) for v in units
    )
    between = sum(delta2(a, b) for a, b in itertools.permutations(values, 2))
    return 1.0 - (n - 1) * within / between


# ------------------------------------------------------------------ Krippendorff alpha
class TestKrippendorffAlpha:
    def test_canonical_nominal_example(self):
        labels = CrowdLabels.from_wide(KRIPP_WIDE)
        assert metrics.krippendorff_alpha(labels) == pytest.approx(0.743, abs=5e-4)

    @pytest.mark.parametrize(
        "level, expected", [("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)]
    )
    def test_canonical_other_levels(self, level, expected):
        labels = CrowdLabels.from_wide(KRIPP_WIDE)
        assert metrics.krippendorff_alpha(labels, level) == pytest.approx(expected, abs=5e-4)

    def test_accepts_long_dataframe(self):
        frame = CrowdLabels.from_wide(KRIPP_WIDE).to_frame()
        assert metrics.krippendorff_alpha(frame) == pytest.approx(0.7434, abs=1e-4)

    def test_perfect_agreement_is_one(self):
        task = np.repeat(np.arange(6), 3)
        labels = CrowdLabels.from_codes(task, np.tile([0, 1, 2], 6), task % 3)
        for level in ("nominal", "ordinal", "interval", "ratio"):
            assert metrics.krippendorff_alpha(labels, level) == pytest.approx(1.0)

    @pytest.mark.parametrize("seed", [0, 1, 2])
    def test_matches_pairwise_definition(self, seed):
        labels = random_labels(seed)
        nominal = brute_alpha(labels, lambda a, b: float(a != b))
        interval = brute_alpha(labels, lambda a, b: float(a - b) ** 2)
        assert metrics.krippendorff_alpha(labels) == pytest.approx(nominal, abs=1e-12)
        assert metrics.krippendorff_alpha(labels, "interval") == pytest.approx(interval, abs=1e-12)

    def test_single_answer_tasks_are_ignored(self):
        labels = random_labels(3)
        extra = CrowdLabels.from_codes(
            np.concatenate([labels.task, [labels.n_tasks, labels.n_tasks + 1]]),
            np.concatenate([labels.worker, [0, 1]]),
            np.concatenate([labels.label, [0, 3]]),
            n_classes=labels.n_classes,
        )
        assert metrics.krippendorff_alpha(extra) == pytest.approx(
            metrics.krippendorff_alpha(labels), abs=1e-12
        )

    def test_ordinal_uses_numeric_order_not_code_order(self):
        wide = KRIPP_WIDE.replace({1: 10, 2: 20, 3: 30, 4: 40, 5: 50})
        labels = CrowdLabels.from_wide(wide)
        assert metrics.krippendorff_alpha(labels, "ordinal") == pytest.approx(0.815, abs=5e-4)

    def test_no_variation_is_nan(self):
        labels = CrowdLabels.from_codes([0, 0, 1, 1], [0, 1, 0, 1], [0, 0, 0, 0], n_classes=2)
        assert np.isnan(metrics.krippendorff_alpha(labels))

    def test_errors(self):
        with pytest.raises(ValueError, match="two or more"):
            metrics.krippendorff_alpha(CrowdLabels.from_codes([0, 1], [0, 0], [0, 1]))
        labels = CrowdLabels.from_records([(1, "a", "x"), (1, "b", "y"), (2, "a", "x"), (2, "b", "x")])
        with pytest.raises(ValueError, match="numeric"):
            metrics.krippendorff_alpha(labels, "interval")
        with pytest.raises(ValueError, match="level"):
            metrics.krippendorff_alpha(labels, "cardinal")
        # ordinal falls back on the class order for non-numeric classes
        assert np.isfinite(metrics.krippendorff_alpha(labels, "ordinal"))

    def test_no_tasks_by_workers_allocation(self):
        # 100k workers x 50k tasks would be 5e9 cells: must stay sparse
        rng = np.random.default_rng(0)
        n_tasks, n_workers = 50_000, 100_000
        task = np.repeat(np.arange(n_tasks), 3)
        worker = rng.integers(0, n_workers, len(task))
        label = rng.integers(0, 3, len(task))
        labels = CrowdLabels.from_codes(task, worker, label, n_workers=n_workers, n_classes=3)
        assert abs(metrics.krippendorff_alpha(labels)) < 0.02
        assert abs(metrics.fleiss_kappa(labels)) < 0.02


# ----------------------------------------------------------------------- Fleiss kappa
class TestFleissKappa:
    def test_wikipedia_example_counts(self):
        assert metrics.fleiss_kappa(FLEISS_COUNTS) == pytest.approx(0.210, abs=5e-4)

    def test_wikipedia_example_labels(self):
        labels = counts_to_labels(FLEISS_COUNTS)
        assert metrics.fleiss_kappa(labels) == pytest.approx(0.20993, abs=1e-5)

    def test_variable_counts_generalisation(self):
        labels = random_labels(5)
        counts = labels.vote_counts()
        n_i = counts.sum(axis=1)
        ok = n_i >= 2
        p_i = ((counts**2).sum(axis=1) - n_i)[ok] / (n_i * (n_i - 1))[ok]
        p_j = counts[ok].sum(axis=0) / counts[ok].sum()
        p_e = (p_j**2).sum()
        expected = (p_i.mean() - p_e) / (1 - p_e)
        assert metrics.fleiss_kappa(labels) == pytest.approx(expected, abs=1e-12)
        assert metrics.fleiss_kappa(counts) == pytest.approx(expected, abs=1e-12)

    def test_perfect_agreement_and_degenerate(self):
        assert metrics.fleiss_kappa(np.array([[3, 0], [0, 3], [3, 0]])) == pytest.approx(1.0)
        assert np.isnan(metrics.fleiss_kappa(np.array([[3, 0], [2, 0]])))
        with pytest.raises(ValueError, match="two or more"):
            metrics.fleiss_kappa(np.array([[1, 0], [0, 1]]))


# --------------------------------------------------------------------------- accuracy
class TestAccuracy:
    def test_counts_only_gold_tasks(self):
        pred = pd.Series({"a": 1, "b": 2, "c": 3, "d": 4})
        truth = pd.Series({"a": 1, "b": 0, "c": NAN, "e": 5})
        assert metrics.accuracy(pred, truth) == pytest.approx(0.5)
        assert metrics.accuracy(pred, {"a": 1, "d": 4}) == pytest.approx(1.0)

    def test_missing_prediction_is_an_error(self):
        pred = pd.Series({"a": 1, "b": None}, dtype=object)
        assert metrics.accuracy(pred, {"a": 1, "b": 2}) == pytest.approx(0.5)

    def test_crowd_labels_truth(self):
        labels = random_labels(0)
        pred = pd.Series(labels.classes.take(labels.truth), index=labels.tasks)
        assert metrics.accuracy(pred, labels) == 1.0

    def test_no_overlap(self):
        with pytest.raises(ValueError, match="overlap"):
            metrics.accuracy(pd.Series({"a": 1}), pd.Series({"b": 1}))
        with pytest.raises(ValueError, match="no gold"):
            metrics.accuracy(pd.Series({"a": 1}), CrowdLabels.from_codes([0], [0], [0]))


# -------------------------------------------------------------------- worker models
class TestWorkerMetrics:
    def test_confusion_error(self):
        rng = np.random.default_rng(0)
        true = rng.dirichlet(np.ones(3), size=(4, 3))
        assert metrics.confusion_error(true, true) == {"frobenius": 0.0, "max_abs": 0.0}
        est = true.copy()
        est[1, 0, 0] += 0.3
        est[1, 0, 1] -= 0.4
        err = metrics.confusion_error(est, true)
        assert err["frobenius"] == pytest.approx(0.5 / 4)
        assert err["max_abs"] == pytest.approx(0.4)
        assert metrics.confusion_error(true[0], true[0])["frobenius"] == 0.0
        with pytest.raises(ValueError, match="shape"):
            metrics.confusion_error(true, true[:2])

    def test_worker_accuracy(self):
        labels = CrowdLabels.from_codes(
            [0, 0, 1, 1, 2, 2], [0, 1, 0, 2, 0, 1], [1, 1, 0, 1, 1, 0], truth=[1, 0, -1]
        )
        out = metrics.worker_accuracy(labels)
        assert list(out.columns) == ["n_gold", "n_correct", "accuracy"]
        assert out["n_gold"].tolist() == [2, 1, 1]
        assert out["n_correct"].tolist() == [2, 1, 0]
        assert out["accuracy"].tolist() == [1.0, 1.0, 0.0]
        # overriding gold; a worker without gold answers gets NaN
        over = metrics.worker_accuracy(labels, truth={2: 0})
        assert over["n_gold"].tolist() == [1, 1, 0]
        assert over["accuracy"].iloc[0] == 0.0 and np.isnan(over["accuracy"].iloc[2])
        with pytest.raises(ValueError, match="gold"):
            metrics.worker_accuracy(CrowdLabels.from_codes([0], [0], [0]))


# ----------------------------------------------------------------------- posteriors
class TestPosteriorMetrics:
    @staticmethod
    def calibrated(n=200_000, k=4, seed=0):
        rng = np.random.default_rng(seed)
        proba = rng.dirichlet(np.full(k, 0.7), size=n)
        u = rng.random(n)[:, None]
        truth = (u > proba.cumsum(axis=1)).sum(axis=1)  # truth ~ proba: calibrated
        return proba, np.minimum(truth, k - 1)

    def test_log_loss(self):
        proba, truth = self.calibrated(n=5_000)
        frame = pd.DataFrame(proba, columns=list("abcd"))
        gold = pd.Series(np.array(list("abcd"))[truth])
        expected = -np.mean([np.log(max(p[t], 1e-15)) for p, t in zip(proba, truth)])
        assert metrics.log_loss(frame, gold) == pytest.approx(expected, rel=1e-9)
        assert metrics.log_loss(proba, truth) == pytest.approx(expected, rel=1e-9)
        uniform = pd.DataFrame(np.full((3, 4), 0.25), columns=list("abcd"))
        assert metrics.log_loss(uniform, {0: "a", 2: "d"}) == pytest.approx(np.log(4))

    def test_ece_of_calibrated_posteriors_is_near_zero(self):
        proba, truth = self.calibrated()
        frame = pd.DataFrame(proba)
        assert metrics.expected_calibration_error(frame, pd.Series(truth)) < 0.01

    def test_ece_of_overconfident_posteriors(self):
        proba, truth = self.calibrated()
        sharp = np.zeros_like(proba)
        sharp[np.arange(len(proba)), proba.argmax(axis=1)] = 1.0
        acc = (proba.argmax(axis=1) == truth).mean()
        assert metrics.expected_calibration_error(sharp, truth) == pytest.approx(1 - acc)

    def test_ece_hand_example(self):
        proba = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.45, 0.55]])
        truth = np.array([0, 1, 1, -1])  # the last task has no gold
        # bins: 0.9 -> (0.8, 0.9] correct; 0.8 -> (0.7, 0.8] wrong; 0.7 -> (0.6, 0.7] correct
        expected = (abs(1 - 0.9) + abs(0 - 0.8) + abs(1 - 0.7)) / 3
        assert metrics.expected_calibration_error(proba, truth, n_bins=10) == pytest.approx(expected)

    def test_alignment_and_errors(self):
        frame = pd.DataFrame([[0.2, 0.8], [0.6, 0.4]], index=["t1", "t2"], columns=["x", "y"])
        assert metrics.log_loss(frame, {"t2": "x", "zz": "y"}) == pytest.approx(-np.log(0.6))
        with pytest.raises(ValueError, match="overlap"):
            metrics.log_loss(frame, {"zz": "x"})
        with pytest.raises(ValueError, match="not a column"):
            metrics.expected_calibration_error(frame, {"t1": "w"})
        with pytest.raises(ValueError, match="n_bins"):
            metrics.expected_calibration_error(frame, {"t1": "x"}, n_bins=0)


# ------------------------------------------------------------------ gold keyed by task id
class TestKeyedTruth:
    """With integer task ids an array or list of truth used to be keyed 0..n-1 (accuracy,
    worker_accuracy: a TypeError before; now one ValueError naming the keyed forms); array
    probas with integer codes per row stay the documented positional form."""

    labels = CrowdLabels.from_codes([0, 0, 1, 1, 2, 2], [0, 1, 0, 2, 0, 1], [1, 1, 0, 1, 1, 0],
                                    tasks=[12, 11, 10], classes=["a", "b"])
    frame = pd.DataFrame([[0.2, 0.8], [0.6, 0.4], [0.5, 0.5]], index=[12, 11, 10], columns=["a", "b"])

    @pytest.mark.parametrize("truth", [np.array(["b", "a", "b"]), ["b", "a", "b"], pd.Index(["b", "a", "b"])])
    def test_positional_truth_is_refused(self, truth):
        words = r"^truth must be keyed by task id \(a pandas Series indexed by task, or a dict task -> class\)"
        with pytest.raises(ValueError, match=words + r".*a CrowdLabels with gold works too"):
            metrics.accuracy(pd.Series(["b", "a", "b"], index=[12, 11, 10]), truth)
        with pytest.raises(ValueError, match=words):
            metrics.worker_accuracy(self.labels, truth=truth)
        with pytest.raises(ValueError, match=words + r".*only with array probas"):
            metrics.log_loss(self.frame, truth)
        with pytest.raises(ValueError, match=words):
            metrics.expected_calibration_error(self.frame, truth)
        with pytest.raises(ValueError, match=r"^pred must be keyed by task id"):
            metrics.accuracy(truth, pd.Series(["b", "a", "b"], index=[12, 11, 10]))

    def test_keyed_truth_scores_as_before(self):
        for truth in (pd.Series(["b", "b"], index=[12, 10]), {12: "b", 10: "b"}):
            assert metrics.accuracy(pd.Series({12: "b", 11: "a", 10: "a"}), truth) == 0.5
            assert metrics.accuracy({12: "b", 11: "a", 10: "a"}, truth) == 0.5
            out = metrics.worker_accuracy(self.labels, truth=truth)
            assert out["n_gold"].tolist() == [2, 2, 0] and out["n_correct"].tolist() == [2, 1, 0]
            assert metrics.log_loss(self.frame, truth) == pytest.approx(-(np.log(0.8) + np.log(0.5)) / 2)
        # the documented positional form: array probas and integer codes per row
        codes = np.array([1, -1, 1])
        assert metrics.log_loss(self.frame.to_numpy(), codes) == pytest.approx(-(np.log(0.8) + np.log(0.5)) / 2)
        assert metrics.expected_calibration_error(self.frame.to_numpy(), codes) == pytest.approx(
            metrics.expected_calibration_error(self.frame, {12: "b", 10: "b"}))
