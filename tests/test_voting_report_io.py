import re

import numpy as np
import pandas as pd
import pytest
from conftest import load_shared, planted_crowd

import crowdlearn as cl
from crowdlearn.core.io import read_table, write_table
from crowdlearn.report import posterior_table, summarize


def test_majority_vote_counts_and_seeded_ties():
    df = pd.DataFrame({"task": ["a"] * 3 + ["b"] * 2, "worker": list("xyzxy"), "label": [1, 1, 2, 1, 2]})
    mv = cl.MajorityVote().fit(df)
    assert mv.labels_["a"] == 1
    np.testing.assert_allclose(mv.probas_.loc["a"].to_numpy(), [2 / 3, 1 / 3])
    # task b is a tie: the seeded rule picks each class for some seed, and always the same per seed
    picks = {cl.MajorityVote(random_state=s).fit(df).labels_["b"] for s in range(20)}
    assert picks == {1, 2}
    assert cl.MajorityVote(random_state=3).fit(df).labels_["b"] == cl.MajorityVote(random_state=3).fit(df).labels_["b"]


def test_weighted_vote_given_weights():
    df = pd.DataFrame({"task": ["a"] * 3, "worker": ["x", "y", "z"], "label": [0, 1, 1]})
    wmv = cl.WeightedMajorityVote(weights={"x": 5.0}).fit(df)
    assert wmv.labels_["a"] == 0
    np.testing.assert_allclose(wmv.probas_.loc["a"].to_numpy(), [5 / 7, 2 / 7])
    with pytest.raises(ValueError, match="non-negative"):
        cl.WeightedMajorityVote(weights={"x": -1.0}).fit(df)


@pytest.mark.parametrize("name", ["wmv", "wawa", "zbs"])
def test_weighted_votes_beat_mv_with_spammers(name):
    data, _ = planted_crowd(n_tasks=2000, n_workers=20, k=3, per_task=5, seed=11, spammers=8)
    acc = lambda e: float(np.mean(e.label_codes_ == data.truth))  # noqa: E731
    assert acc(cl.get_method(name)().fit(data)) > acc(cl.MajorityVote().fit(data))


def test_zbs_on_music_matches_published_level():
    data = load_shared("music")
    z = cl.ZeroBasedSkill().fit(data)
    assert np.mean(z.label_codes_ == data.truth) >= 0.79  # crowd-kit's ZBS reports 0.80


def test_summary_tables():
    data, conf = planted_crowd(n_tasks=800, n_workers=15, seed=12)
    ds = cl.DawidSkene().fit(data)
    res = summarize(ds, data)
    assert res.tasks.shape[0] == data.n_tasks and res.annotations.shape[0] == data.n_labels
    assert set(res.workers.columns) >= {"accuracy", "n_labels", "agreement", "worst_class"}
    true_acc = np.einsum("wjj->w", conf) / 3
    assert np.corrcoef(res.workers["accuracy"], true_acc)[0, 1] > 0.9
    assert np.all((res.tasks["confidence"] >= 1 / 3 - 1e-9) & (res.tasks["confidence"] <= 1))
    table = posterior_table(ds)
    assert list(table.columns[:3]) == ["task", "label", "confidence"]


@pytest.mark.parametrize("ext", ["csv", "tsv", "jsonl", "parquet", "csv.gz"])
def test_read_write_round_trip(tmp_path, ext):
    if ext == "parquet":
        pytest.importorskip("pyarrow")
    df = pd.DataFrame({"task": ["007", "t2"], "worker": ["w", "ü"], "label": ["1", "0"]})
    path = tmp_path / f"x.{ext}"
    write_table(df, path)
    back = read_table(path, columns=["task", "worker", "label"]).astype(str)
    pd.testing.assert_frame_equal(back, df)
    assert back.loc[0, "task"] == "007"  # ids stay strings


@pytest.mark.parametrize("sep_ext", ["csv", "tsv"])
def test_fast_delimited_writer_matches_pandas(tmp_path, sep_ext):
    """The pyarrow writer's text reads back as pandas' does; odd columns fall back to pandas."""
    pytest.importorskip("pyarrow")
    from crowdlearn.core.tables import _write_delimited_arrow

    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(3), size=50)
    p[0] = [1.0, 0.0, 0.0]
    df = pd.DataFrame({"task": [f"t{i}" for i in range(50)], "label": p.argmax(1), "confidence": p.max(1)})
    for j in range(3):
        df[f"p_{j}"] = p[:, j]
    df.loc[3, "task"] = "ü-é"
    df.loc[4, "confidence"] = np.nan
    sep = "," if sep_ext == "csv" else "\t"
    fast, slow = tmp_path / f"fast.{sep_ext}", tmp_path / f"slow.{sep_ext}"
    assert _write_delimited_arrow(df, fast, sep)
    df.to_csv(slow, index=False, sep=sep)
    pd.testing.assert_frame_equal(pd.read_csv(fast, sep=sep), pd.read_csv(slow, sep=sep))
    assert open(fast).readline() == open(slow).readline()  # unquoted header
    # values needing quotes, booleans, mixed-type ids, compressed names: pandas writes them
    for odd in (df.assign(task=[f"a{sep}b"] * 50), df.assign(label=df.label > 0),
                df.assign(task=[1, "a"] * 25)):
        assert not _write_delimited_arrow(odd, tmp_path / f"odd.{sep_ext}", sep)
        write_table(odd, tmp_path / f"odd.{sep_ext}")
        back = pd.read_csv(tmp_path / f"odd.{sep_ext}", sep=sep)
        assert back.shape == odd.shape and list(back.columns) == list(odd.columns)
    assert not _write_delimited_arrow(df, tmp_path / f"x.{sep_ext}.gz", sep)
    # frames the fast path must leave to pandas (found in review): a lone column with a missing
    # value (pyarrow writes an empty line, which readers skip), integral floats (float ids
    # would read back as "1" instead of "1.0"), duplicate names, huge Python ints, bytes
    lone = pd.DataFrame({"confidence": [0.9, np.nan, 0.7]})
    ids = pd.DataFrame({"task": [1.0, 2.0], "label": ["a", "b"]})
    for odd in (lone, ids, pd.DataFrame([[1.5, 2.5]], columns=["p", "p"]),
                pd.DataFrame({"a": pd.Series([1, 2**70], dtype=object), "b": [0.5, 0.25]}),
                pd.DataFrame({"a": [b"x", b"y"], "b": [0.5, 0.25]})):
        assert not _write_delimited_arrow(odd, tmp_path / f"odd.{sep_ext}", sep)
    write_table(lone, tmp_path / f"lone.{sep_ext}")
    assert read_table(tmp_path / f"lone.{sep_ext}").shape == (3, 1)
    write_table(ids, tmp_path / f"ids.{sep_ext}")
    assert read_table(tmp_path / f"ids.{sep_ext}").task.tolist() == ["1.0", "2.0"]


def _write_text(path, text):
    """``text`` written to ``path`` as UTF-8, gzip-compressed when the name ends in .gz."""
    import gzip

    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["odd.csv", "odd.csv.gz", "odd.tsv"])
def test_fast_reader_reads_what_pandas_reads(tmp_path, name):
    """pyarrow's parser (when installed) gives the C parser's frame: text stays text."""
    sep = "\t" if name.endswith("tsv") else ","
    rows = [["task", "worker", "label"], ["007", "NA", "null"], ["a b", "NaN", "None"],
            ["t3", "", "x"], [" \u00e9 ", " w ", "n/a"], ["t5", "#N/A", "-nan"]]
    text = "\n".join(sep.join(r) for r in rows) + "\n"
    path = _write_text(tmp_path / name, text)
    got = read_table(path, columns=["task", "worker", "label"])
    ref = pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False, na_values=[""], engine="c")
    pd.testing.assert_frame_equal(got, ref)
    assert got.loc[0].tolist() == ["007", "NA", "null"] and got.worker.isna().sum() == 1
    from crowdlearn.core.tables import _read_delimited_arrow

    fast = _read_delimited_arrow(path, sep)
    if name.endswith(".gz"):
        assert fast is None  # compressed: pandas reads it
    elif fast is not None:  # pyarrow installed: its frame is the C parser's
        pd.testing.assert_frame_equal(fast, ref)
    # one-column files go to pandas (a line of spaces is blank to it, a value to pyarrow)
    one = tmp_path / "one.csv"
    one.write_text("task\nt1\n   \nt2\n")
    assert _read_delimited_arrow(one, ",") is None and read_table(one).task.tolist() == ["t1", "t2"]
    # a ragged row: the C parser's reading (short rows padded), so its errors and checks apply
    bad = tmp_path / f"bad.{name}".replace(".gz", "")
    bad.write_text(sep.join(["task", "worker", "label"]) + "\n1" + sep + "2\n3" + sep + "4" + sep + "5\n")
    assert read_table(bad).shape == (2, 3)


def test_bundled_dataset_loads_with_gold():
    data = cl.datasets.load("zencrowd_us")
    assert data.n_labels == 12190 and data.n_tasks == 2040 and np.all(data.truth >= 0)
    with pytest.raises(ValueError, match="unknown dataset"):
        cl.datasets.load("nope")


def test_import_is_light():
    import subprocess
    import sys

    code = "import sys, crowdlearn; print(int(any(m in sys.modules for m in ('sklearn', 'scipy', 'numba', 'torch'))))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "0"


def _answers_text(n_rows: int, sep: str = ",") -> list[str]:
    """The lines of a file of ``n_rows`` answers, header first (no line breaks)."""
    return [sep.join(["task", "worker", "label"])] + [
        sep.join([f"t{i // 3}", f"w{i % 7}", str(i % 2)]) for i in range(n_rows)]


@pytest.mark.parametrize("name", ["a.csv", "a.tsv", "a.csv.gz"])
@pytest.mark.parametrize("n_rows, at", [(4_000, 100), (150_000, 101), (150_000, 140_000), (4_000, 4_001)])
def test_an_unclosed_quote_is_an_error_naming_its_line(tmp_path, name, n_rows, at):
    """A quote opening the label on line ``at`` and never closed: pyarrow read the rest of
    the file as that one label (4,000 answers became 99), or, past its first 1 MB block,
    dropped the rest of the block and kept the other blocks' rows (150,000 became about
    100,000), without an error; .csv.gz (pandas) refused it naming a record, not the line."""
    sep = "\t" if ".tsv" in name else ","
    lines = _answers_text(n_rows, sep)
    lines[at - 1] = lines[at - 1][:-1] + '"' + lines[at - 1][-1]  # ...,"1 (line `at`, 1-based)
    text = "\n".join(lines) + "\n"
    path = _write_text(tmp_path / name, text)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: line {at}: unterminated quote: "):
        read_table(path, columns=["task", "worker", "label"])
    if not name.endswith(".gz"):  # no line break after the last line (a quote there: at the end)
        path.write_text(text.rstrip("\n"), encoding="utf-8")
        with pytest.raises(ValueError, match=rf"line {at}: unterminated quote"):
            read_table(path)


@pytest.mark.parametrize("n_rows", [50, 150_000])
def test_quoted_values_with_line_breaks_separators_and_quotes_are_read(tmp_path, n_rows):
    """Closed quoted values (line breaks, commas and doubled quotes inside, a quote inside an
    unquoted value, blank lines) are read as pandas' C parser reads them, on files of one
    pyarrow block and of several."""
    lines = _answers_text(n_rows)
    lines[10] = 't3,w1,"a\nb, ""c"""'  # one value over two lines
    lines[20] = '"t6","w6","x,y"'
    lines[30] = 't9,w2,5"'  # a quote inside a value is a character
    lines[-1] = lines[-1] + "\n\n"  # blank lines at the end
    path = tmp_path / "q.csv"
    path.write_text("\n".join(lines[:40]) + "\n\n" + "\n".join(lines[40:]) + "\n", encoding="utf-8")
    got = read_table(path, columns=["task", "worker", "label"])
    ref = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""], engine="c")
    pd.testing.assert_frame_equal(got, ref)
    assert len(got) == n_rows and got.label[9] == 'a\nb, "c"' and got.label[19] == "x,y"
    assert got.label[29] == '5"'


def test_unclosed_quote_line_reads_pieces_as_the_whole():
    """The scanner's state goes from one piece of text to the next: a doubled quote or a
    line break split between two pieces, and CR-only line ends."""
    from crowdlearn.core.quotes import unclosed_quote_line

    cases = [('a,b\n1,"x""y"\n2,"z\n3,4\n', 3), ('a,b\n1,"x""y"\n2,z\n', None), ('a,b\n"1', 2),
             ('a,b\n1,x"\n2,"q"\n', None), ('a,b\r1,"x\r2,3\r', 2), ('\ufeff"a",b\n1,"2""', 2),
             ('a,b\r\n1,"x\r\ny"\r\n2,"', 4), ('a,b\n1,""', None), ('a,b\n1,"', 2)]
    for text, line in cases:
        for size in (1, 2, 3, len(text)):
            assert unclosed_quote_line([text[i:i + size] for i in range(0, len(text), size)], ",") == line, (text, size)
    assert unclosed_quote_line(['a\tb\n1\t"x,\n'], "\t") == 2 and unclosed_quote_line(['a\tb\n1,"x\n'], "\t") is None
