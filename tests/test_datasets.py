"""crowdlearn.datasets: list() of the bundled sets and of a shared folder, load(name) with
answers, gold and features, and ``crowdlearn datasets`` (issue 16, item 4)."""

import numpy as np
import pandas as pd
import pytest

from crowdlearn import datasets
from crowdlearn.cli import main
from conftest import SHARED_DATA, skip_missing


def _write_folder(root, name="tiny_crowd"):
    folder = root / name
    folder.mkdir(parents=True)
    pd.DataFrame({"task": ["t1", "t1", "t2", "t2", "t3"], "worker": ["a", "b", "a", "c", "b"],
                  "label": ["x", "x", "y", "x", "y"]}).to_csv(folder / "labels.csv", index=False)
    pd.DataFrame({"task": ["t1", "t2", "t3", "t4"], "truth": ["x", "y", "y", "x"]}).to_csv(folder / "truth.csv", index=False)
    pd.DataFrame({"task": ["t1", "t2", "t3", "t4"]}).to_csv(folder / "tasks.csv", index=False)
    np.save(folder / "features.npy", np.arange(12, dtype=np.float32).reshape(4, 3))
    (folder / "SOURCE.md").write_text(
        f"# {name}: A tiny crowd written by the tests\n\n## Counts\n\n- kind: classification\n"
        "- crowd answers (rows of labels.csv): 5\n- tasks with at least one answer: 3\n- workers: 3\n"
        "- label values seen in answers (2): x, y\n- tasks with ground truth (rows of truth.csv): 4\n")
    return folder


def test_list_counts_match_what_load_returns():
    table = datasets.list()
    assert {"zencrowd_us", "sentiment_polarity"} <= set(table.index)
    for name in ("zencrowd_us", "sentiment_polarity"):
        row, data = table.loc[name], datasets.load(name)
        assert row["source"] == "bundled" and row["kind"] == "classification"
        assert (row["answers"], row["tasks"], row["workers"], row["classes"]) == (
            data.n_labels, data.n_tasks, data.n_workers, data.n_classes)
        assert row["gold"] == int((data.truth >= 0).sum())
        assert row["description"] and "\n" not in row["description"]
    # the bundled sets stay small
    assert sum(f.stat().st_size for f in datasets.DATA_DIR.rglob("*") if f.is_file()) < 1_000_000


def test_a_folder_of_the_root_is_listed_and_loaded(tmp_path, capsys):
    _write_folder(tmp_path)
    table = datasets.list(tmp_path)
    row = table.loc["tiny_crowd"]
    assert row["description"] == "A tiny crowd written by the tests"
    assert (row["answers"], row["tasks"], row["workers"], row["gold"], row["features"]) == (5, 3, 3, 4, 3)
    data = datasets.load("tiny_crowd", root=tmp_path, with_features=True)
    assert data.n_labels == 5 and data.features.shape == (4, 3)       # t4: features, no answer
    assert dict(data.truth_series()) == {"t1": "x", "t2": "y", "t3": "y", "t4": "x"}
    np.testing.assert_array_equal(data.features[list(data.tasks).index("t2")], [3, 4, 5])
    assert datasets.load("tiny_crowd", root=tmp_path).features is None
    # features.npy and tasks.csv of different lengths: one error naming both
    np.save(tmp_path / "tiny_crowd" / "features.npy", np.zeros((3, 3)))
    with pytest.raises(ValueError, match="features.npy has 3 rows but tasks.csv lists 4 tasks"):
        datasets.load("tiny_crowd", root=tmp_path, with_features=True)
    assert main(["datasets", "--root", str(tmp_path), "--sources"]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("tiny_crowd"))
    assert "A tiny crowd written by the tests" in line and str(tmp_path) in line
    assert main(["datasets", "--root", str(tmp_path / "missing")]) == 2
    assert "no such folder of datasets" in capsys.readouterr().err
    with pytest.raises(ValueError, match="tiny_crowd"):  # an unknown name lists the known ones
        datasets.load("nope", root=tmp_path)


def test_shared_folder_by_name():
    skip_missing(SHARED_DATA / "music")
    table = datasets.list(SHARED_DATA)
    assert table.loc["music", "features"] == 124 and table.loc["dog", "classes"] == 4
    data = datasets.load("music", root=SHARED_DATA, with_features=True)
    assert data.features.shape == (1000, 124) and int((data.truth >= 0).sum()) == 1000
    from crowdlearn.registry import answer_type_of

    assert isinstance(datasets.load("snow_wordsim", root=SHARED_DATA), answer_type_of("continuous"))


def test_a_similarity_folder_is_read_from_its_similarity_csv(tmp_path, capsys):
    """A folder holding similarity.csv is listed as a similarity dataset, but load() read
    labels.csv, which it lacks ("labels.csv: no such file"), so benchmark could not run it."""
    folder = tmp_path / "pairs_alike"
    folder.mkdir()
    pd.DataFrame({"worker": ["u", "v", "u", "v", "w"], "item_a": ["a", "a", "c", "c", "a"],
                  "item_b": ["b", "b", "d", "d", "c"], "same": [1, 1, 1, 1, 0]}).to_csv(
        folder / "similarity.csv", index=False)
    pd.DataFrame({"task": ["a", "b", "c", "d"], "truth": [0, 0, 1, 1]}).to_csv(
        folder / "truth.csv", index=False)
    assert datasets.list(tmp_path, bundled=False).loc["pairs_alike", "kind"] == "similarity"
    data = datasets.load("pairs_alike", root=tmp_path)
    assert type(data).__name__ == "SimilarityAnswers"
    assert (data.n_answers, data.n_items) == (5, 4) and (data.truth >= 0).all()
    assert main(["benchmark", str(folder), "--methods", "similarity-spectral"]) == 0
    assert "similarity-spectral" in capsys.readouterr().out


@pytest.mark.parametrize("line, kind", [
    ("- kind: numeric", "continuous"), ("- kind: regression (scores 0-100)", "continuous"),
    ("- kind: multi-label", "multilabel"), ("* Kind: Graded relevance", "ordinal"),
    ("- kind: preferences; pairs.csv", "pairwise"), ("- kind: classification (binary)", "classification"),
])
def test_folder_kind_reads_the_usual_names_of_each_kind(tmp_path, line, kind):
    folder = _write_folder(tmp_path)
    (folder / "SOURCE.md").write_text(f"# tiny\n\n{line}\n")
    assert datasets.folder_kind(folder) == kind


def test_an_unknown_kind_word_warns_and_leaves_it_to_the_files(tmp_path):
    from crowdlearn.benchmarking import categorical_datasets

    folder = _write_folder(tmp_path)
    (folder / "SOURCE.md").write_text("# tiny\n\n- kind: sentiment\n")
    with pytest.warns(UserWarning, match="kind 'sentiment'.*--kind"):
        assert datasets.folder_kind(folder) == "classification"
    # a continuous folder is no categorical benchmark set whatever the word for it
    (folder / "SOURCE.md").write_text("# tiny\n\n- kind: regression\n")
    assert categorical_datasets(tmp_path) == []


@pytest.mark.parametrize("kind_line", ["- kind: classification", "- kind: numeric"])
def test_a_folder_truth_may_name_its_column_gold_or_label_as_aggregate_reads_it(tmp_path, kind_line):
    folder = _write_folder(tmp_path)
    (folder / "SOURCE.md").write_text(f"# tiny\n\n{kind_line}\n")
    if "numeric" in kind_line:
        pd.DataFrame({"task": ["t1", "t1", "t2"], "worker": ["a", "b", "a"], "label": [1.0, 2.0, 3.0]}).to_csv(
            folder / "labels.csv", index=False)
        pd.DataFrame({"task": ["t1", "t2"], "gold": [1.5, 3.0]}).to_csv(folder / "truth.csv", index=False)
        data = datasets.load(str(folder))
        assert dict(zip(data.tasks, data.truth)) == {"t1": 1.5, "t2": 3.0}
    else:
        pd.DataFrame({"task": ["t1", "t2", "t3"], "label": ["x", "y", "y"]}).to_csv(folder / "truth.csv", index=False)
        data = datasets.load(str(folder))
        assert list(data.classes.take(data.truth[:3])) == ["x", "y", "y"]
    pd.DataFrame({"task": ["t1"], "answer": ["x"]}).to_csv(folder / "truth.csv", index=False)
    with pytest.raises(ValueError, match=r"truth\.csv: expected .*gold.*'answer'"):
        datasets.load(str(folder))
