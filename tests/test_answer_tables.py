"""The file readers every answer table shares (core.answer_table.AnswerTable): columns by
role, errors naming file lines (a header above CSV rows, none above JSON Lines records)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from crowdlearn.continuous.data import ContinuousAnswers
from crowdlearn.multilabel.data import MultiLabelAnswers
from crowdlearn.pairwise.data import LEFT, RIGHT, TIE, Comparisons, read_truth
from crowdlearn.pairwise.preferences import Preferences
from crowdlearn.similarity.data import SimilarityAnswers

# (table, a good record, a record its from_frame refuses)
CASES = {
    "continuous": (ContinuousAnswers, {"task": "t1", "worker": "w1", "label": "2.5"},
                   {"task": "t2", "worker": "w1", "label": "lots"}),
    "multilabel": (MultiLabelAnswers, {"task": "t1", "worker": "w1", "label": "a|b"},
                   {"task": "t2", "worker": None, "label": "a"}),
    "pairwise": (Comparisons, {"worker": "w1", "left": "x", "right": "y", "label": "x"},
                 {"worker": "w1", "left": "x", "right": "y", "label": "z"}),
    "similarity": (SimilarityAnswers, {"worker": "w1", "item_a": "x", "item_b": "y", "same": "1"},
                   {"worker": "w1", "item_a": "x", "item_b": "x", "same": "1"}),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_bad_record_named_by_its_file_line(kind, tmp_path):
    table, good, bad = CASES[kind]
    csv = tmp_path / "a.csv"
    cols = list(good)
    lines = [",".join(cols)] + [",".join("" if r[c] is None else r[c] for c in cols) for r in (good, bad)]
    csv.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"line 3\b"):
        table.from_csv(csv)
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in (good, bad)) + "\n")
    with pytest.raises(ValueError, match=r"line 2\b"):
        table.from_csv(jsonl)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_columns_by_role(kind, tmp_path):
    """Renamed columns are found by role, positionally or by keyword, with the same result."""
    table, good, _ = CASES[kind]
    renamed = {f"col_{c}": v for c, v in good.items()}
    path = tmp_path / "a.csv"
    path.write_text(",".join(renamed) + "\n" + ",".join(renamed.values()) + "\n")
    by_position = table.from_csv(path, *renamed)
    by_keyword = table.from_csv(path, **{role: f"col_{role}" for role in table.ROLES})
    assert by_position.to_frame().equals(by_keyword.to_frame())
    assert len(by_position) == 1
    with pytest.raises(ValueError, match="col_"):
        table.from_csv(path)  # the default column names are not there


# -------------------------------------------------------------------- whitespace around ids
def test_continuous_ids_lose_surrounding_whitespace_and_gold_still_matches():
    """" t1 " and "t1" were two tasks of a continuous table (class labels already stripped
    them), and gold keyed "t1 " matched no task."""
    df = pd.DataFrame({"task": ["t1", " t1 ", "t2\t"], "worker": ["w1", "w2 ", " w1"],
                       "label": ["1.0", "2.0", " 3"]})
    data = ContinuousAnswers.from_frame(df, truth={"t1 ": 1.5, " t2": "2.5 "}, all_tasks=["t3 "],
                                        features=pd.DataFrame({"f": [1.0, 2, 3]},
                                                              index=["t1", " t2", "t3"]))
    assert list(data.tasks) == ["t1", "t2", "t3"] and list(data.workers) == ["w1", "w2"]
    assert data.truth_series().to_dict() == {"t1": 1.5, "t2": 2.5}
    assert data.features[:, 0].tolist() == [1.0, 2.0, 3.0]
    assert data.with_truth({" t2 ": 4}).truth_series().to_dict() == {"t2": 4.0}
    assert df["task"].tolist()[1] == " t1 "  # the caller's frame is not modified
    with pytest.raises(ValueError, match="missing value in column 'worker' at row position 1"):
        ContinuousAnswers.from_frame(pd.DataFrame({"task": ["a", "b"], "worker": ["w", "  "],
                                                   "label": [1, 2]}))


def test_multilabel_ids_and_tags_lose_surrounding_whitespace_and_gold_still_matches():
    df = pd.DataFrame({"task": ["t1", " t1 ", "t2"], "worker": ["w1", "w2 ", "w1"],
                       "label": ["a| b", ["a ", "b"], ("c", " ")]})
    data = MultiLabelAnswers.from_frame(df, truth={"t1 ": "a|b", " t2": ["c "]}, all_tasks=[" t3"])
    assert list(data.tasks) == ["t1", "t2", "t3"] and list(data.workers) == ["w1", "w2"]
    assert list(data.tags) == ["a", "b", "c"]
    assert data.answer_tags() == [("a", "b"), ("a", "b"), ("c",)]
    assert data.truth_series().to_dict() == {"t1": ("a", "b"), "t2": ("c",)}
    given = MultiLabelAnswers.from_frame(df, tags=["c ", "b", " a"])
    assert list(given.tags) == ["c", "b", "a"]


def test_pairwise_ids_labels_and_tie_lose_surrounding_whitespace_and_gold_still_matches():
    df = pd.DataFrame({"worker": ["w1", " w1", "w2 "], "left": ["a", " a", "b "],
                       "right": ["b", "b\t", " c"], "label": [" a", "b ", " Tie "]})
    data = Comparisons.from_frame(df, truth={"a ": 3.0, " c": 1.0}, all_items=[" d"])
    assert list(data.items) == ["a", "b", "c", "d"] and list(data.workers) == ["w1", "w2"]
    assert data.outcome.tolist() == [LEFT, RIGHT, TIE]
    assert data.truth_series().to_dict() == {"a": 3.0, "c": 1.0}
    # grouped: the group and item of a (group, item) gold key are stripped alike
    grouped = Comparisons.from_frame(df.assign(q=["q1", "q1 ", " q1"]), group="q",
                                     truth=pd.Series({("q1 ", " a"): 2.0}))
    assert len(grouped.items) == 3
    assert grouped.truth_series().to_dict() == {("q1", "a"): 2.0}


def test_pairwise_gold_file_ids_are_stripped(tmp_path):
    path = tmp_path / "gold.csv"
    path.write_text("item,truth\n a ,3\nb\t,1\n")
    df = pd.DataFrame({"worker": ["w1"], "left": ["a"], "right": ["b"], "label": ["a"]})
    data = Comparisons.from_frame(df, truth=read_truth(path, item="item"))
    assert data.truth_series().to_dict() == {"a": 3.0, "b": 1.0}


def test_preference_ids_lose_surrounding_whitespace():
    df = pd.DataFrame({"prompt": ["p", "p "], "response_a": ["r1", " r2"], "response_b": ["r2 ", "r1"],
                       "worker": ["w1", "w1 "], "label": ["a", " b"]})
    prefs = Preferences.from_frame(df)
    assert prefs.n_pairs == 1 and prefs.labels.n_workers == 1
    assert prefs.pairs.iloc[0].tolist() == ["p", "r1", "r2"]


def test_similarity_ids_lose_surrounding_whitespace_and_gold_still_matches():
    df = pd.DataFrame({"worker": ["w1", "w1 "], "item_a": ["x", " x"], "item_b": ["y ", "z"],
                       "same": ["1", " 0"]})
    data = SimilarityAnswers.from_frame(df, truth={"x ": "c1", " y": " c1", "z": "c2"},
                                        all_items=["v "],
                                        features=pd.DataFrame({"f": [1.0, 2, 3, 4]},
                                                              index=[" v", "x", "y", "z "]))
    assert list(data.items) == ["v", "x", "y", "z"] and list(data.workers) == ["w1"]
    truth = data.truth_series()
    assert truth["x"] == truth["y"] != truth["z"]  # "c1" and " c1" are one cluster
    assert data.features[:, 0].tolist() == [1.0, 2.0, 3.0, 4.0]
