"""Fairness: per-group rates, disparities, worker bias per group, group-conditional workers, thresholds."""

import numpy as np
import pandas as pd
import pytest

from crowdlearn.fairness import (
    disparities,
    fair_thresholds,
    group_report,
    split_workers_by_group,
    worker_bias_table,
)
from crowdlearn.core.data import CrowdLabels
from crowdlearn.registry import get_method
from conftest import SHARED_DATA, load_shared, skip_missing


def _biased_crowd(seed=0, n=2000, workers=20, per_task=5):
    """Binary truth, two task groups; every worker's false-positive rate is 0.1 on group a
    and 0.4 on group b (false negatives 0.2 on both)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n)
    group = np.where(rng.random(n) < 0.5, "a", "b")
    rows = []
    for t in range(n):
        fp = 0.1 if group[t] == "a" else 0.4
        for w in rng.choice(workers, per_task, replace=False):
            flip = rng.random() < (fp if truth[t] == 0 else 0.2)
            rows.append((t, w, int(truth[t] ^ flip)))
    df = pd.DataFrame(rows, columns=["task", "worker", "label"])
    return df, pd.Series(truth), pd.Series(group)


def test_group_report_counts_and_rates():
    pred = pd.Series([1, 1, 0, 0, 1, 0], index=list("uvwxyz"))
    truth = pd.Series([1, 0, 0, 1, 1, 0], index=list("uvwxyz"))
    groups = pd.Series(["a", "a", "a", "b", "b", "b"], index=list("uvwxyz"))
    rep = group_report(pred, truth, groups)
    assert rep.loc["a", "fpr"] == pytest.approx(0.5) and rep.loc["a", "tpr"] == 1.0
    assert rep.loc["b", "fnr"] == pytest.approx(0.5) and rep.loc["b", "fpr"] == 0.0
    assert rep.loc["a", "positive_rate"] == pytest.approx(2 / 3)
    d = disparities(rep, theta=0.5)
    assert d["demographic_parity_difference"] == pytest.approx(1 / 3) and d["theta_fair"]
    # a group without gold negatives reports NaN, not 0
    rep2 = group_report(pred, truth.where(truth == 1), groups)
    assert np.isnan(rep2.loc["a", "fpr"]) and rep2.loc["a", "gold_negative"] == 0


def test_bad_groups_get_one_clear_error():
    pred = pd.Series([1, 0], index=["u", "v"])
    with pytest.raises(ValueError, match="at least two groups"):
        group_report(pred, None, pd.Series(["a", "a"], index=["u", "v"]))
    with pytest.raises(ValueError, match="no group for task 'v'"):
        group_report(pred, None, pd.Series(["a"], index=["u"]))
    # groups of size one are a documented result: their rates stand on one task
    rep = group_report(pred, pred, pd.Series(["a", "b"], index=["u", "v"]))
    assert rep["tasks"].tolist() == [1, 1]


def test_worker_bias_table_recovers_planted_group_error_rates():
    df, truth, group = _biased_crowd()
    table = worker_bias_table(df, truth, group)
    fpr = table["fpr"].unstack("group")
    assert abs(fpr["a"].mean() - 0.1) < 0.03 and abs(fpr["b"].mean() - 0.4) < 0.04
    assert (table["fpr_gap"].groupby(level="worker").first() > 0.15).all()
    assert (table["answers"] > 0).all()


def test_group_conditional_workers_learn_the_planted_bias():
    df, truth, group = _biased_crowd(seed=1)
    split = split_workers_by_group(df, group)
    assert split.n_workers == 40 and split.n_tasks == 2000
    ds = get_method("ds")().fit(split)
    workers = ds.skills_.index
    conf = ds.confusions_
    a = [i for i, w in enumerate(workers) if w.endswith("|a")]
    b = [i for i, w in enumerate(workers) if w.endswith("|b")]
    assert abs(conf[a, 0, 1].mean() - 0.1) < 0.04 and abs(conf[b, 0, 1].mean() - 0.4) < 0.05


def test_fair_thresholds_trade_accuracy_for_parity():
    df, truth, group = _biased_crowd(seed=2)
    proba = get_method("ds")().fit(df).probas_
    gaps = []
    for s in (0.0, 0.5, 1.0):
        lab = fair_thresholds(proba, group, strength=s)
        gaps.append(disparities(group_report(lab, truth, group))["demographic_parity_difference"])
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 0.01
    with pytest.raises(ValueError, match="strength"):
        fair_thresholds(proba, group, strength=2)


def test_recidivism_race_reproduces_the_paper():
    skip_missing(SHARED_DATA / "recidivism_race")
    data = load_shared("recidivism_race")
    race = pd.read_csv(SHARED_DATA / "recidivism_race" / "tasks.csv", dtype=str).set_index("task")["race"]
    race.index = race.index.astype(data.tasks.dtype)
    race = race.reindex(data.tasks)
    groups = race.where(race.isin(["African-American", "Caucasian"]), "other")
    pos, neg = data.classes[1], data.classes[0]
    mv = get_method("mv")().fit(data)
    labels = pd.Series(np.where(mv.probas_[pos] > 0.5, pos, neg), index=data.tasks)  # ties to 0, as the paper
    truth = pd.Series(data.classes.take(data.truth), index=data.tasks)
    assert (labels == truth).mean() == pytest.approx(0.665, abs=0.002)
    rep = group_report(labels, truth, groups, positive=pos)
    paper = {"African-American": (0.400, 0.301), "Caucasian": (0.262, 0.421)}
    for g, (fpr, fnr) in paper.items():
        assert abs(rep.loc[g, "fpr"] - fpr) <= 0.02 and abs(rep.loc[g, "fnr"] - fnr) <= 0.02
    # per-race thresholds halve majority vote's disparity at a small accuracy cost
    d0 = disparities(rep)["demographic_parity_difference"]
    fair = fair_thresholds(mv.probas_, groups, positive=pos, strength=0.75)
    d1 = disparities(group_report(fair, truth, groups, positive=pos))["demographic_parity_difference"]
    assert d1 <= d0 / 2 + 1e-9 and (fair == truth).mean() >= 0.65


def test_cli_group_report(tmp_path, capsys):
    from crowdlearn.cli import main

    df, truth, group = _biased_crowd(seed=4, n=300)
    df["grp"] = group.reindex(df["task"]).to_numpy()
    src, gold, out = tmp_path / "a.csv", tmp_path / "t.csv", tmp_path / "g.csv"
    df.to_csv(src, index=False)
    pd.DataFrame({"task": truth.index, "truth": truth.to_numpy()}).to_csv(gold, index=False)
    code = main(["aggregate", str(src), "--method", "mv", "--gold", str(gold), "--group-col", "grp",
                 "--group-report", str(out), "--out", str(tmp_path / "o.csv")])
    err = capsys.readouterr().err
    assert code == 0 and "demographic_parity_difference" in err
    rep = pd.read_csv(out)
    assert rep["group"].tolist() == ["a", "b"] and rep["tasks"].sum() == 300
    assert rep.set_index("group").loc["b", "fpr"] > rep.set_index("group").loc["a", "fpr"]
    one = tmp_path / "one.csv"
    df.assign(grp="x").to_csv(one, index=False)
    assert main(["aggregate", str(one), "--method", "mv", "--group-col", "grp"]) == 2
    assert "at least two groups" in capsys.readouterr().err


def test_cli_group_flags_are_checked_before_the_fit(tmp_path, capsys):
    """A bad --group-col, --positive or group file fails before the fit and writes nothing (the
    posteriors were written, then the error came); --positive 1 names the class 1 of a Parquet
    file; undefined gaps print n/a, not nan; --group-col on other answers is refused."""
    from crowdlearn.cli import main

    df = pd.DataFrame({"task": [1, 1, 2, 2, 3, 3], "worker": ["a", "b"] * 3, "label": [0, 0, 1, 1, 1, 0],
                       "grp": ["u", "u", "v", "v", None, None]})
    src, out = tmp_path / "a.csv", tmp_path / "o.csv"
    df.to_csv(src, index=False)
    for flags, message in ((["--group-col", "grp"], "no group for task '3'"),
                           (["--group-col", "nope"], "missing column(s) ['nope']"),
                           (["--group-col", "grp", "--positive", "7"], "--positive '7' is not a class")):
        assert main(["aggregate", str(src), "--out", str(out), *flags]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and not out.exists(), err
    pytest.importorskip("pyarrow")
    pq = tmp_path / "a.parquet"
    df.dropna().to_parquet(pq)
    assert main(["aggregate", str(pq), "--group-col", "grp", "--positive", "1", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "positive class '1'" in err and "np." not in err and "nan" not in err and "fpr_gap n/a" in err
    assert main(["aggregate", str(src), "--kind", "continuous", "--group-col", "grp"]) == 2
    assert "--group-col reports on class labels" in capsys.readouterr().err


def test_cli_group_file_matches_number_task_ids(tmp_path, capsys):
    """A --tasks group file (text ids) for Parquet answers with number task ids: every task
    had 'no group' before."""
    from crowdlearn.cli import main

    pytest.importorskip("pyarrow")
    src = tmp_path / "a.parquet"
    pd.DataFrame({"task": [1, 1, 2, 2], "worker": ["a", "b"] * 2, "label": ["x", "x", "y", "y"]}).to_parquet(src)
    (tmp_path / "g.csv").write_text("task,g\n1,u\n2,v\n")
    assert main(["aggregate", str(src), "--group-col", "g", "--tasks", str(tmp_path / "g.csv")]) == 0
    assert "demographic_parity_difference 1.0000" in capsys.readouterr().err


def test_cli_group_column_may_be_the_task_column(tmp_path, capsys):
    """--group-col task (a group per task) failed with pandas' 'Length of values (3) does not
    match length of index (2)'."""
    from crowdlearn.cli import main

    src = tmp_path / "a.csv"
    pd.DataFrame({"task": ["p", "p", "q", "q", "r", "r"], "worker": ["a", "b"] * 3,
                  "label": ["0", "0", "1", "1", "1", "0"]}).to_csv(src, index=False)
    out = tmp_path / "g.csv"
    assert main(["aggregate", str(src), "--method", "mv", "--group-col", "task", "--group-report", str(out),
                 "--out", str(tmp_path / "o.csv")]) == 0
    assert pd.read_csv(out)["group"].tolist() == ["p", "q", "r"]


def test_group_report_accuracy_counts_the_exact_class_with_three_classes():
    """accuracy compared the positive/negative sides, so a 'b' predicted for an 'a' (both not
    the positive 'c') counted as right: multi-class group accuracies were overstated."""
    pred = pd.Series(["b", "a", "c", "c"], index=list("wxyz"))
    truth = pd.Series(["a", "a", "c", "b"], index=list("wxyz"))
    groups = pd.Series(["g", "g", "h", "h"], index=list("wxyz"))
    rep = group_report(pred, truth, groups, positive="c")
    assert rep["accuracy"].tolist() == [0.5, 0.5]
    assert rep.loc["h", "tpr"] == 1.0 and rep.loc["h", "fpr"] == 1.0 and rep.loc["g", "fpr"] == 0.0


def test_worker_bias_error_counts_the_exact_class_with_three_classes():
    """error was (false positives + false negatives) / answers: a worker answering 'b' for an
    'a' (both not the positive 'c') was not in error."""
    answers = pd.DataFrame({"task": ["p", "q", "r", "s"], "worker": ["u"] * 4, "label": ["b", "a", "c", "a"]})
    truth = pd.Series(["a", "a", "c", "c"], index=list("pqrs"))
    groups = pd.Series(["g", "g", "h", "h"], index=list("pqrs"))
    table = worker_bias_table(answers, truth, groups, positive="c")
    assert table["error"].tolist() == [0.5, 0.5] and table["fnr"].tolist()[1] == 0.5


def test_cli_group_cells_are_read_as_ids_are(tmp_path, capsys):
    """A group cell with surrounding blanks (" a") and a task whose group is written on some
    of its rows only (an empty cell on the others) were refused with "task 'p' has more than
    one group", naming neither group; the cells are now stripped as ids are and an empty cell
    says nothing, and a real conflict names both groups."""
    from crowdlearn.cli import main

    src, out = tmp_path / "a.csv", tmp_path / "g.csv"
    src.write_text("task,worker,label,grp\np,a,0,a\np,b,0, a \nq,a,1,\nq,b,1,b\nr,a,1,b\nr,b,0,b\n")
    assert main(["aggregate", str(src), "--method", "mv", "--group-col", "grp", "--group-report", str(out),
                 "--out", str(tmp_path / "o.csv")]) == 0, capsys.readouterr().err
    assert pd.read_csv(out)[["group", "tasks"]].values.tolist() == [["a", 1], ["b", 2]]
    capsys.readouterr()
    src.write_text("task,worker,label,grp\np,a,0,a\np,b,0,b\nq,a,1,b\n")
    assert main(["aggregate", str(src), "--method", "mv", "--group-col", "grp"]) == 2
    err = capsys.readouterr().err
    assert err == f"crowdlearn: error: {src}: column 'grp': groups: task 'p' has more than one group: 'a' and 'b'\n"


def test_empty_truth_or_groups_get_a_result_or_one_clear_error():
    # an empty Series used to raise an IndexError while being aligned on the tasks
    pred = pd.Series([0, 1, 1], index=["a", "b", "c"])
    groups = pd.Series(["x", "y", "y"], index=pred.index)
    report = group_report(pred, pd.Series(dtype=float), groups)
    assert list(report["tasks"]) == [1, 2] and (report["gold"] == 0).all()
    with pytest.raises(ValueError, match="no group for task 'a' \\(3 task"):
        group_report(pred, None, pd.Series(dtype=object))
    answers = pd.DataFrame({"task": ["a", "b", "c"], "worker": ["w"] * 3, "label": [0, 1, 1]})
    for reference in (pd.Series(dtype=float), pd.Series({"elsewhere": 1})):
        with pytest.raises(ValueError, match="reference has no label for any of the 3 answered"):
            worker_bias_table(answers, reference, groups)


def test_fair_thresholds_refuses_nan_posteriors():
    # a NaN posterior used to be labelled negative silently
    probas = pd.DataFrame({0: [np.nan, 0.5, 0.2], 1: [np.nan, 0.5, 0.8]}, index=["a", "b", "c"])
    with pytest.raises(ValueError, match="no finite P\\(1\\) for task 'a'"):
        fair_thresholds(probas, pd.Series(["x", "y", "y"], index=probas.index))


def test_positional_predictions_truth_and_groups_are_refused():
    """Integer task ids: a list used to be keyed 0..n-1, i.e. matched to the wrong tasks."""
    pred = pd.Series([1, 1, 0, 0], index=[3, 2, 1, 0])
    truth = pd.Series([1, 0, 0, 1], index=[3, 2, 1, 0])
    groups = pd.Series(["a", "a", "b", "b"], index=[3, 2, 1, 0])
    for args, what in (((pred, [1, 0, 0, 1], groups), "truth"), ((pred, truth, ["a", "a", "b", "b"]), "groups"),
                       (([1, 1, 0, 0], truth, groups), "predicted")):
        with pytest.raises(ValueError, match=rf"^{what} must be keyed by task id"):
            group_report(*args)
    answers = pd.DataFrame({"task": [3, 2, 1, 0], "worker": ["w"] * 4, "label": [1, 1, 0, 0]})
    with pytest.raises(ValueError, match=r"^reference must be keyed by task id"):
        worker_bias_table(answers, np.array([1, 0, 0, 1]), groups)
    keyed = group_report(pred.to_dict(), truth.to_dict(), groups.to_dict())
    pd.testing.assert_frame_equal(keyed, group_report(pred, truth, groups))
    assert keyed["accuracy"].tolist() == [0.5, 0.5]
    pd.testing.assert_frame_equal(worker_bias_table(answers, truth.to_dict(), groups.to_dict()),
                                  worker_bias_table(answers, truth, groups))


def test_fair_thresholds_at_strength_zero_are_the_aggregators_labels():
    """Tasks at exactly P = 1/2 (one vote each way) were all labelled negative, while the
    aggregator's labels_ draw them; strength 0 must leave the labels as they are."""
    df, _, group = _biased_crowd(seed=1, per_task=2)
    mv = get_method("mv")().fit(df)
    assert (mv.probas_[1] == 0.5).sum() > 50 and (mv.labels_[mv.probas_[1] == 0.5] == 1).any()
    pd.testing.assert_series_equal(fair_thresholds(mv.probas_, group, strength=0.0), mv.labels_)


def test_split_workers_keeps_unanswered_tasks_their_gold_and_the_features():
    answers = pd.DataFrame({"task": [1, 1, 2, 2], "worker": ["u", "v", "u", "v"], "label": ["x", "y", "x", "x"]})
    data = CrowdLabels.from_frame(answers, all_tasks=[1, 2, 3], truth=pd.Series(["x", "y", "x"], index=[1, 2, 3]),
                                  classes=["x", "y", "z"]).with_features(np.arange(6.0).reshape(3, 2))
    split = split_workers_by_group(data, {1: "a", 2: "b", 3: "a"})
    assert split.tasks.equals(data.tasks) and list(split.classes) == ["x", "y", "z"]
    assert np.array_equal(split.truth, data.truth) and np.array_equal(split.features, data.features)
    assert list(split.workers) == ["u|a", "u|b", "v|a", "v|b"]
    assert split.to_frame()["worker"].tolist() == ["u|a", "v|a", "u|b", "v|b"]


def test_group_report_orders_number_groups_by_value_also_when_read_as_text():
    pred = pd.Series([1, 0, 1, 0], index=list("abcd"))
    for groups in ([9, 10, 18, 9], ["9", "10", "18", "9"]):
        report = group_report(pred, None, pd.Series(groups, index=list("abcd")))
        assert [str(g) for g in report.index] == ["9", "10", "18"]
    mixed = group_report(pred, None, pd.Series(["b", "10", "a", "9"], index=list("abcd")))
    assert list(mixed.index) == ["9", "10", "a", "b"]
