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
