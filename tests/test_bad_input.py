"""Every registered method through the CLI on awkward inputs: a result or one clear line."""

import numpy as np
import pandas as pd
import pytest

from crowdlearn.cli import main
from crowdlearn.registry import method_kinds


def _cases():
    rng = np.random.default_rng(0)
    n = 10_000  # every one of the 10^4 classes is used once (100 tasks: the tasks x classes
    # posteriors, not the answers, are what costs here)
    many = pd.DataFrame({"task": rng.integers(0, 100, n), "worker": rng.integers(0, 5, n),
                         "label": rng.permutation(n)})
    return {
        "single_task": pd.DataFrame({"task": ["t"] * 3, "worker": ["a", "b", "c"], "label": [1, 1, 0]}),
        "worker_with_one_label": pd.DataFrame({"task": ["t1", "t1", "t2", "t2", "t3"], "worker": ["a", "b", "a", "b", "lonely"], "label": [0, 0, 1, 1, 1]}),
        "one_class": pd.DataFrame({"task": ["t1", "t2", "t2"], "worker": ["a", "a", "b"], "label": ["x", "x", "x"]}),
        "unicode_ids": pd.DataFrame({"task": ["猫", "猫", "ñ", "ñ"], "worker": ["Ω", "Ж", "Ω", "Ж"], "label": ["是", "是", "否", "是"]}),
        "duplicated_rows": pd.DataFrame({"task": ["t1"] * 4 + ["t2"] * 2, "worker": ["a", "a", "b", "b", "a", "b"], "label": [0, 0, 1, 1, 1, 1]}),
        "ten_thousand_classes": many,
    }


CASES = _cases()


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("method", sorted(n for n, k in method_kinds().items() if k == "classification"))
def test_awkward_input(tmp_path, capsys, method, case):
    df = CASES[case]
    src = tmp_path / "in.csv"
    df.to_csv(src, index=False)
    out = tmp_path / "out.parquet"  # 10^4 probability columns: CSV formatting would dominate
    code = main(["aggregate", str(src), "--method", method, "--out", str(out)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code == 0:
        res = pd.read_parquet(out)
        # every input task appears exactly once, posteriors are finite and sum to one
        assert sorted(res["task"].astype(str)) == sorted(df["task"].astype(str).unique())
        p = res.filter(like="p_").to_numpy()
        assert np.all(np.isfinite(p)) and np.allclose(p.sum(axis=1), 1.0)
    else:
        assert code == 2 and err.startswith("crowdlearn: error: ") and err.count("\n") == 1
        # methods that need item features must say so (CLI input here has none)
        assert case in ("ten_thousand_classes",) or "binary" in err or "features" in err, err


def test_two_label_columns_is_a_clear_error():
    from crowdlearn import CrowdLabels

    df = pd.DataFrame([[1, "a", 0, 1], [2, "b", 1, 1]], columns=["task", "worker", "label", "label"])
    with pytest.raises(ValueError, match="column 'label' appears 2 times"):
        CrowdLabels.from_frame(df)


def test_same_column_for_two_roles_is_a_clear_error():
    from crowdlearn import CrowdLabels

    df = pd.DataFrame({"task": [1, 2], "worker": ["a", "b"], "label": [0, 1]})
    with pytest.raises(ValueError, match="task and worker"):
        CrowdLabels.from_frame(df, task="task", worker="task")


@pytest.mark.parametrize("bad", [np.inf, -np.inf])
def test_inf_label_gives_no_runtime_warning(bad):
    import warnings

    from crowdlearn import CrowdLabels

    df = pd.DataFrame({"task": [1, 1, 2], "worker": ["a", "b", "a"], "label": [1.0, bad, 0.0]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data = CrowdLabels.from_frame(df)
    assert data.n_classes == 3


@pytest.mark.parametrize("method", sorted(method_kinds()))
def test_default_parameters_pass_validation(method):
    from crowdlearn.core.params import check_params
    from crowdlearn.registry import get_method

    check_params(get_method(method)())


@pytest.mark.parametrize(
    "name, value",
    [("tol", -1.0), ("tol", "abc"), ("max_iter", -3), ("max_iter", True), ("alpha", -5),
     ("prior_alpha", float("inf")), ("diag_alpha", None),
     ("max_iter", 1000.0)],  # passed the check, then failed in range() inside the fit
)
def test_fit_validates_parameters(name, value):
    from crowdlearn import DawidSkene

    df = pd.DataFrame({"task": [1, 1, 2, 2], "worker": ["a", "b", "a", "b"], "label": [0, 0, 1, 1]})
    with pytest.raises(ValueError, match=f"^{name} must be"):
        DawidSkene(**{name: value}).fit(df)


@pytest.mark.parametrize("name, value", [("tol", -1.0), ("smoothing", -0.5), ("max_iter", "abc")])
def test_learner_fit_validates_shared_parameters(name, value):
    """Learners apply the same parameter rules as the aggregators, before any training."""
    pytest.importorskip("torch")
    from crowdlearn.registry import get_method

    est = get_method("raykar")(**{name: value})
    X = np.zeros((2, 3))
    df = pd.DataFrame({"task": [0, 0, 1, 1], "worker": ["a", "b", "a", "b"], "label": [0, 0, 1, 1]})
    from crowdlearn import CrowdLabels

    with pytest.raises(ValueError, match=f"^{name} must be"):
        est.fit(X, CrowdLabels.from_frame(df))


def test_ids_of_two_types_written_the_same_are_refused(tmp_path, capsys):
    """A frame's task 1 and task "1" were two tasks, both written "1" in the output.  JSON
    Lines numbers are read as their text, as CSV cells are: there they are one task."""
    from crowdlearn import CrowdLabels

    src = tmp_path / "in.jsonl"
    src.write_text('{"task": 1, "worker": "a", "label": "x"}\n{"task": "1", "worker": "b", "label": "y"}\n')
    out = tmp_path / "out.csv"
    assert main(["aggregate", str(src), "--method", "mv", "--out", str(out)]) == 0, capsys.readouterr().err
    assert pd.read_csv(out, dtype=str)["task"].tolist() == ["1"]
    df = pd.DataFrame({"task": ["t", "t"], "worker": [7, "7"], "label": [0, 1]})
    with pytest.raises(ValueError, match="worker id '7' is two different values"):
        CrowdLabels.from_frame(df)
    # mixed types that print differently stay two ids
    df = pd.DataFrame({"task": [1, "b"], "worker": ["a", "a"], "label": [0, 1]})
    assert CrowdLabels.from_frame(df).n_tasks == 2


@pytest.mark.parametrize(
    "name, header, hint",
    [("in.csv", "task;worker;label", "separated by semicolons; convert it to commas or tabs"),
     ("in.csv", "task\tworker\tlabel", "separated by tabs; name it in.tsv"),
     ("in.tsv", "task,worker,label", "separated by commas; name it in.csv"),
     ("in.csv", "task, worker, label", "the name ' worker' has spaces around it"),
     ("in.csv", "Task,Worker,Label", "column names are case-sensitive: 'Task' is not 'task'")],
)
def test_missing_columns_say_why_when_the_header_shows_it(tmp_path, capsys, name, header, hint):
    """A semicolon CSV or a header with spaces gave only 'missing column(s)'."""
    src = tmp_path / name
    src.write_text(header + "\n" + header.replace("task", "1").replace("worker", "a").replace("label", "x") + "\n")
    assert main(["aggregate", str(src)]) == 2
    err = capsys.readouterr().err
    assert "missing column(s)" in err and hint in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "header, hint",
    [("taskId,tasksetId,workerId,answer,truth",  # NetEaseCrowd
      "task -> 'taskId', worker -> 'workerId', label -> 'answer'; pass those column names to the "
      "reader, or on the command line --task-col taskId --worker-col workerId --label-col answer"),
     ("task,performer,label", "worker -> 'performer'"),  # crowd-kit before 1.0
     ("example,annotator,value", "task -> 'example', worker -> 'annotator', label -> 'value'")],  # spark-crowd
)
def test_another_tools_column_names_are_suggested(tmp_path, capsys, header, hint):
    src = tmp_path / "in.csv"
    src.write_text(header + "\n" + ",".join("1" for _ in header.split(",")) + "\n")
    assert main(["aggregate", str(src)]) == 2
    err = capsys.readouterr().err
    assert "missing column(s)" in err and hint in err, err


def test_no_column_is_suggested_when_a_role_has_two_candidates_or_a_name_was_chosen():
    from crowdlearn import CrowdLabels

    two = pd.DataFrame({"taskId": [1], "item": [1], "workerId": ["a"], "answer": [0]})
    with pytest.raises(ValueError, match="missing column") as exc:
        CrowdLabels.from_frame(two)
    assert "another tool" not in str(exc.value)
    with pytest.raises(ValueError, match="missing column") as exc:  # a name the user gave
        CrowdLabels.from_frame(pd.DataFrame({"taskId": [1], "workerId": ["a"], "answer": [0]}),
                               task="question")
    assert "another tool" not in str(exc.value)


@pytest.mark.parametrize("kind", ["classification", "continuous"])
def test_a_differently_capitalised_header_is_named_in_python_too(kind):
    """``pd.read_csv`` of a header ``Task,Worker,Label`` gave only 'missing column(s)'."""
    from crowdlearn import CrowdLabels
    from crowdlearn.continuous.data import ContinuousAnswers

    df = pd.DataFrame({"Task": ["t"], "WORKER": ["w"], "label": ["1"]})
    reader = CrowdLabels if kind == "classification" else ContinuousAnswers
    with pytest.raises(ValueError, match="case-sensitive: 'Task' is not 'task'"):
        reader.from_frame(df)


def test_a_count_written_with_an_exponent_on_the_command_line_is_a_count(tmp_path, capsys):
    path = tmp_path / "a.csv"
    pd.DataFrame({"task": [1, 1, 2, 2], "worker": ["a", "b", "a", "b"], "label": [0, 0, 1, 1]}).to_csv(path, index=False)
    assert main(["aggregate", str(path), "--method", "ds", "--param", "max_iter=1e3",
                 "--out", str(tmp_path / "o.csv")]) == 0


def test_gold_used_for_scoring_does_not_change_the_fit(tmp_path, capsys):
    """Gold for a task nobody answered, with a class nobody answered, made a third class that
    glad, wmv, bp and mace then fitted (bluebirds' glad accuracy 0.593 -> 0.750)."""
    from crowdlearn import CrowdLabels
    from crowdlearn.registry import get_method

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"task": rng.integers(0, 60, 400), "worker": rng.integers(0, 8, 400),
                       "label": rng.integers(0, 2, 400)}).drop_duplicates(["task", "worker"])
    gold = pd.Series(rng.integers(0, 2, 60), index=range(60))
    extra = pd.concat([gold, pd.Series([2], index=[999])])
    plain = CrowdLabels.from_frame(df, truth=gold)
    more = CrowdLabels.from_frame(df, truth=extra)
    assert list(more.classes) == list(plain.classes) == [0, 1]
    np.testing.assert_array_equal(more.truth, plain.truth)
    for method in ("glad", "mace"):
        a, b = get_method(method)().fit(plain), get_method(method)().fit(more)
        np.testing.assert_allclose(a.probas_.to_numpy(), b.probas_.to_numpy())


def test_gold_ids_are_matched_and_checked_by_value(tmp_path, capsys):
    """'7' and '007' name the task 7: two golds for it contradict, and the CLI's note must not
    call '007' unanswered while scoring it."""
    from crowdlearn import CrowdLabels

    df = pd.DataFrame({"task": [7, 7, 8], "worker": ["a", "b", "a"], "label": ["a", "b", "a"]})
    with pytest.raises(ValueError, match="gold of task 7 is given twice"):
        CrowdLabels.from_frame(df, truth={"7": "b", "007": "a"})
    answers, gold = tmp_path / "a.parquet", tmp_path / "g.csv"
    pytest.importorskip("pyarrow")
    df.to_parquet(answers)
    gold.write_text("task,truth\n007,a\n")
    assert main(["aggregate", str(answers), "--method", "mv", "--gold", str(gold),
                 "--out", str(tmp_path / "o.csv")]) == 0
    err = capsys.readouterr().err
    assert "not scored" not in err and "accuracy on 1 gold tasks" in err


def test_given_classes_spelling_one_number_twice_are_refused():
    from crowdlearn import CrowdLabels

    df = pd.DataFrame({"task": ["t1", "t1", "t1"], "worker": ["a", "b", "c"], "label": ["1", "1.0", "01"]})
    with pytest.raises(ValueError, match="classes spell one number twice: '1', '1.0'"):
        CrowdLabels.from_frame(df, classes=["10", "2", "1", "1.0"])
    assert list(CrowdLabels.from_frame(df, classes=["10", "2", "1"]).classes) == ["10", "2", "1"]


def test_predict_proba_matches_workers_and_classes_by_value():
    """A model fitted on text ids scoring a numeric frame dropped every answer without a word
    (every task got the class prior)."""
    from crowdlearn import DawidSkene, simulate

    data = simulate.dawid_skene(200, 10, 3, labels_per_task=4, seed=2)
    text = data.to_frame().astype(int).astype(str)
    est = DawidSkene().fit(text)
    numbers = text.astype(int)
    a = est.predict_proba(text)
    b = est.predict_proba(numbers)
    np.testing.assert_allclose(a.to_numpy(), b.set_axis(b.index.astype(str)).loc[a.index].to_numpy())
    with pytest.warns(UserWarning, match="none of the 1 worker"):
        est.predict_proba(pd.DataFrame({"task": [1], "worker": ["nobody"], "label": ["0"]}))


def test_weights_must_name_workers():
    from crowdlearn import WeightedMajorityVote

    df = pd.DataFrame({"task": [1, 1, 2, 2], "worker": ["7", "8", "7", "8"], "label": [0, 1, 1, 1]})
    with pytest.raises(ValueError, match="weights must be a mapping"):
        WeightedMajorityVote(weights=[1.0, 2.0]).fit(df)
    with pytest.raises(ValueError, match="weights name no worker"):
        WeightedMajorityVote(weights={99: 1.0}).fit(df)
    by_number = WeightedMajorityVote(weights={7: 5.0}).fit(df)  # worker "7" by value
    assert by_number.weights_["7"] == 5.0 and by_number.labels_[1] == 0
