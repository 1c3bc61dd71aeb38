import io
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from crowdlearn.cli import main


def run(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_aggregate_writes_posteriors(tmp_path, capsys):
    df = pd.DataFrame({"task": ["a", "a", "b", "b", "b"], "worker": ["x", "y", "x", "y", "z"],
                       "label": ["cat", "cat", "dog", "cat", "dog"]})
    src = tmp_path / "in.tsv"
    df.to_csv(src, sep="\t", index=False)
    gold = tmp_path / "gold.csv"
    pd.DataFrame({"task": ["a", "b"], "truth": ["cat", "dog"]}).to_csv(gold, index=False)
    out = tmp_path / "out.csv"
    code, _, err = run(["aggregate", str(src), "--method", "mv", "--out", str(out), "--gold", str(gold), "--seed", "1"], capsys)
    assert code == 0
    res = pd.read_csv(out)
    assert list(res.columns) == ["task", "label", "confidence", "p_cat", "p_dog"]
    assert list(res["label"]) == ["cat", "dog"]
    assert "accuracy on 2 gold tasks = 1.0000" in err


def test_aggregate_parquet_and_custom_columns(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    df = pd.DataFrame({"item": [1, 1, 2], "annotator": ["p", "q", "p"], "answer": [0, 1, 1]})
    src = tmp_path / "in.parquet"
    df.to_parquet(src)
    out = tmp_path / "out.parquet"
    code, _, _ = run(["aggregate", str(src), "--task-col", "item", "--worker-col", "annotator",
                      "--label-col", "answer", "--out", str(out), "--method", "ds"], capsys)
    assert code == 0
    assert len(pd.read_parquet(out)) == 2


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "empty"),
        ("task,worker\n1,2\n", "missing column(s) ['label']"),
        ("task,worker,label\n1,a,\n", "missing value in column 'label' at line 2"),
        ("task,worker,label\n1,a,0\n2,b,0,9\n", "line 3"),
    ],
)
def test_bad_input_gives_one_line(tmp_path, capsys, content, message):
    src = tmp_path / "bad.csv"
    src.write_text(content)
    code, _, err = run(["aggregate", str(src)], capsys)
    assert code == 2
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_unknown_method_and_param(tmp_path, capsys):
    src = tmp_path / "in.csv"
    src.write_text("task,worker,label\n1,a,0\n")
    code, _, err = run(["aggregate", str(src), "--method", "nope"], capsys)
    assert code == 2 and "unknown method 'nope'" in err
    code, _, err = run(["aggregate", str(src), "--param", "max_iters=3"], capsys)
    assert code == 2 and "no parameter(s) ['max_iters']" in err
    code, _, err = run(["aggregate", str(tmp_path / "missing.csv")], capsys)
    assert code == 2 and "no such file" in err


def test_methods_and_demo(capsys):
    code, out, _ = run(["methods"], capsys)
    assert code == 0 and "ds" in out and "mv" in out
    code, out, _ = run(["demo", "--methods", "mv,ds"], capsys)
    assert code == 0 and "zencrowd_us" in out
    acc = {line.split()[0]: float(line.split()[1]) for line in out.splitlines()[2:]}
    assert acc["mv"] > 0.85 and acc["ds"] > 0.8
    # the bundled set has no item features: MMLC is reported as such, not as an error
    code, out, _ = run(["demo", "--methods", "mv,mmlc-owf"], capsys)
    assert code == 0 and "mmlc-owf needs features" in " ".join(out.split())


def test_console_script_entry_point():
    res = subprocess.run([sys.executable, "-m", "crowdlearn.cli", "methods"], capture_output=True, text=True)
    assert res.returncode == 0 and "glad" in res.stdout


def test_python_dash_m_crowdlearn_runs_the_cli():
    # without crowdlearn/__main__.py, `python -m crowdlearn` said "'crowdlearn' is a package
    # and cannot be directly executed"
    res = subprocess.run([sys.executable, "-m", "crowdlearn", "methods"], capture_output=True, text=True)
    assert res.returncode == 0 and "glad" in res.stdout
    bad = subprocess.run([sys.executable, "-m", "crowdlearn", "aggregate", "no_such_file.csv"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "no such file" in bad.stderr


def test_aggregate_auto_says_what_it_chose(tmp_path, capsys):
    from crowdlearn import simulate

    src = tmp_path / "crowd.csv"
    simulate.dawid_skene(300, 10, 3, labels_per_task=4, seed=0).to_frame().to_csv(src, index=False)
    code, _, err = run(["aggregate", str(src), "--method", "auto", "--out", str(tmp_path / "o.csv")], capsys)
    assert code == 0
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("auto: stacked ") and "ds " in lines[1]
    code, _, err = run(["aggregate", str(src), "--method", "auto", "--param", "combine=select",
                        "--out", str(tmp_path / "o.csv")], capsys)
    assert code == 0 and err.strip().splitlines()[1].startswith("auto: chose '")


def test_row_numbers_in_file_errors_are_file_lines(tmp_path, capsys):
    # one rule for files: line numbers of the file, header = line 1
    src = tmp_path / "in.csv"
    src.write_text("task,worker,label\n1,a,0\n2,a,1\n3,,1\n")
    code, _, err = run(["aggregate", str(src)], capsys)
    assert code == 2 and "at line 4" in err
    from crowdlearn import CrowdLabels

    with pytest.raises(ValueError, match="at line 4"):
        CrowdLabels.from_csv(src)
    # frames: row positions (0-based, as in df.iloc)
    with pytest.raises(ValueError, match="at row position 2"):
        CrowdLabels.from_frame(pd.read_csv(src, dtype=str))


@pytest.mark.parametrize(
    "command, name, content, message",
    [
        (["aggregate"], "in.csv", "task,worker,label\n1,a,0\n2,a,\n", "in.csv: missing value in column 'label' at line 3"),
        (["aggregate", "--kind", "continuous"], "in.csv", "task,worker,label\n1,a,0.5\n2,a,abc\n",
         "in.csv: column 'label' must hold finite numbers: 'abc' at line 3"),
        (["aggregate", "--kind", "continuous"], "in.csv", "task,worker,label\n1,a,0.5\n2,a,\n",
         "in.csv: missing value in column 'label' at line 3"),
        (["aggregate", "--classes", "0,1"], "in.tsv", "task\tworker\tlabel\n1\ta\t0\n2\ta\t7\n",
         "in.tsv: label '7' is not one of the given classes ['0', '1'] (line 3)"),
        (["next", "--budget", "2"], "in.csv", "task,worker,label\n1,a,0\n2,a,\n",
         "in.csv: missing value in column 'label' at line 3"),
        (["report", "--out", "r.html"], "in.jsonl", '{"task": 1, "worker": "a", "label": 0}\n'
         '{"task": 2, "worker": "a", "label": null}\n', "in.jsonl: missing value in column 'label' at line 2"),
    ],
)
def test_row_errors_name_the_file_and_its_line(tmp_path, capsys, monkeypatch, command, name, content, message):
    """Every command that reads answers names the file, the column and the file line of a bad
    cell (`next` named a 0-based row position and no file; `report` counted JSON Lines from 2)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text(content)
    code, _, err = run([command[0], name, *command[1:]], capsys)
    assert code == 2 and err == f"crowdlearn: error: {message}\n", err


def test_bad_gold_label_names_the_gold_file_and_task(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.csv").write_text("task,worker,label\n1,a,x\n2,a,y\n")
    (tmp_path / "gold.csv").write_text("task,truth\n1,x\n2,z\n")
    code, _, err = run(["aggregate", "in.csv", "--classes", "x,y", "--gold", "gold.csv"], capsys)
    assert code == 2
    assert err == "crowdlearn: error: gold.csv: gold label 'z' of task '2' is not one of the classes ['x', 'y']\n"


@pytest.mark.parametrize("kind", ["classification", "continuous"])
def test_gold_file_matches_number_task_ids_of_parquet_answers(tmp_path, capsys, kind):
    """A CSV gold file has text ids: with Parquet answers whose task ids are numbers, no gold
    matched and the accuracy was silently left out; gold of tasks without answers is said."""
    pytest.importorskip("pyarrow")
    labels = ["x", "x", "y", "y"] if kind == "classification" else [1.0, 1.5, 3.0, 3.5]
    pd.DataFrame({"task": [1, 1, 2, 2], "worker": ["a", "b"] * 2, "label": labels}).to_parquet(tmp_path / "a.parquet")
    truth = ["x", "y", "x"] if kind == "classification" else [1.0, 3.0, 9.0]
    pd.DataFrame({"task": [1, 2, 99], "truth": truth}).to_csv(tmp_path / "gold.csv", index=False)
    code, out, err = run(["aggregate", str(tmp_path / "a.parquet"), "--kind", kind, "--gold", str(tmp_path / "gold.csv")], capsys)
    assert code == 0, err
    assert "accuracy on 2 gold tasks = 1.0000" in err if kind == "classification" else "gold=2" in err
    assert "1 of 3 gold task(s) have no answers and are not scored (e.g. '99')" in err


@pytest.mark.parametrize("kind", ["pairwise", "similarity"])
def test_gold_items_without_answers_are_noted(tmp_path, capsys, kind):
    """Gold by item (pairwise scores, similarity clusters): gold of items the answers never
    name (here ``7`` where the answers write ``007``) was dropped without a word."""
    if kind == "pairwise":
        answers = "worker,left,right,label\nu,007,08,007\nv,08,9,9\nu,007,9,tie\n"
    else:
        answers = "worker,item_a,item_b,same\nu,007,08,1\nv,08,9,0\nu,007,9,0\n"
    (tmp_path / "in.csv").write_text(answers)
    (tmp_path / "gold.csv").write_text("item,truth\n007,1\n08,1\n9,0\n7,1\n")
    code, _, err = run(["aggregate", str(tmp_path / "in.csv"), "--gold", str(tmp_path / "gold.csv")], capsys)
    assert code == 0, err
    assert "gold=3" in err
    assert "1 of 4 gold item(s) have no answers and are not scored (e.g. '7')" in err


def test_gold_classes_no_worker_answered_are_noted(tmp_path, capsys):
    """Gold spelled otherwise than the answers (``true`` for ``True``) made classes of its
    own and an accuracy of 0 without a word, in aggregate, report and benchmark alike; gold
    in the answers' spelling says nothing."""
    folder = tmp_path / "case"
    folder.mkdir()
    (folder / "labels.csv").write_text("task,worker,label\n1,a,True\n1,b,True\n2,a,False\n2,b,False\n")
    (folder / "truth.csv").write_text("task,truth\n1,true\n2,False\n3,true\n")
    note = "1 gold class(es) appear in no answer ('true'; labels are compared as written): the 1 answered"
    for args in (["aggregate", str(folder / "labels.csv"), "--method", "mv", "--out", str(tmp_path / "o.csv")],
                 ["report", str(folder / "labels.csv"), "--method", "mv", "--out", str(tmp_path / "r.html")],
                 ["benchmark", str(folder), "--methods", "mv"]):
        if args[0] != "benchmark":
            args += ["--gold", str(folder / "truth.csv")]
        code, _, err = run(args, capsys)
        assert code == 0 and note in err, (args[0], err)
    (folder / "truth.csv").write_text("task,truth\n1,True\n2,False\n")
    code, _, err = run(["benchmark", str(folder), "--methods", "mv"], capsys)
    assert code == 0 and err == ""


def test_gzip_named_csv_says_compressed(tmp_path, capsys):
    import gzip

    src = tmp_path / "in.csv"
    src.write_bytes(gzip.compress(b"task,worker,label\n1,a,0\n"))
    code, _, err = run(["aggregate", str(src)], capsys)
    assert code == 2 and "looks compressed (gzip)" in err and "UTF-8" not in err


def test_identical_column_roles_are_rejected(tmp_path, capsys):
    src = tmp_path / "in.csv"
    src.write_text("task,worker,label\n1,a,0\n2,a,1\n")
    code, _, err = run(["aggregate", str(src), "--task-col", "task", "--worker-col", "task"], capsys)
    assert code == 2 and "task and worker" in err and "'task'" in err


@pytest.mark.parametrize("method, param", [("spammer-filtered", "base=nope"), ("spammer-filtered", "base=mean"),
                                           ("auto", "candidates=ds,nope")])
def test_unknown_base_method_lists_the_class_label_methods(tmp_path, capsys, method, param):
    """A wrapper's unknown base (or auto's candidate) listed the methods of every kind (bt,
    mean, symnmf, ...); it lists those a class-label wrapper can run: classification and
    ordinal methods, and no other kind's."""
    from crowdlearn.registry import LABEL_KINDS, method_kinds

    src = tmp_path / "in.csv"
    src.write_text("task,worker,label\n1,a,0\n1,b,0\n2,a,1\n2,b,1\n")
    code, _, err = run(["aggregate", str(src), "--method", method, "--param", param], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("crowdlearn: error: unknown classification or ordinal method"), err
    listed = err.split("known: ")[1].strip().split(", ")
    assert listed == sorted(n for n, k in method_kinds().items() if k in LABEL_KINDS)
    assert "ds" in listed and "ordinal-ds" in listed and "mean" not in listed and "bt" not in listed


def test_param_values_are_parsed(tmp_path, capsys):
    src = tmp_path / "in.csv"
    rows = [(t, w, (t + (w == 3 and t % 3 == 0)) % 2) for t in range(30) for w in range(4)]
    pd.DataFrame(rows, columns=["task", "worker", "label"]).to_csv(src, index=False)
    # a comma list is a list (not a string read letter by letter)
    code, _, err = run(["aggregate", str(src), "--method", "auto", "--param", "candidates=mv,ds"], capsys)
    assert code == 0, err
    code, _, err = run(["aggregate", str(src), "--method", "auto", "--param", "candidates=ds"], capsys)
    assert code == 0, err
    from crowdlearn.cli import build_parser, parse_params

    assert parse_params(["candidates=ds,glad", "tol=1e-3", "max_iter=5", "fit_priors=false",
                         "smoothing=none", "name=a b"]) == {
        "candidates": ["ds", "glad"], "tol": 1e-3, "max_iter": 5, "fit_priors": False,
        "smoothing": None, "name": "a b"}
    assert build_parser() is not None


@pytest.mark.parametrize(
    "method, param, name",
    [("ds", "tol=abc", "tol"), ("ds", "alpha=-5", "alpha"), ("glad", "max_iter=-1", "max_iter"),
     ("kos", "n_iter=2.5", "n_iter"), ("onecoin", "prior_alpha=nan", "prior_alpha"),
     ("mace", "smoothing=-1", "smoothing")],
)
def test_bad_param_values_are_one_clear_error(tmp_path, capsys, method, param, name):
    src = tmp_path / "in.csv"
    src.write_text("task,worker,label\n1,a,0\n1,b,0\n2,a,1\n2,b,1\n")
    code, _, err = run(["aggregate", str(src), "--method", method, "--param", param], capsys)
    assert code == 2 and err.startswith(f"crowdlearn: error: {name} must be"), err


def test_one_number_is_one_class_on_every_path(tmp_path, capsys):
    # the same file through the CLI (text), CrowdLabels.from_csv (text) and pandas (numbers):
    # "1" and "1.0" spell one number, so every path sees two classes with the same answers
    from crowdlearn import CrowdLabels

    src = tmp_path / "in.csv"
    src.write_text("task,worker,label\na,w1,1\na,w2,1.0\nb,w1,0\nb,w2,0\nc,w1,1\nc,w2,0.0\n")
    from_csv = CrowdLabels.from_csv(src)
    from_pandas = CrowdLabels.from_frame(pd.read_csv(src))
    assert from_csv.classes.tolist() == ["0", "1"]  # text as written, one spelling per class
    assert from_pandas.classes.tolist() == [0, 1]
    assert from_csv.label.tolist() == from_pandas.label.tolist()
    out = tmp_path / "out.csv"
    code, _, err = run(["aggregate", str(src), "--method", "mv", "--out", str(out)], capsys)
    assert code == 0 and "2 classes" in err
    assert list(pd.read_csv(out).columns) == ["task", "label", "confidence", "p_0", "p_1"]
    # the same numbers in JSON Lines: the same classes (they were the floats 0.0 and 1.0)
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("".join('{"task": "%s", "worker": "%s", "label": %s}\n' % tuple(line.split(","))
                             for line in src.read_text().splitlines()[1:]))
    code, _, err = run(["aggregate", str(jsonl), "--method", "mv", "--out", str(out)], capsys)
    assert code == 0 and "2 classes" in err
    assert list(pd.read_csv(out).columns) == ["task", "label", "confidence", "p_0", "p_1"]
    assert CrowdLabels.from_csv(jsonl).classes.tolist() == ["0", "1"]
    # labels that are not all numbers keep their text; distinct numbers stay distinct
    src.write_text("task,worker,label\na,w1,10\na,w2,2\nb,w1,x\nb,w2,007\nc,w1,7\n")
    assert CrowdLabels.from_csv(src).classes.tolist() == ["2", "7", "10", "x"]


@pytest.mark.parametrize("method", ["mv", "ds"])
def test_numeric_labels_give_numeric_posterior_columns(tmp_path, capsys, method):
    """Labels 0..11 gave the columns p_0, p_1, p_10, p_11, p_2, ... (text order): they are
    now in numeric order, and each row's label is the class of its largest p_ column."""
    import numpy as np

    rng = np.random.default_rng(0)
    src = tmp_path / "k12.csv"
    pd.DataFrame({"task": np.repeat(np.arange(30), 3), "worker": np.tile([0, 1, 2], 30),
                  "label": rng.integers(0, 12, 90)}).to_csv(src, index=False)
    out = tmp_path / "out.csv"
    code, _, _ = run(["aggregate", str(src), "--method", method, "--out", str(out)], capsys)
    assert code == 0
    res = pd.read_csv(out, dtype={"label": str})
    p_cols = [f"p_{k}" for k in range(12)]
    assert list(res.columns) == ["task", "label", "confidence"] + p_cols
    probas = res[p_cols].to_numpy()
    winner = probas[np.arange(len(res)), [p_cols.index(f"p_{v}") for v in res["label"]]]
    np.testing.assert_allclose(winner, probas.max(axis=1))
    np.testing.assert_allclose(res["confidence"], probas.max(axis=1))


# ------------------------------------------------------------------ answer kinds beyond labels
@pytest.mark.parametrize("kind", ["continuous", "multilabel"])
def test_aggregate_answer_kinds_strip_ids_of_answers_and_gold(tmp_path, capsys, kind):
    """" t1" and "t1 " were two tasks of continuous and multi-label answers, and a gold id
    with a trailing blank matched none (with a note that it had no answers)."""
    src, gold = tmp_path / "a.csv", tmp_path / "gold.csv"
    value = {"continuous": ("1.0", "2.0", "1.5"), "multilabel": ("a", "a|b", "a")}[kind]
    src.write_text(f"task,worker,label\n t1,w1,{value[0]}\nt1 ,w2 ,{value[1]}\nt2,w1,{value[0]}\n")
    gold.write_text(f"task,truth\nt1 ,{value[2]}\n t2,{value[2]}\n")
    code, out, err = run(["aggregate", str(src), "--kind", kind, "--gold", str(gold)], capsys)
    assert code == 0
    assert "tasks=2, workers=2" in err and "gold=2" in err
    assert "no answers" not in err
    assert pd.read_csv(io.StringIO(out))["task"].tolist() == ["t1", "t2"]


def _ordered_pairs(n_workers: int) -> list[str]:
    """Comparison rows (with header) in which every worker ranks a > b > c > d, the better
    item always on the right."""
    order = ["a", "b", "c", "d"]
    return ["worker,left,right,label"] + [f"w{w},{order[j]},{order[i]},{order[i]}"
                                         for w in range(n_workers) for i in range(4) for j in range(i + 1, 4)]


def test_aggregate_pairwise_picked_from_columns(tmp_path, capsys):
    """left,right columns make it a pairwise run: item,score,rank,stderr out, one row per item
    (an item that only ever ties still appears), and the gold summary uses rank metrics."""
    src = tmp_path / "pairs.csv"
    src.write_text("\n".join(_ordered_pairs(6) + ["w0,a,e,tie"]) + "\n")
    gold = tmp_path / "gold.csv"
    gold.write_text("item,truth\na,4\nb,3\nc,2\nd,1\ne,4\n")
    code, out, err = run(["aggregate", str(src), "--gold", str(gold)], capsys)
    assert code == 0, err
    table = pd.read_csv(io.StringIO(out))
    assert list(table.columns[:4]) == ["item", "score", "rank", "stderr"]
    assert sorted(table["item"]) == ["a", "b", "c", "d", "e"]
    ranked = table.set_index("item")["rank"]
    assert ranked["a"] < ranked["b"] < ranked["c"] < ranked["d"]
    assert "bt (pairwise)" in err and "kendall_tau" in err


def test_aggregate_pairwise_gold_read_as_benchmark_reads_it(tmp_path, capsys):
    """Pairwise gold's direction comes from its header, as in ``benchmark``: ``score`` is
    higher = better, ``task,truth`` ranks (1 = best, the shared datasets' layout; it was read
    as scores, so every rank metric came out negated), ``item,truth`` scores unless
    --gold-lower-is-better, which a ``score`` column contradicts."""
    src = tmp_path / "pairs.csv"
    src.write_text("\n".join(_ordered_pairs(4)) + "\n")

    def tau(text, *flags):
        gold = tmp_path / "gold.csv"
        gold.write_text(text)
        code, _, err = run(["aggregate", str(src), "--gold", str(gold), *flags], capsys)
        assert code == 0, err
        return float(err.split("kendall_tau = ")[1].split(",")[0])

    assert tau("item,score\na,4\nb,3\nc,2\nd,1\n") == 1.0
    assert tau("task,truth\na,1\nb,2\nc,3\nd,4\n") == 1.0
    assert tau("item,truth\na,4\nb,3\nc,2\nd,1\n") == 1.0
    assert tau("item,truth\na,1\nb,2\nc,3\nd,4\n", "--gold-lower-is-better") == 1.0
    gold = tmp_path / "gold.csv"
    gold.write_text("item,score\na,4\nb,3\nc,2\nd,1\n")
    code, _, err = run(["aggregate", str(src), "--gold", str(gold), "--gold-lower-is-better"], capsys)
    assert code == 2 and "names its column 'score'" in err


def test_aggregate_pairwise_group_column_groups_as_fit_does(tmp_path, capsys):
    """A ``group`` column grouped the comparisons of ``fit(frame)`` (and of a dataset
    folder) but not those of ``aggregate`` unless --col group=group was given: QA's
    music_similarity_pairs with query renamed group ranked 118 items together.  Now every
    entry groups by it; --col group= ranks all items together, as a way out."""
    import crowdlearn as cl

    rows = [("w1", "a", "b", "a", "q1"), ("w2", "a", "b", "a", "q1"), ("w3", "b", "c", "b", "q1"),
            ("w1", "a", "b", "b", "q2"), ("w2", "a", "b", "b", "q2"), ("w3", "b", "c", "c", "q2")]
    df = pd.DataFrame(rows, columns=["worker", "left", "right", "label", "group"])
    folder = tmp_path / "set"
    folder.mkdir()
    src = folder / "pairs.csv"
    df.to_csv(src, index=False)
    expected = cl.get_method("bt")().fit(df).result_frame()
    code, out, err = run(["aggregate", str(src), "--method", "bt"], capsys)
    assert code == 0, err
    table = pd.read_csv(io.StringIO(out), dtype={"group": str, "item": str})
    assert list(table.columns) == list(expected.columns) == ["group", "item", "score", "rank", "stderr"]
    assert table[["group", "item", "rank"]].to_numpy().tolist() == \
        expected[["group", "item", "rank"]].to_numpy().tolist()
    assert table["score"].to_numpy() == pytest.approx(expected["score"].to_numpy())
    ranks = table.set_index(["group", "item"])["rank"]
    assert ranks[("q1", "a")] == 1 and ranks[("q2", "c")] == 1  # each group ranked on its own
    assert "groups=2" in err and "ranked within the groups of column 'group'" in err
    # the default columns of a dataset folder read the same units
    assert list(cl.datasets.load(str(folder)).items) == list(zip(expected["group"], expected["item"]))
    # --col group= ranks all items together: one row per item
    code, out, err = run(["aggregate", str(src), "--method", "bt", "--col", "group="], capsys)
    assert code == 0, err
    table = pd.read_csv(io.StringIO(out))
    assert list(table.columns) == ["item", "score", "rank", "stderr"]
    assert table["item"].tolist() == ["a", "b", "c"] and "groups=" not in err


def test_aggregate_grouped_pairwise_gold_names_units(tmp_path, capsys):
    """Grouped units are (group, item) pairs: gold gives the group column too, or names its
    items ``group::item`` (as simulate writes grouped truth); gold by item alone named no
    unit and was scored against nothing, without a word."""
    src = tmp_path / "pairs.csv"
    src.write_text("worker,left,right,label,group\nw1,a,b,a,q1\nw2,a,b,a,q1\nw1,a,b,b,q2\n"
                   "w2,a,b,b,q2\n")
    gold = tmp_path / "gold.csv"
    for text in ("item,score,group\na,2,q1\nb,1,q1\na,1,q2\nb,2,q2\n",
                 "item,score\nq1::a,2\nq1::b,1\nq2::a,1\nq2::b,2\n"):
        gold.write_text(text)
        code, _, err = run(["aggregate", str(src), "--gold", str(gold)], capsys)
        assert code == 0, err
        assert "gold=4" in err and "kendall_tau = 1.0000" in err, err
    gold.write_text("item,score\na,2\nb,1\n")
    code, _, err = run(["aggregate", str(src), "--gold", str(gold)], capsys)
    assert code == 2 and "grouped by column 'group'; the gold item 'a' names no (group, item) unit" in err


def test_aggregate_grouped_pairwise_ids_holding_the_separator(tmp_path, capsys):
    """QA's pg.csv: the item ``x::y`` of group ``g`` and the item ``y`` of group ``g::x``
    both became the unit ``g::x::y`` (3 items out instead of 4, one score for two items).
    Grouped results name each unit by its two ids, in the columns group and item."""
    src = tmp_path / "pg.csv"
    src.write_text("worker,left,right,label,query\nw1,x::y,b,x::y,g\nw2,x::y,b,b,g\n"
                   "w1,y,c,y,g::x\nw2,y,c,y,g::x\n")
    code, out, err = run(["aggregate", str(src), "--col", "group=query", "--method", "bt"], capsys)
    assert code == 0, err
    table = pd.read_csv(io.StringIO(out), dtype={"group": str, "item": str})
    assert list(table.columns) == ["group", "item", "score", "rank", "stderr"]
    assert table[["group", "item"]].to_numpy().tolist() == [["g", "b"], ["g", "x::y"],
                                                             ["g::x", "c"], ["g::x", "y"]]
    assert table["rank"].tolist() == [1, 1, 2, 1]
    assert "items=4" in err and "groups=2" in err


def test_aggregate_pairwise_bad_label_names_line(tmp_path, capsys):
    src = tmp_path / "pairs.csv"
    src.write_text("worker,left,right,label\nw1,a,b,a\nw1,a,c,zz\n")
    code, _, err = run(["aggregate", str(src)], capsys)
    assert code == 2 and "line 3" in err, err


def test_method_warnings_are_one_line(tmp_path, capsys):
    """A method's warning printed the file, line and source of the CLI's call to fit."""
    src = tmp_path / "in.csv"
    src.write_text("left,right,worker,label\ni1,i2,a,i1\ni3,i4,a,i3\n")
    code, _, err = run(["aggregate", str(src), "--method", "bt"], capsys)
    assert code == 0, err
    warning = [line for line in err.splitlines() if "connected components" in line]
    assert len(warning) == 1 and warning[0].startswith("crowdlearn: warning: BradleyTerry: ")
    assert ".py:" not in err and "est.fit" not in err  # no file:line of the CLI's call


def test_classes_option_ignores_spaces_and_empty_items(tmp_path, capsys):
    """--classes "x, y" made a class ' y' (so 'y' answers were refused); "x,y," a class ''."""
    src = tmp_path / "in.csv"
    src.write_text("task,worker,label\n1,a,x\n2,a,y\n")
    for given in ("x, y", "x,y,", " x ,y"):
        code, out, err = run(["aggregate", str(src), "--classes", given], capsys)
        assert code == 0, err
        assert out.splitlines()[0] == "task,label,confidence,p_x,p_y"
    code, _, err = run(["aggregate", str(src), "--classes", "x,y,x"], capsys)
    assert code == 2 and "--classes names 'x' more than once" in err


def test_classes_option_quotes_a_class_with_a_comma(tmp_path, capsys):
    """A class whose name holds a comma ("yes, sure", written quoted in the answers file)
    could not be given to --classes, which split on every comma ('"yes' and 'sure"'): the
    list is now read as one CSV row, quotes and all, as the answers are."""
    src = tmp_path / "in.csv"
    src.write_text('task,worker,label\n1,a,"yes, sure"\n2,a,no\n')
    for given in ('"yes, sure",no,maybe', ' "yes, sure" , no,maybe'):
        code, out, err = run(["aggregate", str(src), "--classes", given], capsys)
        assert code == 0, err
        assert out.splitlines()[0] == 'task,label,confidence,"p_yes, sure",p_no,p_maybe'
    # an unclosed quote runs to the end, as in a CSV file: one class, and the answers say so
    code, _, err = run(["aggregate", str(src), "--classes", '"yes, sure,no'], capsys)
    assert code == 2 and "label 'yes, sure' is not one of the given classes ['yes, sure,no']" in err


def test_simulate_pairwise_one_item_is_a_clear_error(tmp_path, capsys):
    code, _, err = run(["simulate", "--kind", "pairwise", "--tasks", "1", "--out", str(tmp_path / "s.csv")], capsys)
    assert code == 2 and "need n_items >= 2" in err and "low >= high" not in err


def test_aggregate_kind_mismatch(tmp_path, capsys):
    src = tmp_path / "in.csv"
    src.write_text("task,worker,label\n1,a,0\n")
    code, _, err = run(["aggregate", str(src), "--method", "bt", "--kind", "classification"], capsys)
    assert code == 2 and "pairwise method" in err


def test_ordinal_text_labels_need_an_order(tmp_path, capsys, monkeypatch):
    """Ordinal labels that are not numbers were ranked alphabetically (high < low < mid);
    without --classes that is one error naming the label and its line."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.csv").write_text("task,worker,label\n1,a,low\n1,b,high\n2,a,mid\n2,b,mid\n")
    code, _, err = run(["aggregate", "in.csv", "--kind", "ordinal"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("crowdlearn: error: in.csv: line 3: ordinal label 'high' is not a number") and "--classes" in err
    for order in (["--classes", "low,mid,high"], ["--method", "ordinal-ds", "--param", "classes=low,mid,high"]):
        code, out, err = run(["aggregate", "in.csv", "--kind", "ordinal", *order], capsys)
        assert code == 0, err
        assert list(pd.read_csv(io.StringIO(out))["task"]) == [1, 2]
    (tmp_path / "num.csv").write_text("task,worker,label\n1,a,1\n1,b,10\n2,a,2\n2,b,2\n")
    code, _, err = run(["aggregate", "num.csv", "--kind", "ordinal"], capsys)
    assert code == 0, err


def test_benchmark_odd_folders_name_the_file(tmp_path, capsys, monkeypatch):
    """A bad cell in a dataset folder names labels.csv and its line (the line alone before);
    a file or a missing path given as a folder says so."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "labels.csv").write_text("task,worker,label\n1,a,x\n2,a,\n")
    code, _, err = run(["benchmark", "d", "--methods", "mv"], capsys)
    assert code == 2 and err == f"crowdlearn: error: {Path('d/labels.csv')}: missing value in column 'label' at line 3\n"
    (tmp_path / "d" / "labels.csv").write_text("task,worker,label\n1,a,x\n2,a,y\n")
    code, _, err = run(["benchmark", "d", "--kind", "continuous"], capsys)
    assert code == 2 and f"{Path('d/labels.csv')}: column 'label' must hold finite numbers" in err
    code, _, err = run(["benchmark", "d/labels.csv"], capsys)
    assert code == 2 and "labels.csv: not a folder" in err
    code, _, err = run(["benchmark", str(Path("no/such"))], capsys)
    assert code == 2 and "no such folder" in err and err.count("\n") == 1


def test_benchmark_says_why_gold_scores_nothing(tmp_path, capsys):
    """Gold ids spelled otherwise than the answers' (``0001`` for ``1``) gave a table of n/a
    without a word; benchmark now notes it as ``aggregate --gold`` does, naming the gold file
    and an id, for class labels and the other kinds alike."""
    folder = tmp_path / "padded"
    folder.mkdir()
    (folder / "labels.csv").write_text("task,worker,label\n1,a,x\n1,b,x\n2,a,y\n2,b,y\n")
    (folder / "truth.csv").write_text("task,truth\n0001,x\n0002,y\n")
    code, out, err = run(["benchmark", str(folder), "--methods", "mv"], capsys)
    assert code == 0 and "n/a" in out
    assert err == (f"crowdlearn: note: {folder / 'truth.csv'}: 2 of 2 gold task(s) have no answers "
                   "and are not scored (e.g. '0001')\n")
    (folder / "labels.csv").write_text("task,worker,label\n1,a,1.5\n1,b,2.5\n2,a,3\n2,b,4\n")
    (folder / "truth.csv").write_text("task,truth\n1,2\n0002,3\n")
    code, _, err = run(["benchmark", str(folder), "--kind", "continuous", "--methods", "mean"], capsys)
    assert code == 0 and "1 of 2 gold task(s) have no answers" in err and "(e.g. '0002')" in err
    # gold that matches says nothing
    (folder / "truth.csv").write_text("task,truth\n1,2\n2,3\n")
    code, _, err = run(["benchmark", str(folder), "--kind", "continuous", "--methods", "mean"], capsys)
    assert code == 0 and err == ""


def test_benchmark_one_table_per_kind(capsys):
    """Folders of different kinds give one table each; --methods are split by kind."""
    from conftest import SHARED_DATA, skip_missing

    pairs, dog = SHARED_DATA / "music_similarity_pairs", SHARED_DATA / "dog"
    skip_missing(pairs)
    skip_missing(dog)
    code, out, err = run(["benchmark", str(pairs), str(dog), "--methods", "bt,mv"], capsys)
    assert code == 0, err
    assert "== pairwise" in out and "== classification" in out and "kendall_tau" in out
    header, row = out.split("== classification")[0].strip().splitlines()[1:3]
    tau = float(row.split()[header.split().index("kendall_tau")])
    assert 0.5 < tau <= 1.0


def test_benchmark_reads_a_folders_features_for_mmlc(tmp_path, capsys):
    """A folder with features.npy + tasks.csv gives MMLC its features (it said "needs
    features" on every shared folder); only the answered tasks are scored, though tasks.csv
    also lists a test split; features that miss an answered task are reported, not guessed."""
    import numpy as np

    from crowdlearn.simulate import annotate, class_features

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, size=260)
    X, _ = class_features(y, 3, n_features=5, separation=4.0, seed=1)
    conf = np.stack([np.full((3, 3), 0.15) + np.eye(3) * 0.55 for _ in range(8)])
    labels, _ = annotate(y[:200], conf, labels_per_task=3, seed=2)
    folder = tmp_path / "feat"
    folder.mkdir()
    frame = labels.to_frame()
    frame.assign(task="t" + frame["task"].astype(str)).to_csv(folder / "labels.csv", index=False)
    # 60 more tasks (a test split) with features and gold but no answers
    pd.DataFrame({"task": [f"t{i}" for i in range(260)], "truth": y}).to_csv(folder / "truth.csv", index=False)
    order = rng.permutation(260)
    pd.DataFrame({"task": [f"t{i}" for i in order]}).to_csv(folder / "tasks.csv", index=False)
    np.save(folder / "features.npy", X[order])
    code, out, err = run(["benchmark", str(folder), "--methods", "mv,mmlc-owf"], capsys)
    assert code == 0, err
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:] if line.strip()}
    assert 0.8 < float(rows["mmlc-owf"][1]) <= 1.0 and 0.7 < float(rows["mv"][1]) <= 1.0
    assert "200 gold tasks" in out
    # an answered task without a feature row: MMLC is skipped, with the reason on stderr
    keep = [i for i in range(260) if order[i] != 7]
    pd.DataFrame({"task": [f"t{order[i]}" for i in keep]}).to_csv(folder / "tasks.csv", index=False)
    np.save(folder / "features.npy", X[order[keep]])
    code, out, err = run(["benchmark", str(folder), "--methods", "mv,mmlc-owf"], capsys)
    assert code == 0 and "mmlc-owf needs features" in " ".join(out.split())
    assert "no row for 1 answered task(s) (e.g. 't7')" in err


def test_aggregate_calibrate_on_gold(tmp_path, capsys):
    """--calibrate gives the gold to the fit, calibrates the confidences on it and reports the
    cross-fitted accuracy and calibration; it needs gold and class labels."""
    import numpy as np

    from crowdlearn.simulate import WorkerSpec, crowd

    rng = np.random.default_rng(0)
    looks_like = np.where(rng.random(800) < 0.25, rng.integers(0, 3, 800), -1)
    data = crowd(800, 3, [WorkerSpec.instance_dependent(20, outlier_prob=0.7)], labels_per_task=5,
                 seed=1, outlier_class=looks_like)
    src, gold, out = tmp_path / "a.csv", tmp_path / "gold.csv", tmp_path / "out.csv"
    data.to_frame().to_csv(src, index=False)
    data.truth_series().iloc[:150].rename("truth").to_frame().to_csv(gold)
    code, _, err = run(["aggregate", str(src), "--method", "ds", "--gold", str(gold), "--calibrate",
                        "--out", str(out)], capsys)
    assert code == 0, err
    assert "calibrated on 150 gold tasks" in err and "cross-fitted: accuracy" in err
    res = pd.read_csv(out)
    code, _, _ = run(["aggregate", str(src), "--method", "ds", "--out", str(tmp_path / "raw.csv")], capsys)
    raw = pd.read_csv(tmp_path / "raw.csv")
    # softer than DS alone on the tasks without gold, which DS gets wrong a fifth of the time
    assert res["confidence"].iloc[150:].mean() < raw["confidence"].iloc[150:].mean() - 0.05
    code, _, err = run(["aggregate", str(src), "--calibrate"], capsys)
    assert code == 2 and "--calibrate learns from gold labels: give --gold" in err


def test_aggregate_calibrate_prints_why_auto_chose(tmp_path, capsys):
    """With --calibrate the fitted method sits inside the calibration wrapper; `auto`'s
    reason still reaches stderr (it was looked up on the wrapper and lost)."""
    from crowdlearn.simulate import WorkerSpec, crowd

    data = crowd(60, 2, [WorkerSpec.one_coin(5)], labels_per_task=3, seed=2)
    src, gold = tmp_path / "a.csv", tmp_path / "gold.csv"
    data.to_frame().to_csv(src, index=False)
    data.truth_series().iloc[:30].rename("truth").to_frame().to_csv(gold)
    code, _, err = run(["aggregate", str(src), "--method", "auto", "--param", "candidates=mv,ds",
                        "--gold", str(gold), "--calibrate", "--out", str(tmp_path / "out.csv")], capsys)
    assert code == 0, err
    assert "calibrated on 30 gold tasks" in err
    assert any(line.startswith("auto: chose") for line in err.splitlines()), err


@pytest.mark.parametrize("flags, message", [
    (["--gold-lower-is-better"], "--gold-lower-is-better reads the gold of comparisons"),
    (["--question", "q1"], "--question select(s) within a platform's export: add --format"),
    (["--statuses", "Approved"], "--statuses select(s) within a platform's export: add --format"),
])
def test_aggregate_refuses_flags_it_would_ignore(tmp_path, capsys, flags, message):
    """Flags that only mean something elsewhere were ignored without a word on class labels."""
    src = tmp_path / "a.csv"
    src.write_text("task,worker,label\nt1,w1,a\nt1,w2,b\nt2,w1,a\n")
    code, _, err = run(["aggregate", str(src), *flags], capsys)
    assert code == 2 and message in err and err.count("\n") == 1, err
    code, _, err = run(["aggregate", str(src), "--engine", "stream", *flags], capsys)
    assert code == 2 and err.startswith("crowdlearn: error: "), err


def test_aggregate_platform_export(tmp_path, capsys):
    """--format reads a platform export (here a Toloka results TSV, rejected assignments
    dropped, control tasks' GOLDEN column as gold) and aggregates it like a long table."""
    src = tmp_path / "results.tsv"
    rows = ["INPUT:image\tOUTPUT:result\tGOLDEN:result\tASSIGNMENT:worker_id\tASSIGNMENT:status"]
    for task, truth in (("a.jpg", "cat"), ("b.jpg", "dog"), ("c.jpg", "cat")):
        for w in range(3):
            rows.append(f"{task}\t{truth}\t{truth if task == 'a.jpg' else ''}\tw{w}\tAPPROVED")
        rows.append(f"{task}\t{'dog' if truth == 'cat' else 'cat'}\t\tw9\tREJECTED")
    src.write_text("\n".join(rows) + "\n")
    code, out, err = run(["aggregate", str(src), "--format", "toloka", "--method", "mv"], capsys)
    assert code == 0, err
    table = pd.read_csv(io.StringIO(out)).set_index("task")
    assert table["label"].to_dict() == {"a.jpg": "cat", "b.jpg": "dog", "c.jpg": "cat"}
    assert "9 answers" in err and "accuracy on 1 gold tasks = 1.0000" in err
    code, _, err = run(["aggregate", str(src), "--format", "auto", "--method", "bt"], capsys)
    assert code == 2 and "pairwise" in err


def test_aggregate_continuous_ordinal_multilabel_similarity(tmp_path, capsys):
    """Each answer kind through `aggregate`: its output columns, every unit once, and the
    gold summary in the kind's metrics."""
    from crowdlearn.simulate import continuous_crowd, multilabel_crowd, ordinal_crowd
    from crowdlearn.simulate.similarity import similarity_crowd

    cont, _ = continuous_crowd(n_tasks=60, seed=1)
    cont.to_frame().to_csv(tmp_path / "c.csv", index=False)
    cont.truth_series().rename("truth").rename_axis("task").reset_index().to_csv(tmp_path / "ct.csv", index=False)
    code, out, err = run(["aggregate", str(tmp_path / "c.csv"), "--kind", "continuous",
                          "--gold", str(tmp_path / "ct.csv")], capsys)
    assert code == 0, err
    table = pd.read_csv(io.StringIO(out))
    assert list(table.columns) == ["task", "estimate", "stderr"] and len(table) == 60
    assert "gaussian-em (continuous)" in err and "mae = " in err

    ordl, _ = ordinal_crowd(n_tasks=80, seed=1)
    ordl.to_frame().to_csv(tmp_path / "o.csv", index=False)
    code, out, err = run(["aggregate", str(tmp_path / "o.csv"), "--kind", "ordinal"], capsys)
    assert code == 0, err
    assert list(pd.read_csv(io.StringIO(out)).columns[:3]) == ["task", "label", "confidence"]
    assert err.startswith("ordinal-ds:")

    ml, _ = multilabel_crowd(n_tasks=50, seed=1)
    frame = ml.to_frame()
    frame["label"] = frame["label"].str.replace("|", ";", regex=False)
    frame.to_csv(tmp_path / "m.csv", index=False)
    code, out, err = run(["aggregate", str(tmp_path / "m.csv"), "--kind", "multilabel",
                          "--delimiter", ";"], capsys)
    assert code == 0, err
    table = pd.read_csv(io.StringIO(out))
    assert list(table.columns[:3]) == ["task", "label", "confidence"] and len(table) == 50
    assert any(c.startswith("p:") for c in table.columns)

    sim, _ = similarity_crowd(n_items=60, n_clusters=3, answers_per_item=60, seed=1)
    sim.to_frame().to_csv(tmp_path / "s.csv", index=False)
    sim.truth_series().rename("truth").rename_axis("item").reset_index().to_csv(tmp_path / "st.csv", index=False)
    code, out, err = run(["aggregate", str(tmp_path / "s.csv"), "--gold", str(tmp_path / "st.csv"),
                          "--param", "n_clusters=3"], capsys)
    assert code == 0, err
    table = pd.read_csv(io.StringIO(out))
    assert list(table.columns[:2]) == ["item", "cluster"] and len(table) == 60
    ari = float(err.split("ari = ")[1].split(",")[0])
    assert ari > 0.9, err


@pytest.mark.parametrize("kind, flags, message", [
    ("continuous", ["--classes", "a,b"], "--classes names the classes of class labels or the tags of "
                                         "multilabel answers; continuous answers have none"),
    ("pairwise", ["--classes", "a,b"], "--classes names the classes of class labels or the tags of "
                                       "multilabel answers; pairwise answers have none"),
    ("similarity", ["--classes", "a,b"], "--classes names the classes of class labels or the tags of "
                                         "multilabel answers; similarity answers have none"),
    ("classification", ["--delimiter", ";"], "--delimiter separates the tags of multilabel answers; "
                                             "classification answers have none"),
    ("classification", ["--engine", "stream", "--delimiter", ";"],
     "--delimiter separates the tags of multilabel answers; classification answers have none"),
    ("ordinal", ["--delimiter", ";"], "--delimiter separates the tags of multilabel answers; "
                                      "ordinal answers have none"),
    ("continuous", ["--delimiter", ";"], "--delimiter separates the tags of multilabel answers; "
                                         "continuous answers have none"),
])
def test_flags_a_kind_does_not_read_are_refused(kind, flags, message, tmp_path, capsys):
    """--classes on continuous, pairwise and similarity answers and --delimiter on any kind but
    multilabel were ignored without a word; each is now one usage error naming flag and kind."""
    out = tmp_path / "a.csv"
    code, _, err = run(["simulate", "--kind", kind, "--tasks", "10", "--workers", "6", "--out", str(out)], capsys)
    assert code == 0, err
    kind_flag = [] if "--engine" in flags else ["--kind", kind]
    code, stdout, err = run(["aggregate", str(out), *kind_flag, *flags], capsys)
    assert code == 2 and stdout == "" and err == f"crowdlearn: error: {message}\n", err


def test_multilabel_classes_are_the_tag_set(tmp_path, capsys):
    """On multilabel answers --classes is the tag set (it was ignored): its order is the
    columns', a tag nobody gave gets its column, and an answer's tag outside it is an error."""
    src = tmp_path / "m.csv"
    src.write_text("task,worker,label\n1,a,x;y\n1,b,x\n2,a,y\n2,b,y\n")
    code, out, err = run(["aggregate", str(src), "--kind", "multilabel", "--delimiter", ";",
                          "--classes", "z,y,x"], capsys)
    assert code == 0, err
    assert list(pd.read_csv(io.StringIO(out)).columns) == ["task", "label", "confidence", "p:z", "p:y", "p:x"]
    code, _, err = run(["aggregate", str(src), "--kind", "multilabel", "--delimiter", ";", "--classes", "x"], capsys)
    assert code == 2 and "tag 'y' is not one of the given tags ['x'] (lines 2, 4, 5)" in err and err.count("\n") == 1, err


@pytest.mark.parametrize("kind", ["continuous", "ordinal", "multilabel", "pairwise", "similarity"])
def test_simulate_then_aggregate_every_kind(kind, tmp_path, capsys):
    """`simulate --kind K` writes answers and gold that `aggregate --kind K --gold` reads back,
    and the default method recovers the planted truth far better than chance."""
    out, truth = tmp_path / "a.csv", tmp_path / "t.csv"
    code, _, err = run(["simulate", "--kind", kind, "--tasks", "150", "--workers", "20",
                        "--labels-per-task", "8" if kind != "similarity" else "60",
                        "--classes", "3", "--out", str(out), "--truth-out", str(truth)], capsys)
    assert code == 0, err
    code, _, err = run(["aggregate", str(out), "--kind", kind, "--gold", str(truth)], capsys)
    assert code == 0, err
    metric = {"continuous": "pearson", "ordinal": "accuracy on 150 gold tasks", "multilabel": "micro_f1",
              "pairwise": "spearman", "similarity": "ari"}[kind]
    value = float(err.split(f"{metric} = ")[1].split(",")[0].split(";")[0])
    assert value > 0.7, err


def test_preferences_to_dpo(tmp_path, capsys):
    """`preferences` aggregates a/b/tie annotations (a pair shown both ways round is one pair)
    and writes DPO lines whose chosen response is the one the reliable annotators prefer."""
    import json

    rows = ["prompt,response_a,response_b,worker,label"]
    for w in range(5):
        rows.append(f"p1,good,bad,w{w},a")
        rows.append(f"p2,meh,fine,w{w},b")
    rows.append("p1,bad,good,w5,b")  # the same pair, the other way round
    rows.append("p1,good,bad,w6,a")
    src = tmp_path / "prefs.csv"
    src.write_text("\n".join(rows) + "\n")
    dpo = tmp_path / "dpo.jsonl"
    code, out, err = run(["preferences", str(src), "--dpo", str(dpo)], capsys)
    assert code == 0, err
    table = pd.read_csv(io.StringIO(out))
    assert len(table) == 2 and set(table["preferred"]) == {"good", "fine"}
    lines = [json.loads(x) for x in dpo.read_text().splitlines()]
    assert {(d["prompt"], d["chosen"], d["rejected"]) for d in lines} == {("p1", "good", "bad"), ("p2", "fine", "meh")}
    assert all(0.5 <= d["confidence"] <= 1 for d in lines)


@pytest.mark.parametrize(
    "content, flags, message",
    [("prompt,response_a,response_b,worker,label\np1,A,B,w1,x\n", [],
      "in.csv: label 'x' is not 'a', 'b' or a tie ('tie', 'draw', '=') at line 2"),
     ("prompt,response_a,response_b,worker,label\np1,A,B,w1,a\n", ["--dpo", str(Path("no/d.jsonl"))],
      f"{Path('no/d.jsonl')}: the folder no does not exist"),
     ("prompt,response_a,response_b,worker,label\np1,A,B,w1,a\n", ["--min-confidence", "2"],
      "--min-confidence is a probability in [0, 1]; got 2.0")],
)
def test_preferences_bad_input_is_one_line_before_any_output(tmp_path, capsys, monkeypatch, content, flags, message):
    """Row errors name the file; a bad --dpo folder failed after writing the table (OSError);
    --min-confidence outside [0, 1] was taken."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.csv").write_text(content)
    code, out, err = run(["preferences", "in.csv", *flags], capsys)
    assert code == 2 and out == "" and err == f"crowdlearn: error: {message}\n", err


def test_aggregate_numeric_export_as_continuous(tmp_path, capsys):
    """A Toloka export of ratings read as numbers (--format toloka --kind continuous): one
    estimate per task, control tasks' gold scored, a rating that is not a number refused."""
    src = tmp_path / "ratings.tsv"
    rows = ["INPUT:text\tOUTPUT:score\tGOLDEN:score\tASSIGNMENT:worker_id\tASSIGNMENT:status"]
    for task, value in (("t1", 2.0), ("t2", 7.0), ("t3", 4.5)):
        for w, noise in enumerate((-0.5, 0.0, 0.5)):
            gold = f"{value}" if task == "t1" else ""
            rows.append(f"{task}\t{value + noise}\t{gold}\tw{w}\tAPPROVED")
    src.write_text("\n".join(rows) + "\n")
    code, out, err = run(["aggregate", str(src), "--format", "toloka", "--kind", "continuous",
                          "--method", "mean"], capsys)
    assert code == 0, err
    table = pd.read_csv(io.StringIO(out)).set_index("task")
    assert table["estimate"].round(6).to_dict() == {"t1": 2.0, "t2": 7.0, "t3": 4.5}
    assert "mae = 0.0000" in err
    src.write_text(src.read_text().replace("\t7.5\t", "\tseven\t"))
    code, _, err = run(["aggregate", str(src), "--format", "toloka", "--kind", "continuous"], capsys)
    assert code == 2 and "seven" in err, err


def test_negative_seed_is_one_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["benchmark", "dog", "--seed", "-1"])
    assert exc.value.code == 2
    assert "--seed: must be an integer in [0, 2**32), got -1" in capsys.readouterr().err


def test_surrounding_spaces_do_not_split_classes_ids_or_gold_on_any_path(tmp_path, capsys):
    """A hand-edited CSV with "cat " beside "cat" and "t1 " beside "t1" gave extra classes and
    tasks, and gold written "t1 " matched nothing: labels and ids are stripped on every path
    (in-memory and streamed fits, gold, next's lists, the group report's task table)."""
    src = tmp_path / "in.csv"
    src.write_text("task,worker,label\nt1,w1,cat\nt1 ,w2,cat \nt2,w1, dog\nt2,w2 ,dog\nt3,w1,cat\t\n")
    gold = tmp_path / "gold.csv"
    gold.write_text("task,truth\nt1 ,cat\n t2, dog\nt3,cat\n")
    code, out, err = run(["aggregate", str(src), "--method", "mv", "--gold", str(gold)], capsys)
    assert code == 0, err
    table = pd.read_csv(io.StringIO(out))
    assert list(table.columns) == ["task", "label", "confidence", "p_cat", "p_dog"]
    assert table["task"].tolist() == ["t1", "t2", "t3"] and table["label"].tolist() == ["cat", "dog", "cat"]
    assert "accuracy on 3 gold tasks = 1.0000" in err and "note" not in err, err
    pytest.importorskip("pyarrow")
    code, out, err = run(["aggregate", str(src), "--method", "mv", "--engine", "stream"], capsys)
    assert code == 0, err
    streamed = pd.read_csv(io.StringIO(out)).sort_values("task")
    assert list(streamed.columns) == list(table.columns) and streamed["task"].tolist() == ["t1", "t2", "t3"]
    (tmp_path / "pool.csv").write_text("task\n t3\nt4\n")
    code, out, err = run(["next", str(src), "--budget", "5", "--tasks", str(tmp_path / "pool.csv")], capsys)
    assert code == 0 and sorted(pd.read_csv(io.StringIO(out))["task"]) == ["t3", "t4"], out + err
    (tmp_path / "groups.csv").write_text("task,group\nt1 ,a\n t2,b\nt3,a\n")
    code, _, err = run(["aggregate", str(src), "--method", "mv", "--group-col", "group",
                        "--tasks", str(tmp_path / "groups.csv")], capsys)
    assert code == 0, err
    code, _, err = run(["aggregate", str(src), "--method", "mv", "--classes", "cat,dog"], capsys)
    assert code == 0, err


def _benchmark_metric(out: str, method: str, metric: str) -> float:
    """The ``metric`` column of ``method``'s row in the table ``benchmark`` prints."""
    lines = [line.split() for line in out.splitlines() if line.strip()]
    header = lines[0]
    row = next(cells for cells in lines[1:] if cells[1] == method)
    return float(row[header.index(metric)])


@pytest.mark.parametrize("kind, method, metric", [("pairwise", "bt", "kendall_tau"),
                                                  ("similarity", "symnmf", "ari")])
def test_simulate_then_benchmark_round_trip(kind, method, metric, tmp_path, capsys):
    """`benchmark` could not read what `simulate` writes: the gold was refused (header
    `item`, the dataset reader wanted `task`), and pairwise gold is scores (higher = better)
    where a dataset folder's `truth` is a group or rank (1 = best), so once read it came out
    reversed.  Both ways of simulating a dataset folder now benchmark as planted: the answer
    and gold files named by --out and --truth-out, and --out naming a folder."""
    flags = ["simulate", "--kind", kind, "--tasks", "60", "--workers", "20", "--classes", "3",
             "--labels-per-task", "20" if kind == "pairwise" else "40"]
    files = tmp_path / "files"
    files.mkdir()
    answers = files / ("pairs.csv" if kind == "pairwise" else "similarity.csv")
    code, _, err = run([*flags, "--out", str(answers), "--truth-out", str(files / "truth.csv")], capsys)
    assert code == 0, err
    code, out, err = run(["benchmark", str(files), "--kind", kind, "--methods", method], capsys)
    assert code == 0, err
    assert _benchmark_metric(out, method, metric) > 0.5, out
    # --out DIR/ writes the folder (answers, truth.csv, SOURCE.md with its kind)
    code, _, err = run([*flags, "--out", str(tmp_path / "sim") + "/"], capsys)
    assert code == 0, err
    code, out, err = run(["benchmark", str(tmp_path / "sim"), "--methods", method], capsys)
    assert code == 0, err
    assert _benchmark_metric(out, method, metric) > 0.5, out
    if kind == "pairwise":  # scores under the old header: refused, not read as ranks (reversed)
        gold = pd.read_csv(files / "truth.csv").rename(columns={"score": "truth"})
        gold.to_csv(files / "truth.csv", index=False)
        code, _, err = run(["benchmark", str(files), "--kind", kind, "--methods", method], capsys)
        assert code == 2 and "'item,truth' could be scores or ranks" in err, err


def test_repeated_answers_are_kept_alike_by_every_entry_point(tmp_path, capsys):
    """One policy for a worker answering a task twice: every answer counts, in the CLI (in
    memory and streamed), from_csv, from_frame(pd.read_csv) and a dataset folder."""
    import numpy as np

    import crowdlearn as cl
    from crowdlearn import CrowdLabels
    from crowdlearn.core.io import load_folder

    frame = cl.datasets.load("zencrowd_us").to_frame()  # ~1000 repeated (task, worker) pairs
    assert frame.duplicated(["task", "worker"]).sum() > 500
    folder = tmp_path / "set"
    folder.mkdir()
    src = folder / "labels.csv"
    frame.to_csv(src, index=False)
    expected = cl.DawidSkene().fit(CrowdLabels.from_frame(pd.read_csv(src, dtype=str)))
    assert expected.n_iter_ > 0 and cl.DawidSkene().fit(
        CrowdLabels.from_frame(frame, duplicates="last")).probas_.ne(expected.probas_).any().any()
    for data in (CrowdLabels.from_csv(src), load_folder(folder)):
        assert data.n_labels == len(frame)
        pd.testing.assert_frame_equal(cl.DawidSkene().fit(data).probas_, expected.probas_)
    p = expected.probas_["1"].rename("p_1")
    out = tmp_path / "out.csv"
    assert main(["aggregate", str(src), "--method", "ds", "--out", str(out)]) == 0
    got = pd.read_csv(out, dtype={"task": str}).set_index("task")["p_1"]
    np.testing.assert_allclose(got.loc[p.index].to_numpy(), p.to_numpy(), atol=1e-12)
    streamed = tmp_path / "streamed"
    assert main(["aggregate", str(src), "--method", "ds", "--engine", "stream", "--out", str(streamed)]) == 0
    got = pd.concat(pd.read_parquet(f) for f in sorted(streamed.iterdir())).set_index("task")["p_1"]
    np.testing.assert_allclose(got.loc[p.index].to_numpy(), p.to_numpy(), atol=1e-9)
    capsys.readouterr()


def test_a_stray_quote_is_one_line_naming_its_line_on_every_path(tmp_path, capsys, monkeypatch):
    """One quote opening a label and never closed: `aggregate`, `benchmark` and
    `CrowdLabels.from_csv` read the 100th line's label as the rest of the file (4,000 answers
    became 99, exit status 0); the .csv.gz of the same file was refused, naming a record
    ("row 99") and not the line."""
    import gzip

    from crowdlearn import CrowdLabels

    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    lines = ["task,worker,label"] + [f"t{i // 3},w{i % 7},{i % 2}" for i in range(4_000)]
    lines[99] = lines[99][:-1] + '"' + lines[99][-1]
    text = "\n".join(lines) + "\n"
    Path("d/labels.csv").write_text(text)
    with gzip.open("d.csv.gz", "wt") as fh:
        fh.write(text)
    expected = "line 100: unterminated quote: the value opened by the quote (\") on this line is never closed"
    for args, name in ((["aggregate", "d/labels.csv", "--method", "mv"], Path("d/labels.csv")),
                       (["aggregate", "d.csv.gz", "--method", "mv"], Path("d.csv.gz")),
                       (["benchmark", "d", "--methods", "mv"], Path("d/labels.csv"))):
        code, out, err = run(args, capsys)
        assert code == 2 and err.startswith(f"crowdlearn: error: {name}: {expected}"), err
        assert err.count("\n") == 1 and out == ""
    with pytest.raises(ValueError, match=r"labels\.csv: line 100: unterminated quote"):
        CrowdLabels.from_csv("d/labels.csv")
