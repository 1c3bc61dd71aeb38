"""Multi-label answers: the answer table, binary relevance, planted recovery, metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crowdlearn.aggregation.dawid_skene import DawidSkene
from crowdlearn.diagnostics.multilabel_metrics import hamming_loss, macro_f1, micro_f1, subset_accuracy
from crowdlearn.multilabel.binary_relevance import BinaryRelevance
from crowdlearn.multilabel.data import MultiLabelAnswers
from crowdlearn.simulate.multilabel import multilabel_crowd
from crowdlearn.testing.multilabel import check_equals_per_tag_fits, toy_answers


def _frame(labels):
    return pd.DataFrame({"task": ["a", "a", "b", "c"][:len(labels)], "worker": ["x", "y", "x", "y"][:len(labels)],
                         "label": labels})


# ------------------------------------------------------------------------------ the table
def test_lists_strings_and_empty_sets():
    data = MultiLabelAnswers.from_frame(_frame([["cat", "dog"], "dog|bird", "", np.nan]))
    assert list(data.tags) == ["bird", "cat", "dog"]
    assert data.answer_tags() == [("cat", "dog"), ("bird", "dog"), (), ()]
    assert data.n_answers == 4 and data.n_tasks == 3 and data.n_workers == 2
    assert list(data.to_frame()["label"]) == ["cat|dog", "bird|dog", "", ""]
    comma = MultiLabelAnswers.from_frame(_frame([("cat", "dog"), "dog, bird", set(), []]), delimiter=",")
    assert comma.answer_tags() == data.answer_tags()
    assert "answers=4" in repr(data) and "tags=3" in repr(data)


@pytest.mark.parametrize("labels, kwargs, message", [
    ([["a"], 3.5, ["b"]], {}, r"label must be a list.*row position 1"),
    ([["a", "a"], ["b"]], {}, r"repeats a tag at row position 0"),
    ([["a"], ["zzz"]], dict(tags=["a", "b"]), r"'zzz' is not one of the given tags.*row position 1"),
])
def test_bad_labels_name_the_row(labels, kwargs, message):
    with pytest.raises(ValueError, match=message):
        MultiLabelAnswers.from_frame(_frame(labels), **kwargs)


def test_file_errors_name_the_line(tmp_path):
    path = tmp_path / "answers.csv"
    path.write_text("task,worker,label\na,x,cat|dog\n,y,dog\n")
    with pytest.raises(ValueError, match="missing value in column 'task' at line 3"):
        MultiLabelAnswers.from_csv(path)
    path.write_text("task,worker,label\na,x,cat;dog\nb,y,\n")
    data = MultiLabelAnswers.from_csv(path, delimiter=";")
    assert data.answer_tags() == [("cat", "dog"), ()]


def test_tag_labels_keep_every_task_and_truth_marker():
    df = _frame([["cat"], ["dog"], ["dog"], []])
    data = MultiLabelAnswers.from_frame(df, truth={"a": ["cat"], "c": ""}, all_tasks=["a", "b", "c", "d"])
    assert list(data.truth_known) == [True, False, True, False]  # c: known, and empty
    assert data.truth_series().to_dict() == {"a": ("cat",), "c": ()}
    cat = data.tag_labels("cat")
    assert list(cat.classes) == [0, 1] and list(cat.tasks) == ["a", "b", "c", "d"]
    assert list(cat.label) == [1, 0, 0, 0] and list(cat.truth) == [1, -1, 0, -1]
    assert cat.labels_per_task()[3] == 0


# ------------------------------------------------------------------------ binary relevance
@pytest.mark.parametrize("method", ["ds", "mv", "glad"])
def test_binary_relevance_equals_per_tag_fits(method):
    check_equals_per_tag_fits(BinaryRelevance(method=method))
    data = toy_answers(3)
    br = BinaryRelevance(method="ds", params=dict(diag_alpha=1.0)).fit(data)
    for tag in data.tags:
        alone = DawidSkene(diag_alpha=1.0).fit(data.tag_labels(tag))
        np.testing.assert_array_equal(br.probas_[tag].to_numpy(), alone.probas_[1].to_numpy())
        assert br.estimators_[tag] is not br.estimators_[data.tags[0]] or tag == data.tags[0]


def test_result_frame():
    data = toy_answers(1)
    br = BinaryRelevance().fit(data)
    frame = br.result_frame()
    assert list(frame.columns) == ["task", "label", "confidence"] + [f"p:{t}" for t in data.tags]
    p = br.probas_.to_numpy()
    conf = np.where(br.decisions_, p, 1 - p).prod(axis=1)
    np.testing.assert_allclose(frame["confidence"], conf)
    row = frame.iloc[0]
    assert row["label"] == "|".join(br.labels_.iloc[0])
    high = BinaryRelevance(threshold=0.9).fit(data)
    assert high.decisions_.sum() <= br.decisions_.sum()


def test_binary_relevance_errors():
    data = toy_answers(0)
    with pytest.raises(ValueError, match="threshold"):
        BinaryRelevance(threshold=1.5).fit(data)
    with pytest.raises(ValueError, match="unknown classification method"):
        BinaryRelevance(method="nope").fit(data)


def test_planted_recovery():
    data, planted = multilabel_crowd(n_tasks=1500, n_workers=25, n_tags=5, labels_per_task=5,
                                     spammers=0.3, seed=7)
    truth = data.truth_series()
    ds = BinaryRelevance().fit(data)
    mv = BinaryRelevance(method="mv").fit(data)
    # measured: Hamming loss 0.062 (ds) vs 0.115 (mv); subset accuracy 0.733 vs 0.586
    assert hamming_loss(ds.labels_, truth, data.tags) < 0.08
    assert hamming_loss(ds.labels_, truth, data.tags) < hamming_loss(mv.labels_, truth, data.tags) - 0.03
    assert subset_accuracy(ds.labels_, truth, data.tags) > subset_accuracy(mv.labels_, truth, data.tags) + 0.1
    # the worker sensitivity (P(answer 1 | true 1)) of every tag's Dawid-Skene
    sens = np.mean([est.confusions_[:, 1, 1] for est in ds.estimators_.values()], axis=0)
    spec = np.mean([est.confusions_[:, 0, 0] for est in ds.estimators_.values()], axis=0)
    assert np.corrcoef(sens, planted.sensitivity)[0, 1] > 0.95
    assert np.corrcoef(spec, planted.specificity)[0, 1] > 0.95


# ----------------------------------------------------------------------------------- metrics
def test_metrics():
    truth = pd.Series({"a": ("x", "y"), "b": (), "c": ("z",)})
    pred = pd.Series({"a": "x", "b": "", "c": "z", "d": "x"})
    assert hamming_loss(pred, truth) == pytest.approx(1 / 9)
    assert subset_accuracy(pred, truth) == pytest.approx(2 / 3)
    assert micro_f1(pred, truth) == pytest.approx(2 * 2 / (2 * 2 + 1))
    assert macro_f1(pred, truth) == pytest.approx((1 + 0 + 1) / 3)
    ind = np.array([[1, 0], [0, 1]])
    assert hamming_loss(ind, ind) == 0.0


def test_parquet_list_column_and_jsonl(tmp_path):
    from crowdlearn.core.tables import read_table

    df = pd.DataFrame({"task": ["a", "a", "b"], "worker": ["x", "y", "x"],
                       "label": [["cat", "dog"], [], ["dog"]]})
    want = MultiLabelAnswers.from_frame(df).answer_tags()
    df.to_parquet(tmp_path / "a.parquet")
    assert MultiLabelAnswers.from_parquet(tmp_path / "a.parquet").answer_tags() == want
    df.to_json(tmp_path / "a.jsonl", orient="records", lines=True)
    back = MultiLabelAnswers.from_frame(read_table(tmp_path / "a.jsonl"))
    assert back.answer_tags() == want


def test_class_labels_are_one_tag_answers():
    from crowdlearn.multilabel.data import as_multilabel_answers
    from crowdlearn.testing.data import toy_crowd

    crowd = toy_crowd(n_tasks=30, seed=0)
    as_tags = as_multilabel_answers(crowd)
    assert as_tags.n_answers == crowd.n_labels and list(as_tags.tags) == list(crowd.classes)
    assert all(len(t) == 1 for t in as_tags.answer_tags())
    assert as_tags.truth_series().map(len).eq(1).all()


class _WarmStarted(BinaryRelevance):
    """Broken on purpose: each tag's fit starts from the previous tag's posteriors."""

    def _fit(self, data):
        super()._fit(data)
        previous = None
        for j, tag in enumerate(data.tags):
            est = DawidSkene(max_iter=3)
            est.fit(data.tag_labels(tag), init=previous)
            previous = est.probas_.to_numpy()
            self.probas_[tag] = est.probas_[1].to_numpy()


class _FirstTaskSpecial(BinaryRelevance):
    """Broken on purpose: the first task of the input is always tagged with every tag."""

    def _fit(self, data):
        super()._fit(data)
        self.probas_.iloc[0] = 1.0


@pytest.mark.parametrize("broken, check, message", [
    (_WarmStarted, "check_equals_per_tag_fits", "differs from its aggregator alone"),
    (_FirstTaskSpecial, "check_renaming_invariance", "renamed/reordered"),
])
def test_checks_catch_broken_estimators(broken, check, message):
    from crowdlearn.testing import multilabel as checks

    with pytest.raises(AssertionError, match=message):
        getattr(checks, check)(broken())


def test_more_bad_input():
    df = _frame([["cat"], ["dog"]])
    with pytest.raises(ValueError, match="true tag 'fox'"):
        MultiLabelAnswers.from_frame(df, truth={"a": ["fox"]}, tags=["cat", "dog"])
    with pytest.raises(ValueError, match="delimiter must be a non-empty string"):
        MultiLabelAnswers.from_frame(df, delimiter="")
    with pytest.raises(ValueError, match=r"missing column\(s\) \['label'\]"):
        MultiLabelAnswers.from_frame(df.drop(columns="label"))
    with pytest.raises(TypeError, match="expected MultiLabelAnswers"):
        BinaryRelevance().fit([("a", "x", "cat")])


def test_numeric_tags_follow_the_class_order():
    # tags from a file are text: "10" after "2", as for class labels, on both input forms
    df = pd.DataFrame({"task": ["a", "a", "b"], "worker": ["w1", "w2", "w1"], "label": ["1|10", "2", "10|b"]})
    assert list(MultiLabelAnswers.from_frame(df).tags) == ["1", "2", "10", "b"]
    lists = df.assign(label=[[1, 10], [2], [10, "b"]])
    assert list(MultiLabelAnswers.from_frame(lists).tags) == [1, 2, 10, "b"]


def test_number_tags_of_json_lists_meet_text_gold(tmp_path):
    """Answers in JSON Lines hold number tags ([1, 10]); gold read from a CSV holds text
    ("10|2").  The gold's tags were pooled with the answers' and refused as "class id '10' is
    two different values, of types int and str" (class labels' gold matched by value)."""
    df = pd.DataFrame({"task": [1, 1, 2, 2], "worker": [1, 2, 1, 2],
                       "label": [[1, 10, 2], [2], [10, 2], []]})
    truth = pd.Series({"1": "2|10", "2": "10|3"})
    data = MultiLabelAnswers.from_frame(df, truth=truth)
    assert list(data.tags) == [1, 2, 3, 10]  # the answers' spelling; a gold-only tag added
    want = MultiLabelAnswers.from_frame(df, truth=pd.Series({1: [2, 10], 2: [10, 3]}))
    np.testing.assert_array_equal(data.truth_code, want.truth_code)
    np.testing.assert_array_equal(data.truth_ptr, want.truth_ptr)
    # the command line: JSON Lines answers, CSV gold
    from crowdlearn.cli import main

    df.to_json(tmp_path / "a.jsonl", orient="records", lines=True)
    truth.rename_axis("task").rename("truth").to_csv(tmp_path / "gold.csv")
    assert main(["aggregate", str(tmp_path / "a.jsonl"), "--kind", "multilabel",
                 "--gold", str(tmp_path / "gold.csv"), "--out", str(tmp_path / "out.csv")]) == 0


def test_metric_tag_order_is_the_class_order():
    # the metrics' own tag index (no tags given) orders tags as MultiLabelAnswers does
    from crowdlearn.diagnostics.multilabel_metrics import tag_indicator

    matrix, tags = tag_indicator(pd.Series(["10|2", "b|1", ""]))
    assert list(tags) == ["1", "2", "10", "b"]
    assert matrix.tolist() == [[0, 1, 1, 0], [1, 0, 0, 1], [0, 0, 0, 0]]


@pytest.mark.parametrize("truth", [[["cat"], [], ["dog"]], np.array(["cat", "", "dog"], dtype=object)])
def test_positional_truth_is_refused_keyed_truth_reads_as_before(truth):
    """Integer task ids: a list of tag sets used to be keyed 0..n-1, whichever tasks those are."""
    df = pd.DataFrame({"task": [2, 1, 0], "worker": ["x", "y", "x"], "label": ["cat", "dog", ""]})
    with pytest.raises(ValueError, match=r"^truth must be keyed by task id .*task -> tag set"):
        MultiLabelAnswers.from_frame(df, truth=truth)
    for keyed in (pd.Series([["dog"], []], index=[2, 0]), {2: ["dog"], 0: []}):
        data = MultiLabelAnswers.from_frame(df, truth=keyed)
        assert data.truth_series().to_dict() == {0: (), 2: ("dog",)}


def test_multilabel_metrics_refuse_positional_input_but_not_indicators():
    pred = pd.Series({2: ("cat",), 0: ("dog",)})
    with pytest.raises(ValueError, match=r"^truth must be keyed by task id .*0/1 indicator arrays"):
        hamming_loss(pred, [("cat",), ("dog",)])
    with pytest.raises(ValueError, match=r"^pred must be keyed by task id"):
        subset_accuracy(np.array([1, 0]), pred)
    assert subset_accuracy(pred, {0: ["dog"], 2: ["dog"]}) == subset_accuracy(
        pred, pd.Series({0: ("dog",), 2: ("dog",)})) == 0.5
    ind = np.array([[1, 0], [0, 1]])
    assert hamming_loss(ind, ind[::-1]) == 1.0  # two indicator arrays: row by row, as documented


def test_one_tag_spelled_two_ways_in_one_answer_is_a_repeat():
    """``1|1.0`` is one number, one tag, twice: refused like ``a|a`` (it was read as one
    answer holding the tag twice, which to_frame wrote as ``1|1`` and from_frame refused)."""
    from crowdlearn.multilabel.data import parse_tag_sets

    with pytest.raises(ValueError, match="repeats a tag"):
        parse_tag_sets(["1|1.0"])
    counts, flat = parse_tag_sets(["1|2", "a|b"])
    assert counts.tolist() == [2, 2] and flat == ["1", "2", "a", "b"]
