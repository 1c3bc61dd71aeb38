"""Unusual but legal categorical inputs, as unseen real datasets bring them: each is read,
fitted and written whole, or refused with one line naming the file and what is wrong."""

import pandas as pd

from crowdlearn import CrowdLabels
from crowdlearn.cli import main


def _answers() -> pd.DataFrame:
    return pd.DataFrame({"task": ["t1", "t1", "t2", "t2", "t3"], "worker": ["a", "b", "a", "b", "a"],
                         "label": ["x", "x", "y", "x", "y"]})


def test_json_lines_with_a_byte_order_mark(tmp_path, capsys):
    """Windows tools write UTF-8 with a BOM; the CSV and TSV readers skip it, JSON Lines did not
    ("cannot parse as jsonl: Expected object or value")."""
    src = tmp_path / "in.jsonl"
    src.write_text(_answers().to_json(orient="records", lines=True), encoding="utf-8-sig")
    assert CrowdLabels.from_frame(pd.read_json(src, lines=True, encoding="utf-8-sig")).n_tasks == 3
    out = tmp_path / "out.csv"
    assert main(["aggregate", str(src), "--method", "mv", "--out", str(out)]) == 0, capsys.readouterr().err
    assert sorted(pd.read_csv(out)["task"]) == ["t1", "t2", "t3"]


def _numbered() -> pd.DataFrame:
    return pd.DataFrame({"task": ["t1", "t1", "t2", "t2", "t3"], "worker": ["a", "b", "a", "b", "a"],
                         "label": [1, 1, 2, 1, 2]})


def test_gold_spelling_a_label_number_differently_is_that_class():
    """One number, one class, for gold too: gold "1.0" is the class "1" of a file's text
    labels, and the gold text "2" is the class 2 of an integer label column (Parquet, JSON
    Lines); both were refused ("not one of the classes", "two different values")."""
    text = _numbered().astype({"label": str})
    data = CrowdLabels.from_frame(text, truth={"t1": "1.0", "t2": "2"})
    assert list(data.classes) == ["1", "2"] and data.truth_series().to_dict() == {"t1": "1", "t2": "2"}
    ints = _numbered()
    data = CrowdLabels.from_frame(ints, truth={"t1": "1", "t2": "2.0"})
    assert list(data.classes) == [1, 2] and data.truth_series().to_dict() == {"t1": 1, "t2": 2}
    data = CrowdLabels.from_frame(ints, classes=[2, 1], truth={"t1": "1"})
    assert data.truth_series().to_dict() == {"t1": 1}
    assert CrowdLabels.from_frame(ints).with_truth({"t3": "2"}).truth_series().to_dict() == {"t3": 2}
    # a gold value that is no label's number stays a class of its own, as before
    assert list(CrowdLabels.from_frame(text, truth={"t1": "3"}).classes) == ["1", "2", "3"]


def test_cli_gold_file_with_integer_labels_from_parquet(tmp_path, capsys):
    src = tmp_path / "in.parquet"
    _numbered().to_parquet(src, index=False)
    gold = tmp_path / "truth.csv"
    gold.write_text("task,truth\nt1,1\nt2,2.0\n")
    assert main(["aggregate", str(src), "--method", "mv", "--gold", str(gold), "--out", str(tmp_path / "o.csv")]) == 0
    assert "accuracy on 2 gold tasks" in capsys.readouterr().err


def test_gold_contradicting_itself_for_a_task_is_refused(tmp_path, capsys):
    """A truth file giving one task two different gold labels was read silently (the last
    row won); a repeated identical row is harmless and stays accepted."""
    import pytest

    text = _answers()
    with pytest.raises(ValueError, match="gold of task 't1' is given twice: 'x' and 'y'"):
        CrowdLabels.from_frame(text, truth=pd.Series(["x", "y"], index=["t1", "t1"]))
    with pytest.raises(ValueError, match="gold of task 't1' is given twice"):
        CrowdLabels.from_frame(text).with_truth(pd.Series(["x", "y"], index=["t1", "t1"]))
    same = CrowdLabels.from_frame(text, truth=pd.Series(["x", "x", "y"], index=["t1", "t1", "t2"]))
    assert same.truth_series().to_dict() == {"t1": "x", "t2": "y"}
    src, gold = tmp_path / "in.csv", tmp_path / "truth.csv"
    text.to_csv(src, index=False)
    gold.write_text("task,truth\nt1,x\nt2,y\nt1,y\n")
    assert main(["aggregate", str(src), "--method", "mv", "--gold", str(gold)]) == 2
    err = capsys.readouterr().err
    assert err == f"crowdlearn: error: {gold}: gold of task 't1' is given twice: 'x' and 'y'\n"


def test_benchmark_keeps_folders_of_the_same_name(tmp_path, capsys):
    """Two dataset folders with the same last name (run1/data, run2/data) were one column of
    the table: the second silently replaced the first."""
    for run, label in (("run1", "x"), ("run2", "y")):
        folder = tmp_path / run / "data"
        folder.mkdir(parents=True)
        (folder / "labels.csv").write_text(f"task,worker,label\nt1,a,{label}\nt1,b,{label}\nt2,a,x\n")
        (folder / "truth.csv").write_text("task,truth\nt1,x\n")
    first, second = str(tmp_path / "run1" / "data"), str(tmp_path / "run2" / "data")
    assert main(["benchmark", first, second, first, "--methods", "mv"]) == 0
    header, row = capsys.readouterr().out.strip().splitlines()[0::2]
    assert header.split()[1:] == [first, second]  # the same folder twice is one dataset
    assert row.split()[1:] == ["1.0000", "0.0000"]


def test_benchmark_says_why_a_method_failed(tmp_path, capsys):
    """A method refusing a dataset was shown as "error" in the table, and nothing said why."""
    folder = tmp_path / "wide"
    folder.mkdir()
    n = 300  # more classes than KOS's K-1 binary problems allow
    rows = [f"t{i % 50},w{i % 3},c{i}" for i in range(n)]
    (folder / "labels.csv").write_text("task,worker,label\n" + "\n".join(rows) + "\n")
    (folder / "truth.csv").write_text("task,truth\nt0,c0\n")
    assert main(["benchmark", str(folder), "--methods", "mv,kos"]) == 0
    out = capsys.readouterr().out
    assert "error" in out and "kos on wide: KOS solves K-1 binary problems; 300 classes" in out


def test_a_header_naming_a_column_twice_is_refused(tmp_path, capsys):
    """``task,worker,label,task`` was read silently with the first ``task`` (the reader renamed
    the second ``task.1``), though which column is the task is ambiguous."""
    for name, sep in (("in.csv", ","), ("in.tsv", "\t"), ("in.csv.gz", ",")):
        src = tmp_path / name
        text = sep.join(["task", "worker", "label", "task"]) + "\n" + sep.join(["t1", "a", "x", "t9"]) + "\n"
        if name.endswith(".gz"):
            import gzip

            src.write_bytes(gzip.compress(text.encode()))
        else:
            src.write_text(text)
        assert main(["aggregate", str(src), "--method", "mv"]) == 2
        err = capsys.readouterr().err
        assert err == f"crowdlearn: error: {src}: line 1: column 'task' appears twice in the header\n"


def test_answers_not_in_utf8_are_read_as_exports_are(tmp_path, capsys):
    """A task,worker,label file saved by Excel on Windows (cp1252) or as "Unicode text"
    (UTF-16 with a byte-order mark) failed with the codec's message ("'utf-8' codec can't
    decode byte 0xe9 in position 1"), while ``--format`` exports in those encodings were read;
    the plain reader now decodes them the same way, for answers and gold alike."""
    import gzip

    frame = pd.DataFrame({"task": ["café", "café", "naïve", "naïve", "t3"], "worker": ["a", "b", "a", "b", "a"],
                          "label": ["oui", "oui", "non", "oui", "non"]})
    text = frame.to_csv(index=False)
    files = {"cp.csv": text.encode("cp1252"), "wide.tsv": frame.to_csv(index=False, sep="\t").encode("utf-16"),
             "cp.csv.gz": gzip.compress(text.encode("cp1252")),
             "cp.jsonl": frame.to_json(orient="records", lines=True, force_ascii=False).encode("cp1252")}
    gold = tmp_path / "truth.csv"
    gold.write_bytes("task,truth\ncafé,oui\n".encode("cp1252"))
    for name, data in files.items():
        src = tmp_path / name
        src.write_bytes(data)
        assert CrowdLabels.from_csv(src).tasks.tolist() == ["café", "naïve", "t3"]
        out = tmp_path / "out.csv"
        assert main(["aggregate", str(src), "--method", "mv", "--gold", str(gold), "--out", str(out)]) == 0
        assert "accuracy on 1 gold tasks = 1.0000" in capsys.readouterr().err
        assert pd.read_csv(out)["task"].tolist() == ["café", "naïve", "t3"]


def test_utf16_without_a_byte_order_mark_is_read(tmp_path, capsys):
    """UTF-16 without a byte-order mark is valid UTF-8 (ASCII and NUL bytes): it was read as
    UTF-8, and refused as "missing column(s) ['task', 'worker', 'label']; the file has columns
    ['t\\x00a\\x00s\\x00k\\x00', ...]"; little- and big-endian are now told by their NUL
    bytes, for answers in every text format and for gold."""
    import gzip

    frame = pd.DataFrame({"task": ["café", "café", "一", "一", "t3"], "worker": ["a", "b", "a", "b", "a"],
                          "label": ["oui", "oui", "non", "oui", "non"]})
    gold = tmp_path / "truth.csv"
    for codec in ("utf-16-le", "utf-16-be"):
        gold.write_bytes("task,truth\ncafé,oui\n".encode(codec))
        files = {"a.csv": frame.to_csv(index=False).encode(codec),
                 "a.tsv": frame.to_csv(index=False, sep="\t").encode(codec),
                 "a.csv.gz": gzip.compress(frame.to_csv(index=False).encode(codec)),
                 "a.jsonl": frame.to_json(orient="records", lines=True, force_ascii=False).encode(codec)}
        for name, data in files.items():
            src = tmp_path / name
            src.write_bytes(data)
            assert CrowdLabels.from_csv(src).tasks.tolist() == ["café", "t3", "一"], (codec, name)
            out = tmp_path / "out.csv"
            assert main(["aggregate", str(src), "--method", "mv", "--gold", str(gold), "--out", str(out)]) == 0
            assert "accuracy on 1 gold tasks = 1.0000" in capsys.readouterr().err
            assert pd.read_csv(out)["task"].tolist() == ["café", "t3", "一"]


def test_utf16_is_told_by_its_nul_bytes_only():
    """Text in other encodings, with a stray NUL byte or characters of every width, is not
    taken for UTF-16; UTF-16 of mostly non-ASCII text (a NUL in a character's other byte,
    U+4E00 is 00 4E) is."""
    from crowdlearn.io.common import utf16_without_bom

    text = "task,worker,label\n" + "".join(f"一{i},工{i % 3},是\n" for i in range(50))
    assert utf16_without_bom(text.encode("utf-16-le")) == "utf-16-le"
    assert utf16_without_bom(text.encode("utf-16-be")) == "utf-16-be"
    assert utf16_without_bom(("task,label\n" + "x" * 5000).encode("utf-16-le")[:4097]) == "utf-16-le"
    for data in (text.encode("utf-8"), "café,x\n".encode("cp1252"), b"task,worker,label\n1,a,x\x00\n",
                 b"", b"a", bytes(range(256)) * 4):
        assert utf16_without_bom(data) is None, data[:20]


def test_a_json_array_of_records_is_read(tmp_path, capsys):
    """A ``.json`` file holding one JSON array of records (pandas' ``to_json(orient="records")``,
    many tools' export) was parsed as JSON Lines: "missing column(s) ['task', 'worker',
    'label']; the file has columns [0]"; it is read as the same answers, ids kept as text."""
    import gzip

    frame = _answers().assign(task=["007", "007", "7", "7", "08"])
    src = tmp_path / "in.json"
    src.write_text(frame.to_json(orient="records", indent=2))
    packed = tmp_path / "in.json.gz"
    packed.write_bytes(gzip.compress(frame.to_json(orient="records").encode()))
    for path in (src, packed):
        assert CrowdLabels.from_csv(path).tasks.tolist() == ["007", "08", "7"]  # any table file
        out = tmp_path / "out.csv"
        assert main(["aggregate", str(path), "--method", "mv", "--out", str(out)]) == 0, capsys.readouterr().err
        assert pd.read_csv(out, dtype=str)["task"].tolist() == ["007", "08", "7"]


def test_messages_show_number_classes_and_ids_as_written():
    """Classes and ids of a numeric frame are numpy scalars: predict_proba said
    ``class np.int64(7) was not seen during fit`` (and gold errors ``task np.int64(1)``); the
    messages show the value, ``7``, as the answers have it."""
    import pytest

    from crowdlearn import DawidSkene

    numbers = pd.DataFrame({"task": [1, 1, 2, 2], "worker": ["a", "b", "a", "b"], "label": [0, 1, 1, 1]})
    est = DawidSkene().fit(CrowdLabels.from_frame(numbers))
    new = CrowdLabels.from_frame(pd.DataFrame({"task": [3], "worker": ["a"], "label": [7]}))
    with pytest.raises(ValueError, match=r"^class 7 was not seen during fit$"):
        est.predict_proba(new)
    with pytest.raises(ValueError, match=r"^partial_fit: class 7 is not among"):
        DawidSkene().partial_fit(numbers, classes=[0, 1]).partial_fit(new.to_frame())
    with pytest.raises(ValueError, match=r"^gold label 5 of task 1 is not one of the classes \[0, 1\]$"):
        CrowdLabels.from_frame(numbers, truth={1: 5}, classes=[0, 1])
    with pytest.raises(ValueError, match=r"^gold of task 1 is given twice: 0 and 1$"):
        CrowdLabels.from_frame(numbers, truth=pd.Series([0, 1], index=[1, 1]))
