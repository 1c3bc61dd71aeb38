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
     ("prior_alpha", float("inf")), ("diag_alpha", None)],
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
    """JSON Lines keep types: task 1 and task "1" were two tasks, both written "1" in the output."""
    from crowdlearn import CrowdLabels

    src = tmp_path / "in.jsonl"
    src.write_text('{"task": 1, "worker": "a", "label": "x"}\n{"task": "1", "worker": "b", "label": "y"}\n')
    code = main(["aggregate", str(src)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert f"{src}: task id '1' is two different values, of types int and str" in err
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


@pytest.mark.parametrize("kind", ["classification", "continuous"])
def test_a_differently_capitalised_header_is_named_in_python_too(kind):
    """``pd.read_csv`` of a header ``Task,Worker,Label`` gave only 'missing column(s)'."""
    from crowdlearn import CrowdLabels
    from crowdlearn.continuous.data import ContinuousAnswers

    df = pd.DataFrame({"Task": ["t"], "WORKER": ["w"], "label": ["1"]})
    reader = CrowdLabels if kind == "classification" else ContinuousAnswers
    with pytest.raises(ValueError, match="case-sensitive: 'Task' is not 'task'"):
        reader.from_frame(df)
