"""Ordinal answers: the ordering rule, monotone recombination, recovery of planted workers,
metrics, and trec2010 (graded relevance)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crowdlearn.core.data import CrowdLabels
from crowdlearn.diagnostics.ordinal_metrics import krippendorff_alpha, ordinal_mae, quadratic_kappa
from crowdlearn.ordinal.base import monotone_survival, ordered_classes, ordinal_order, survival_to_probas
from crowdlearn.ordinal.cumulative import OrdinalCumulative
from crowdlearn.ordinal.ordinal_ds import OrdinalDawidSkene, ordinal_confusions
from crowdlearn.registry import get_method, methods
from crowdlearn.simulate.ordinal import ordinal_crowd

from conftest import SHARED_DATA, skip_missing


# ------------------------------------------------------------------------ the ordering rule
def test_numbers_in_numeric_order_even_as_text():
    classes = pd.Index(["1", "10", "2", "-2"])  # a table's own order, e.g. given as classes=
    assert list(ordered_classes(classes)) == ["-2", "1", "2", "10"]
    assert list(ordered_classes(pd.Index([3, 1.5, -1]))) == [-1, 1.5, 3]


def test_given_order_wins_and_text_keeps_table_order():
    classes = pd.Index(["bad", "good", "ok"])
    assert list(ordered_classes(classes)) == ["bad", "good", "ok"]  # the table's order
    assert list(ordered_classes(classes, ["bad", "ok", "good"])) == ["bad", "ok", "good"]
    # a number may be given by another spelling
    assert list(ordinal_order(pd.Index(["1", "2", "10"]), [10, 2, 1])) == [2, 1, 0]


@pytest.mark.parametrize("given, message", [
    (["bad", "ok"], "missing"),
    (["bad", "ok", "great"], "not a class"),
    (["bad", "ok", "ok"], "every class"),
])
def test_given_order_errors(given, message):
    with pytest.raises(ValueError, match=message):
        ordinal_order(pd.Index(["bad", "good", "ok"]), given)


def test_fit_uses_numeric_order_of_text_grades():
    data, _ = ordinal_crowd(n_tasks=150, n_workers=10, n_classes=3, seed=0,
                            classes=["2", "10", "30"])  # lexicographic: "10" < "2" < "30"
    # a table whose own class order is not the grades' (its classes given in text order)
    text = CrowdLabels.from_frame(data.to_frame().astype(str), classes=["10", "2", "30"])
    assert list(text.classes) == ["10", "2", "30"]
    assert list(CrowdLabels.from_frame(data.to_frame().astype(str)).classes) == ["2", "10", "30"]
    est = OrdinalDawidSkene().fit(text)
    assert list(est.order_) == ["2", "10", "30"]
    assert list(est.probas_.columns) == ["10", "2", "30"]  # the table's order, as every aggregator
    # the user's order of a text scale
    named = CrowdLabels.from_frame(data.to_frame().replace({"label": {"2": "low", "10": "mid", "30": "high"}}))
    est = OrdinalCumulative(classes=["low", "mid", "high"]).fit(named)
    assert list(est.order_) == ["low", "mid", "high"]


@pytest.mark.parametrize("method", ["ordinal-ds", "ordinal-cumulative"])
def test_reversed_order_same_posteriors(method):
    data, _ = ordinal_crowd(n_tasks=200, n_workers=15, n_classes=4, seed=3)
    up = get_method(method)().fit(data)
    down = get_method(method)(classes=[3, 2, 1, 0]).fit(data)
    np.testing.assert_allclose(down.probas_.to_numpy(), up.probas_.to_numpy(), atol=1e-5)


# -------------------------------------------------------------------- monotone recombination
def test_monotone_survival_is_isotonic_regression():
    from sklearn.isotonic import IsotonicRegression

    rng = np.random.default_rng(0)
    raw = rng.random((200, 5))
    got = monotone_survival(raw)
    assert np.all(np.diff(got, axis=1) <= 1e-12)
    iso = IsotonicRegression(increasing=False)
    want = np.array([iso.fit_transform(np.arange(5), row) for row in raw])
    np.testing.assert_allclose(got, want, atol=1e-12)
    ok = np.sort(raw, axis=1)[:, ::-1]  # already monotone rows are unchanged
    np.testing.assert_allclose(monotone_survival(ok), ok)


def test_survival_to_probas_is_a_distribution():
    s = monotone_survival(np.random.default_rng(1).random((50, 3)))
    p = survival_to_probas(s)
    assert np.all(p >= 0)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    np.testing.assert_allclose(1 - np.cumsum(p, axis=1)[:, :-1], s, atol=1e-12)


def test_cumulative_is_the_binary_fits_recombined():
    from crowdlearn.aggregation.dawid_skene import DawidSkene

    data, _ = ordinal_crowd(n_tasks=300, n_workers=12, n_classes=4, seed=2, spammers=0.2)
    est = OrdinalCumulative().fit(data)
    raw = []
    for k in range(3):
        binary = CrowdLabels(data.task, data.worker, (data.label > k).astype(np.int32),
                             tasks=data.tasks, workers=data.workers, classes=pd.Index([0, 1]))
        raw.append(DawidSkene().fit(binary).probas_[1].to_numpy())
    raw = np.column_stack(raw)
    np.testing.assert_allclose(est.raw_survival_.to_numpy(), raw, atol=1e-12)
    np.testing.assert_allclose(est.probas_.to_numpy(), survival_to_probas(monotone_survival(raw)), atol=1e-12)
    assert np.all(np.diff(est.survival_.to_numpy(), axis=1) <= 1e-12)
    # another binary method by name, with parameters
    mv = OrdinalCumulative(method="mv").fit(data)
    assert len(mv.estimators_) == 3 and type(mv.estimators_[0]).__name__ == "MajorityVote"


def test_cumulative_refuses_a_non_aggregator():
    data, _ = ordinal_crowd(n_tasks=50, n_workers=5, n_classes=3, seed=0)
    with pytest.raises(ValueError, match="unknown classification method"):
        OrdinalCumulative(method="raykar").fit(data)


# ----------------------------------------------------------------- planted worker recovery
def test_ordinal_ds_recovers_planted_bias_and_spread():
    data, planted = ordinal_crowd(n_tasks=1500, n_workers=30, n_classes=5, labels_per_task=5,
                                  bias_sd=0.5, spread=(0.2, 1.0), seed=4)
    est = OrdinalDawidSkene(spam_prior=None).fit(data)
    assert np.corrcoef(est.bias_, planted.bias)[0, 1] > 0.95
    assert np.corrcoef(np.log(est.spread_), np.log(planted.spread))[0, 1] > 0.95
    assert np.mean(np.abs(est.bias_.to_numpy() - planted.bias)) < 0.1
    # the confusions are the model's, in the table's class order
    np.testing.assert_allclose(est.confusions_, ordinal_confusions(est.bias_, est.spread_, n_classes=5),
                               atol=1e-12)


def test_constant_workers_carry_no_information():
    """A worker who always gives one grade: at an extreme grade the ordinal rows express it
    (a large bias); at a middle grade only the spam component does."""
    data, planted = ordinal_crowd(n_tasks=800, n_workers=30, n_classes=4, constant=0.2, seed=5)
    middle = planted.spammer & (planted.confusions[:, 0, [1, 2]].sum(axis=1) > 0.99)
    assert middle.any()

    def row_gap(est):  # how much a worker's answer distribution depends on the true grade
        c = est.confusions_[planted.spammer]
        return np.abs(c[:, :, None, :] - c[:, None, :, :]).sum(-1).max(axis=(1, 2))

    with_spam = OrdinalDawidSkene().fit(data)
    assert row_gap(with_spam).max() < 0.2
    assert with_spam.spam_[middle].min() > 0.8 > 0.2 > with_spam.spam_[~planted.spammer].max()
    assert row_gap(OrdinalDawidSkene(spam_prior=None).fit(data)).max() > 1.0
    assert np.mean(with_spam.label_codes_ == data.truth) > 0.8


@pytest.mark.parametrize("declared", [[0, 1, 2, 3, 4], [-1, 0, 1, 2, 3]])
def test_a_grade_nobody_answers_does_not_shift_the_labels(declared):
    """Declaring a fifth grade that no worker uses (a Likert extreme) left the answers'
    scale free to drift: without ``center_bias`` the MAE on this crowd rose from 0.16 to
    0.29-0.30 (0.17-0.20 with it)."""
    from crowdlearn.core.data import CrowdLabels

    def mae(est, data):
        truth = data.truth_series()
        return float(np.mean(np.abs(est.fit(data).labels_.loc[truth.index].to_numpy(float)
                                    - truth.to_numpy(float))))

    plain, _ = ordinal_crowd(n_tasks=800, n_workers=40, n_classes=4, labels_per_task=5, seed=2)
    wide = CrowdLabels.from_frame(plain.to_frame(), classes=declared, truth=plain.truth_series())
    base = mae(OrdinalDawidSkene(), plain)
    assert mae(OrdinalDawidSkene(), wide) < base + 0.05
    assert mae(OrdinalDawidSkene(center_bias=False), wide) > base + 0.1


@pytest.mark.parametrize("method", ["ordinal-ds", "ordinal-cumulative"])
def test_ordinal_methods_beat_ds_on_mae_on_simulated_crowds(method):
    from crowdlearn.aggregation.dawid_skene import DawidSkene

    maes = []
    for seed in range(2):
        data, _ = ordinal_crowd(n_tasks=600, n_workers=30, n_classes=4, spammers=0.2, seed=seed)
        maes.append([np.mean(np.abs(e.fit(data).label_codes_ - data.truth))
                     for e in (get_method(method)(), DawidSkene())])
    ordinal, ds = np.mean(maes, axis=0)
    assert ordinal < ds - 0.02


def test_registered_with_ordinal_tags():
    from crowdlearn.core.base import get_tags

    assert set(methods(kind="ordinal")) == {"ordinal-ds", "ordinal-cumulative"}
    for cls in methods(kind="ordinal").values():
        assert get_tags(cls).kind == "ordinal" and get_tags(cls).answer_type == "ordinal"


@pytest.mark.parametrize("params, message", [
    (dict(link="cauchy"), "link"),
    (dict(spread=0), "spread"),
    (dict(spam_prior=(1, -1)), "spam_prior"),
    (dict(max_iter=-1), "max_iter"),
    (dict(center_bias="yes"), "center_bias"),
])
def test_bad_parameters(params, message):
    data, _ = ordinal_crowd(n_tasks=40, n_workers=5, n_classes=3, seed=0)
    with pytest.raises(ValueError, match=message):
        OrdinalDawidSkene(**params).fit(data)


# ----------------------------------------------------------------------------------- metrics
def test_krippendorff_alpha_published_example():
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability", the 4 observers x
    # 12 units example: nominal 0.743, ordinal 0.815, interval 0.849
    rows = {"A": [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
            "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
            "C": [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
            "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None]}
    data = CrowdLabels.from_records([(u, c, v) for c, vals in rows.items()
                                     for u, v in enumerate(vals) if v is not None])
    assert krippendorff_alpha(data, "nominal") == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(data, "ordinal") == pytest.approx(0.815, abs=5e-4)
    assert krippendorff_alpha(data, "interval") == pytest.approx(0.849, abs=5e-4)
    text = CrowdLabels.from_frame(data.to_frame().astype(str))  # same answer, text grades
    assert krippendorff_alpha(text) == pytest.approx(0.815, abs=5e-4)


def test_mae_and_kappa():
    truth = pd.Series({"a": "0", "b": "1", "c": "10", "d": "2"})
    labels = pd.Series({"a": "1", "b": "1", "c": "2", "d": "2", "z": "0"})
    # ranks: 0 < 1 < 2 < 10 -> errors 1, 0, 1, 0
    assert ordinal_mae(labels, truth) == pytest.approx(0.5)
    assert quadratic_kappa(truth, truth) == pytest.approx(1.0)
    assert quadratic_kappa(labels, truth) < 1.0
    with pytest.raises(ValueError, match="give their order"):
        ordinal_mae(pd.Series({"a": "low"}), pd.Series({"a": "high"}))
    assert ordinal_mae(pd.Series({"a": "low"}), pd.Series({"a": "high"}), order=["low", "mid", "high"]) == 2


# ------------------------------------------------------------------------------ trec2010
def _trec():
    from crowdlearn.core.io import load_folder

    folder = SHARED_DATA / "trec2010"
    skip_missing(folder)
    full = load_folder(folder)
    df = full.to_frame()
    # -2 = "broken link": not a grade (SOURCE.md: never the truth); dropped for the ordinal scale
    df = df[df["label"].astype(str) != "-2"]
    return CrowdLabels.from_frame(df, truth=full.truth_series(), all_tasks=full.tasks)


def test_trec2010_ordinal_methods_against_ds():
    """Measured (benchmarks/ordinal.py): on trec2010 the cumulative decomposition over ds
    matches ds on MAE (0.585 both) and ordinal-ds is more accurate than ds but has a larger
    MAE: its workers confuse the extreme grades nearly as often as neighbouring ones."""
    from crowdlearn.aggregation.dawid_skene import DawidSkene
    from crowdlearn.aggregation.majority_vote import MajorityVote

    data = _trec()
    truth = data.truth_series()

    def scores(est):
        labels = est.fit(data).labels_
        return ordinal_mae(labels, truth), float(np.mean(labels.loc[truth.index] == truth))

    mv, ds = scores(MajorityVote()), scores(DawidSkene())
    cum, ods = scores(OrdinalCumulative()), scores(OrdinalDawidSkene())
    assert cum[0] < mv[0] - 0.05 and abs(cum[0] - ds[0]) < 0.01
    assert ods[1] > ds[1] + 0.01
    assert ods[0] < mv[0]


@pytest.mark.parametrize("link", ["logit", "probit"])
def test_m_step_gradients_match_finite_differences(link):
    from scipy.optimize import approx_fprime

    rng = np.random.default_rng(0)
    m, k = 4, 4
    counts = rng.uniform(0, 5, (m, k, k))
    est = OrdinalDawidSkene(link=link)
    mid = np.arange(k - 1) + 0.5
    for n_par in (2, 4):  # (bias, log spread), then with per-worker log gaps
        x = np.column_stack([rng.normal(0, 0.5, m), rng.normal(-0.5, 0.3, m),
                             rng.normal(0, 0.3, (m, n_par - 2))])
        grad = est._worker_objective(x, mid, counts)[1]
        num = approx_fprime(x.ravel(), lambda z: est._worker_objective(z.reshape(m, n_par), mid, counts)[0].sum(), 1e-7)
        np.testing.assert_allclose(grad.ravel(), num, atol=1e-4 * max(1.0, np.abs(num).max()))
    z = np.array([0.3, 0.1, -0.2])  # shared thresholds: first, log gaps
    theta = x[:, :2]
    num = approx_fprime(z, lambda q: est._threshold_objective(q, theta, counts)[0], 1e-7)
    np.testing.assert_allclose(est._threshold_objective(z, theta, counts)[1], num, atol=1e-4 * max(1.0, np.abs(num).max()))


@pytest.mark.parametrize("params", [dict(fit_thresholds=True), dict(worker_thresholds=True)])
def test_threshold_variants_fit_planted_crowds(params):
    data, _ = ordinal_crowd(n_tasks=400, n_workers=15, n_classes=4, thresholds=[0.3, 1.5, 2.8], seed=6)
    est = OrdinalDawidSkene(**params).fit(data)
    assert np.mean(np.abs(est.label_codes_ - data.truth)) < 0.25
    if "fit_thresholds" in params:
        assert np.all(np.diff(est.thresholds_) > 0)
    else:
        assert est.worker_thresholds_.shape == (15, 3)
        assert np.all(np.diff(est.worker_thresholds_.to_numpy(), axis=1) > 0)


@pytest.mark.parametrize("method", ["ordinal-ds", "ordinal-cumulative"])
def test_gold_is_learnt_from_and_predict_proba_scores_new_answers(method):
    data, _ = ordinal_crowd(n_tasks=300, n_workers=12, n_classes=4, seed=8, spammers=0.25)
    truth = data.truth_series()
    est = get_method(method)().fit(data, gold=truth.iloc[:100])
    assert (est.labels_.iloc[:100] == truth.iloc[:100]).all()
    plain = get_method(method)().fit(data)
    # the training answers scored by the fitted workers are the fit's posteriors
    np.testing.assert_allclose(plain.predict_proba(data).to_numpy(), plain.probas_.to_numpy(), atol=1e-8)


def test_benchmark_scores_ordinal_folders(tmp_path, capsys):
    """``crowdlearn benchmark --kind ordinal`` printed only the seconds: no scorer was
    registered for the kind.  It reports accuracy, MAE (classes) and quadratic kappa, the
    accuracy the same as ``aggregate --gold``."""
    from crowdlearn.benchmarking import run_kind_methods
    from crowdlearn.cli import main

    data, _ = ordinal_crowd(n_tasks=200, n_workers=15, n_classes=4, seed=0)
    data.to_frame().to_csv(tmp_path / "labels.csv", index=False)
    data.truth_series().rename("truth").rename_axis("task").to_csv(tmp_path / "truth.csv")
    table = run_kind_methods({"sim": data}, "ordinal", ["ordinal-ds"])
    assert {"accuracy", "mae", "quadratic_kappa"} <= set(table.columns)
    fitted = get_method("ordinal-ds")().fit(data)
    assert table["accuracy"].iloc[0] == pytest.approx(np.mean(fitted.label_codes_ == data.truth))
    assert main(["benchmark", str(tmp_path), "--kind", "ordinal", "--methods", "ordinal-ds"]) == 0
    header, row = capsys.readouterr().out.strip().splitlines()[:2]
    assert header.split()[2:5] == ["accuracy", "mae", "quadratic_kappa"]
    assert 0.5 < float(row.split()[2]) <= 1.0


def test_benchmark_refuses_ordinal_text_labels_it_cannot_order(tmp_path, capsys):
    """An ordinal folder with text grades (bad, ok, good) was benchmarked in alphabetical
    order (bad < good < ok), its MAE and kappa scoring a wrong order without a word, while
    ``aggregate`` refuses such labels; the folder is now refused, naming it and the label."""
    from crowdlearn.cli import main

    data, _ = ordinal_crowd(n_tasks=30, n_workers=5, n_classes=3, seed=0)
    words = {0: "bad", 1: "ok", 2: "good"}
    frame = data.to_frame()
    frame["label"] = frame["label"].map(lambda c: words[int(c)])
    frame.to_csv(tmp_path / "labels.csv", index=False)
    truth = data.truth_series().map(lambda c: words[int(c)])
    truth.rename("truth").rename_axis("task").to_csv(tmp_path / "truth.csv")
    (tmp_path / "SOURCE.md").write_text("# grades\n\n- kind: ordinal\n")
    assert main(["benchmark", str(tmp_path), "--methods", "ordinal-ds"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"crowdlearn: error: {tmp_path}: ordinal label 'bad' is not a number")
    assert captured.err.count("\n") == 1
    # numbers stay scored
    frame["label"] = frame["label"].map({"bad": 1, "ok": 2, "good": 3})
    frame.to_csv(tmp_path / "labels.csv", index=False)
    truth.map({"bad": 1, "ok": 2, "good": 3}).rename("truth").rename_axis("task").to_csv(tmp_path / "truth.csv")
    assert main(["benchmark", str(tmp_path), "--methods", "ordinal-ds"]) == 0


def test_cli_ordinal_text_gold_names_the_gold_file(tmp_path, capsys):
    """Number answers with a gold file of text grades were refused as "labels.csv: ordinal
    label 'bad' is not a number", naming the answers file, which holds no such label."""
    from crowdlearn.cli import main

    src, gold = tmp_path / "labels.csv", tmp_path / "truth.csv"
    src.write_text("task,worker,label\nt1,a,1\nt1,b,2\nt2,a,2\n")
    gold.write_text("task,truth\nt1,bad\n")
    assert main(["aggregate", str(src), "--kind", "ordinal", "--gold", str(gold)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"crowdlearn: error: {gold}: gold ordinal label 'bad' is not a number")
    assert err.count("\n") == 1


@pytest.mark.parametrize("positional", [np.array(["0", "1", "2"]), ["0", "1", "2"]])
def test_ordinal_metrics_refuse_positional_input(positional):
    """A list used to be a TypeError; it is the library's one ValueError for unkeyed gold."""
    keyed = pd.Series({"a": "0", "b": "2"})
    for fn in (ordinal_mae, quadratic_kappa):
        with pytest.raises(ValueError, match=r"^truth must be keyed by task id"):
            fn(keyed, positional)
        with pytest.raises(ValueError, match=r"^labels must be keyed by task id"):
            fn(positional, keyed)
    assert ordinal_mae(keyed, {"a": "1", "b": "2"}) == ordinal_mae(keyed, pd.Series({"a": "1", "b": "2"})) == 0.5
