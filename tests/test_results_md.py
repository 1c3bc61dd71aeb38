"""benchmarks/results_md.py: marked RESULTS.md sections are replaced in place, never duplicated."""

import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import results_md  # noqa: E402


def test_replace_section_in_place_and_append_when_absent():
    text = "# R\n\nbefore\n\n<!-- section: a -->\nold\n<!-- end: a -->\n\nafter\n"
    out = results_md.replace_section(text, "a", "new table")
    assert out == "# R\n\nbefore\n\n<!-- section: a -->\nnew table\n<!-- end: a -->\n\nafter\n"
    again = results_md.replace_section(out, "a", "newer")
    assert again.count("<!-- section: a -->") == 1 and "new table" not in again
    added = results_md.replace_section(out, "b", "x")
    assert added.endswith("<!-- section: b -->\nx\n<!-- end: b -->\n")
    assert "new table" in added


def test_write_section_adds_provenance_and_lists_command(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text("# R\n")
    results_md.write_section("s1", "| a |\n|---|\n| 1 |", command="python x.py --write-results", path=path)
    results_md.write_section("s1", "| a |\n|---|\n| 2 |", command="python x.py --write-results", path=path)
    text = path.read_text()
    assert text.count("<!-- section: s1 -->") == 1 and "| 2 |" in text and "| 1 |" not in text
    assert "_Generated " in text and "cores" in text and "Python " in text
    assert results_md.sections(path) == [("s1", "python x.py --write-results")]


def test_recording_writes_only_on_success(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text("# R\n")
    old = results_md.RESULTS
    results_md.RESULTS = path
    try:
        try:
            with results_md.recording("s", command="c"):
                print("partial")
                raise RuntimeError("benchmark failed")
        except RuntimeError:
            pass
        assert "section: s" not in path.read_text()
        with results_md.recording("s", command="c"):
            print("done")
        assert "done" in path.read_text()
    finally:
        results_md.RESULTS = old


def test_markdown_table_without_tabulate():
    df = pd.DataFrame({"acc": [0.5, np.nan], "name": ["x", "y"]}, index=pd.Index(["r1", "r2"], name="m"))
    lines = results_md.markdown_table(df, ".2f").splitlines()
    assert lines[0] == "| m | acc | name |"
    assert lines[1] == "|:---|---:|:---|"
    assert lines[2] == "| r1 | 0.50 | x |" and lines[3] == "| r2 |  | y |"
