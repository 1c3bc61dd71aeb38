"""The file readers every answer table shares (core.answer_table.AnswerTable): columns by
role, errors naming file lines (a header above CSV rows, none above JSON Lines records)."""

from __future__ import annotations

import json

import pytest

from crowdlearn.continuous.data import ContinuousAnswers
from crowdlearn.multilabel.data import MultiLabelAnswers
from crowdlearn.pairwise.data import Comparisons
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
