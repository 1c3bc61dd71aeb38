import numpy as np
import pandas as pd
import pytest

from crowdlearn import CrowdLabels


def frame():
    return pd.DataFrame(
        {
            "task": ["b", "a", "b", "c", "a", "a"],
            "worker": ["w1", "w1", "w2", "w2", "w3", "w1"],
            "label": ["x", "y", "x", "x", "y", "y"],
        }
    )


def test_from_frame_codes_sorted_and_csr():
    d = CrowdLabels.from_frame(frame())
    assert d.task.dtype == np.int32 and d.worker.dtype == np.int32 and d.label.dtype == np.int32
    assert list(d.tasks) == ["a", "b", "c"] and list(d.classes) == ["x", "y"]
    assert np.all(np.diff(d.task) >= 0)
    np.testing.assert_array_equal(d.task_ptr, [0, 3, 5, 6])
    # repeated (a, w1) answers are kept by default
    assert d.n_labels == 6


def test_round_trip_to_frame():
    d = CrowdLabels.from_frame(frame())
    back = d.to_frame().sort_values(["task", "worker", "label"]).reset_index(drop=True)
    orig = frame().sort_values(["task", "worker", "label"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(back, orig)


def test_canonical_order_is_the_same_for_any_row_order():
    d = CrowdLabels.from_frame(frame())
    order = d.canonical_order()
    keys = list(zip(d.task[order], d.worker[order], d.label[order]))
    assert keys == sorted(keys) and sorted(order) == list(range(d.n_labels))
    shuffled = CrowdLabels.from_frame(frame().iloc[[5, 3, 0, 4, 2, 1]])
    o2 = shuffled.canonical_order()
    for a, b in ((d.task, shuffled.task), (d.worker, shuffled.worker), (d.label, shuffled.label)):
        np.testing.assert_array_equal(a[order], b[o2])
    assert d.canonical_order() is order  # cached


def test_duplicate_policies():
    assert CrowdLabels.from_frame(frame(), duplicates="last").n_labels == 5
    with pytest.raises(ValueError, match="repeated"):
        CrowdLabels.from_frame(frame(), duplicates="error")


def test_classes_given_and_violated():
    d = CrowdLabels.from_frame(frame(), classes=["y", "x", "z"])
    assert list(d.classes) == ["y", "x", "z"]
    with pytest.raises(ValueError, match="not one of the given classes"):
        CrowdLabels.from_frame(frame(), classes=["x"])


@pytest.mark.parametrize("col", ["task", "worker", "label"])
def test_nan_and_missing_columns_are_named(col):
    df = frame()
    df.loc[2, col] = None
    with pytest.raises(ValueError, match=f"column '{col}' at row position 2"):
        CrowdLabels.from_frame(df)
    with pytest.raises(ValueError, match="missing column"):
        CrowdLabels.from_frame(frame().drop(columns=[col]))


def test_empty_table():
    with pytest.raises(ValueError, match="empty"):
        CrowdLabels.from_frame(frame().iloc[:0])


def test_unicode_and_tuple_ids_and_float_labels():
    df = pd.DataFrame({"task": [("é", 1), ("é", 1), "日本"], "worker": ["Ω", "ж", "Ω"], "label": [1.0, 2.0, 1.0]})
    d = CrowdLabels.from_frame(df)
    assert d.n_tasks == 2 and d.n_workers == 2
    assert list(d.classes) == [1, 2]


def test_wide_round_trip_and_subset():
    d = CrowdLabels.from_frame(frame(), duplicates="last")
    wide = d.to_wide()
    assert wide.shape == (3, 3) and wide.loc["c", "w2"] == "x" and pd.isna(wide.loc["c", "w1"])
    d2 = CrowdLabels.from_wide(wide)
    assert d2.n_labels == d.n_labels and list(d2.classes) == list(d.classes)
    sub = d.subset(workers=["w1"])
    assert set(sub.workers) == {"w1"} and list(sub.classes) == ["x", "y"]
    assert sub.n_labels == 2


def test_truth_and_features_alignment():
    truth = {"a": "y", "b": "x", "zzz": "x"}  # unknown task ignored
    feats = pd.DataFrame(np.arange(6.0).reshape(3, 2), index=["c", "a", "b"])
    d = CrowdLabels.from_frame(frame(), truth=truth, features=feats)
    np.testing.assert_array_equal(d.truth, [1, 0, -1])
    np.testing.assert_array_equal(d.features[:, 0], [2.0, 4.0, 0.0])
    with pytest.raises(ValueError, match="one row per task"):
        CrowdLabels.from_frame(frame(), features=np.zeros((2, 3)))


def test_immutable_codes():
    d = CrowdLabels.from_frame(frame())
    with pytest.raises(ValueError):
        d.label[0] = 1


def test_many_classes_no_dense_tasks_by_workers():
    rng = np.random.default_rng(0)
    n = 50_000
    df = pd.DataFrame({"task": rng.integers(0, 20_000, n), "worker": rng.integers(0, 20_000, n),
                       "label": rng.integers(0, 10_000, n)})
    d = CrowdLabels.from_frame(df)
    assert d.n_classes > 9000
    votes = d.incidence()
    assert votes.shape == (d.n_tasks, d.n_workers * d.n_classes) and votes.nnz == n


def test_from_codes_owns_its_arrays_sorted_or_not():
    """Codes already sorted by task skip the argsort but are still copied, not shared."""
    task = np.array([0, 0, 1, 2], dtype=np.int32)
    worker = np.array([0, 1, 1, 0], dtype=np.int32)
    label = np.array([1, 0, 1, 1], dtype=np.int32)
    for t in (task, task[::-1].copy()):
        data = CrowdLabels.from_codes(t, worker, label)
        before = data.to_frame().copy()
        t[:] = 0
        worker[:] = 0
        pd.testing.assert_frame_equal(data.to_frame(), before)
        t[:] = [0, 0, 1, 2] if t is task else [2, 1, 0, 0]
        worker[:] = [0, 1, 1, 0]


@pytest.mark.parametrize("values", [
    np.array([5, 3, 3, 9, -2, 0]),                          # int64, negative, not from 0
    np.array([-128, 127, 0, 127], dtype=np.int8),           # the full range of a small type
    np.array([255, 0, 3, 3], dtype=np.uint8),
    np.array([2**64 - 1, 2**64 - 5, 2**64 - 1], dtype=np.uint64),  # beyond int64
    np.array([2**62, 1, 2**62]),                            # a range too wide: hash path
    np.random.default_rng(0).integers(0, 1000, 20_000).astype(np.int32),
])
def test_factorize_ids_integer_fast_path_equals_pandas(values):
    from crowdlearn.core.ids import factorize_ids

    codes, index = factorize_ids(pd.Series(values), "item")
    want_codes, want_uniques = pd.factorize(pd.Series(values), sort=True)
    np.testing.assert_array_equal(codes, want_codes)
    assert index.equals(pd.Index(want_uniques, name="item")) and index.dtype == values.dtype


def test_simulator_tuple_passed_to_fit_is_one_clear_error():
    from crowdlearn import DawidSkene
    from crowdlearn.simulate.ordinal import ordinal_crowd

    pair = ordinal_crowd(n_tasks=20, n_workers=5, seed=0)  # (answers, planted)
    with pytest.raises(TypeError, match="pass the answers alone"):
        DawidSkene().fit(pair)
    DawidSkene().fit(pair[0])


def test_text_ids_and_labels_lose_surrounding_whitespace_and_gold_still_matches(tmp_path):
    """"cat" and "cat " (a hand-edited CSV) were two classes, " t1" and "t1" two tasks: text
    labels and ids are now stripped of surrounding whitespace on every path (frames, files,
    given classes, gold, features, all_tasks), a blank one is a missing value, and numbers
    are untouched."""
    df = pd.DataFrame({"task": ["t1", " t1", "t2 ", "t2", "t3"],
                       "worker": ["w1", "w2 ", "w1", "\tw2", "w1"],
                       "label": ["cat", "cat ", " dog", "dog", "cat\t"]})
    d = CrowdLabels.from_frame(df, truth={" t1 ": "cat ", "t2": " dog"})
    assert list(d.classes) == ["cat", "dog"] and list(d.tasks) == ["t1", "t2", "t3"]
    assert list(d.workers) == ["w1", "w2"]
    assert d.truth_series().to_dict() == {"t1": "cat", "t2": "dog"}
    assert df["label"].tolist()[1] == "cat "  # the caller's frame is not modified
    # given classes, gold attached later, features and tasks without answers: the same ids
    d = CrowdLabels.from_frame(df, classes=["dog ", "cat"], all_tasks=["t4 "],
                               features=pd.DataFrame({"f": [1.0, 2, 3, 4]}, index=["t1", " t2", "t3", "t4"]))
    assert list(d.classes) == ["dog", "cat"] and list(d.tasks) == ["t1", "t2", "t3", "t4"]
    assert d.features[:, 0].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert d.with_truth(pd.Series({" t3": "cat "})).truth_series().to_dict() == {"t3": "cat"}
    # a file, and the same file through pandas, give the same table
    src = tmp_path / "a.csv"
    df.to_csv(src, index=False)
    for read in (CrowdLabels.from_csv(src), CrowdLabels.from_frame(pd.read_csv(src))):
        assert list(read.classes) == ["cat", "dog"] and read.n_tasks == 3 and read.n_workers == 2
    # a label of blanks is a missing value, as an empty cell is
    with pytest.raises(ValueError, match="missing value in column 'label' at row position 1"):
        CrowdLabels.from_frame(pd.DataFrame({"task": [1, 2], "worker": [1, 1], "label": ["a", "  "]}))
    # numbers and ids of other types are untouched; mixed-type columns keep their non-text values
    d = CrowdLabels.from_frame(pd.DataFrame({"task": [1, 2, 3], "worker": [7, " x", "x"],
                                             "label": [1.0, 2.0, 1.0]}))
    assert list(d.classes) == [1, 2] and list(d.tasks) == [1, 2, 3] and set(d.workers) == {7, "x"}


def test_numeric_labels_get_numeric_class_order_on_every_path(tmp_path):
    """Labels 0..11 read from a file are text, and the classes were in text order
    ("0", "1", "10", "11", "2", ...), unlike the same file through pandas (0, 1, 2, ...):
    numbers are now ordered by value on every path, and other labels after them by text,
    whatever the order of the rows."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"task": np.repeat(np.arange(30), 3), "worker": np.tile([1, 2, 3], 30),
                       "label": rng.integers(0, 12, 90)})
    src = tmp_path / "k12.csv"
    df.to_csv(src, index=False)
    as_text = CrowdLabels.from_csv(src)
    assert list(as_text.classes) == [str(k) for k in range(12)]
    assert list(CrowdLabels.from_frame(df.astype({"label": str})).classes) == list(as_text.classes)
    assert list(CrowdLabels.from_frame(df).classes) == list(range(12))
    # the same answers on both paths, and class code k is the label k
    for d in (as_text, CrowdLabels.from_frame(df)):
        back = d.to_frame().astype(int).sort_values(["task", "worker"])
        assert back["label"].tolist() == df.sort_values(["task", "worker"])["label"].tolist()
        np.testing.assert_array_equal(d.classes.take(d.label).astype(int), d.label)
    # gold values join the order; decimals, negatives and exponents by value
    d = CrowdLabels.from_records([("a", "w", "10"), ("b", "w", "2.5"), ("c", "w", "-1")],
                                 truth={"a": "1e1", "b": "3"})
    assert list(d.classes) == ["-1", "2.5", "3", "10"]
    # numbers before text, text by text, for any row order; mixed types too
    for labels in (["b", "10", "2", "a"], ["a", "2", "b", "10"]):
        d = CrowdLabels.from_records([(i, "w", v) for i, v in enumerate(labels)])
        assert list(d.classes) == ["2", "10", "a", "b"]
    for labels in ([3, "a", 12], ["a", 12, 3]):
        d = CrowdLabels.from_records([(i, "w", v) for i, v in enumerate(labels)])
        assert list(d.classes) == [3, 12, "a"]
    # a given order is kept
    assert list(CrowdLabels.from_csv(src, classes=[str(k) for k in range(11, -1, -1)]).classes)[:2] == ["11", "10"]


def test_gold_task_ids_match_by_value_across_types(tmp_path):
    """Answers read as text (from_csv, the CLI) and gold read by pd.read_csv (task 17, not
    "17"), or the other way round, matched no gold task at all, silently."""
    import crowdlearn as cl

    src = tmp_path / "answers.csv"
    pd.DataFrame({"task": [1, 1, 2, 2, 17], "worker": ["a", "b", "a", "b", "a"],
                  "label": [0, 1, 1, 1, 0]}).to_csv(src, index=False)
    truth_file = tmp_path / "truth.csv"
    pd.DataFrame({"task": [1, 17], "truth": [1, 1]}).to_csv(truth_file, index=False)
    numeric_truth = pd.read_csv(truth_file).set_index("task")["truth"]
    text_truth = pd.read_csv(truth_file, dtype=str).set_index("task")["truth"]
    for data in (CrowdLabels.from_csv(src, truth=numeric_truth),
                 CrowdLabels.from_frame(pd.read_csv(src), truth=text_truth),
                 CrowdLabels.from_csv(src).with_truth(numeric_truth)):
        assert list(data.truth_series().index.astype(str)) == ["1", "17"]
    # gold given to fit is clamped as well
    ds = cl.DawidSkene().fit(CrowdLabels.from_csv(src), gold=numeric_truth)
    assert ds.labels_["17"] == "1"
    from crowdlearn.continuous.data import ContinuousAnswers

    scores = ContinuousAnswers.from_csv(src, truth=pd.Series({1: 0.5}))
    assert scores.truth[list(scores.tasks).index("1")] == 0.5


# ---------------------------------------------------------------- gold keyed by task id
def _int_task_frame():
    """Integer task ids 0..2 in the answers: a positional truth would match them by value."""
    return pd.DataFrame({"task": [2, 2, 1, 1, 0], "worker": ["a", "b", "a", "b", "a"],
                         "label": ["x", "y", "y", "y", "x"]})


POSITIONAL = [
    (np.array(["y", "x", "x"]), "got an array of shape (3,), which names no task"),
    (["y", "x", "x"], "got a list of 3 value(s), which names no task"),
    (("y", "x", "x"), "got a tuple of 3 value(s)"),
    (pd.Index(["y", "x", "x"]), "got an Index of 3 value(s)"),
]


def _words(text):
    return text.replace("(", r"\(").replace(")", r"\)")


def test_keyed_gold_passes_series_and_mappings_and_refuses_the_rest():
    from crowdlearn.core.gold import keyed_gold

    series = pd.Series(["x"], index=[7])
    assert keyed_gold(series) is series
    pd.testing.assert_series_equal(keyed_gold({7: "x"}), pd.Series({7: "x"}))
    assert keyed_gold({7: 1}, dtype=object).dtype == object
    with pytest.raises(ValueError, match=r"^truth must be keyed by item id \(a pandas Series indexed by "
                                         r"item, or a dict item -> score\), got an array .*; hint$"):
        keyed_gold(np.zeros(2), "truth", key="item", value="score", hint="; hint")
    with pytest.raises(TypeError, match="got a DataFrame"):
        keyed_gold(pd.DataFrame({"task": [1], "label": ["x"]}))
    with pytest.raises(ValueError, match="got an int, which names no task"):
        keyed_gold(3)


@pytest.mark.parametrize("truth, words", POSITIONAL)
def test_crowd_labels_refuse_positional_truth(truth, words):
    """With integer task ids, a positional truth used to be keyed 0..n-1 and so land on the
    tasks whose id equals its position; with text ids it was dropped whole."""
    with pytest.raises(ValueError, match="truth must be keyed by task id .*" + _words(words)):
        CrowdLabels.from_frame(_int_task_frame(), truth=truth)
    data = CrowdLabels.from_frame(_int_task_frame())
    with pytest.raises(ValueError, match="truth must be keyed by task id .*" + _words(words)):
        data.with_truth(truth)
    with pytest.raises(ValueError, match="gold must be keyed by task id .*" + _words(words)):
        data.encode_gold(truth)


def test_crowd_labels_read_keyed_truth_as_before():
    keyed = [pd.Series(["y", "x"], index=[2, 0]), {2: "y", 0: "x"}]
    for truth in keyed:
        data = CrowdLabels.from_frame(_int_task_frame(), truth=truth)
        np.testing.assert_array_equal(data.truth, [0, -1, 1])  # tasks 0, 1, 2; classes x, y
        plain = CrowdLabels.from_frame(_int_task_frame())
        np.testing.assert_array_equal(plain.with_truth(truth).truth, data.truth)
        np.testing.assert_array_equal(plain.encode_gold(truth), data.truth)


def test_from_csv_errors_name_the_line_of_each_format(tmp_path):
    """``from_csv`` reads JSON Lines and Parquet too (the format is the extension's), but its
    errors counted lines as for a CSV with a header: a missing label in the 3rd record of a
    ``.jsonl`` file (line 3) was reported at "line 4", and in a Parquet file, which has no
    lines, at "line 4" too.  They now agree with the CLI: JSON Lines line 3, Parquet row
    position 2, CSV line 4 (header = line 1)."""
    df = pd.DataFrame({"task": ["a", "b", "c"], "worker": ["x", "x", "y"], "label": ["1", "2", None]})
    df.to_csv(tmp_path / "a.csv", index=False)
    df.to_json(tmp_path / "a.jsonl", orient="records", lines=True)
    df.to_parquet(tmp_path / "a.parquet", index=False)
    for name, where in (("a.csv", "line 4"), ("a.jsonl", "line 3"), ("a.parquet", "row position 2")):
        with pytest.raises(ValueError, match=f"missing value in column 'label' at {where}$"):
            CrowdLabels.from_csv(tmp_path / name)
    # the explicit readers agree
    with pytest.raises(ValueError, match="at row position 2$"):
        CrowdLabels.from_parquet(tmp_path / "a.parquet")


def test_json_numbers_are_read_as_written_as_csv_cells_are(tmp_path):
    """JSON Lines numbers went through float64: labels 1, 1.0, 1e0, 2.5, 10 gave the classes
    1.0, 2.5, 10.0 (the CSV of the same values: 1, 2.5, 10), and task ids 9007199254740993
    and 9007199254740992 beside a 1.5 became one task, 9007199254740992.0."""
    import json

    rows = [("9007199254740993", "a", "1"), ("9007199254740992", "a", "1.0"), ("1.5", "a", "1e0"),
            ("9007199254740993", "b", "2.5"), ("9007199254740992", "b", "10"), ("1.5", "b", "10")]
    src = tmp_path / "a.csv"
    src.write_text("task,worker,label\n" + "".join(f"{t},{w},{y}\n" for t, w, y in rows))
    # the numbers written as JSON numbers (not strings), as the CSV spells them
    lines = ['{"task": %s, "worker": "%s", "label": %s}' % row for row in rows]
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "a.json").write_text("[\n" + ",\n".join(lines) + "\n]\n")
    ref = CrowdLabels.from_csv(src)
    assert ref.classes.tolist() == ["1", "2.5", "10"] and ref.n_tasks == 3
    for name in ("a.jsonl", "a.json"):
        got = CrowdLabels.from_csv(tmp_path / name)
        assert got.classes.tolist() == ref.classes.tolist(), name
        assert got.tasks.tolist() == ref.tasks.tolist() == ["1.5", "9007199254740992", "9007199254740993"]
        assert got.label.tolist() == ref.label.tolist()
    # the table holds the text of each number; strings, null and nested values as JSON has them
    from crowdlearn.core.tables import read_table

    (tmp_path / "b.jsonl").write_text('{"task": "007", "worker": -0.50, "label": [1, "x"]}\n\n'
                                      '{"task": 7, "worker": true, "label": null}\n')
    table = read_table(tmp_path / "b.jsonl")
    assert table["task"].tolist() == ["007", "7"] and table["worker"].tolist() == ["-0.50", True]
    assert table["label"][0] == ["1", "x"] and pd.isna(table["label"][1])
    assert json.loads(lines[0])["task"] == 9007199254740993  # (the file is valid JSON)


@pytest.mark.parametrize("content, message", [
    ('{"task": 1, "worker": "a", "label": 0}\n\n{"task": 2, "worker": "a" "label": 1}\n',
     r"b\.jsonl: line 3: not valid JSON: Expecting ',' delimiter \(column 27\)$"),
    ('{"task": 1, "worker": "a", "label": 0}\n["t", "w", 1]\n', r"b\.jsonl: line 2: not a JSON object"),
    ('{"task": 1, "worker": "a", "label": 0} {"task": 2}\n', r"b\.jsonl: line 1: not valid JSON: Extra data"),
    ("\n\n", r"b\.jsonl: the file is empty"),
])
def test_json_lines_errors_name_the_line(tmp_path, content, message):
    """pandas' messages named no line ("cannot parse as jsonl: Unexpected character found
    when decoding object value")."""
    (tmp_path / "b.jsonl").write_text(content)
    with pytest.raises(ValueError, match=message):
        CrowdLabels.from_csv(tmp_path / "b.jsonl")
