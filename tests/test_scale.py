"""The partitioned fits (crowdlearn.scale) against the in-memory fit.

Equality is the contract: on every categorical set of ../shared/data, the Dask fit (a small
in-process cluster, several partitions) and the streaming fit (several files, several
buckets) give the in-memory labels, and posteriors within 1e-6 of it.
"""

import logging
import os
import re
import signal
import threading

import numpy as np
import pandas as pd
import pytest

import crowdlearn as cl
from crowdlearn.benchmarking import categorical_datasets
from crowdlearn.scale import Columns, fit_dask, fit_stream, supported_methods
from crowdlearn.scale.coding import Coding
from crowdlearn.scale.driver import LocalEngine, collect_results, fit_program
from conftest import SHARED_DATA, skip_missing

SETS = categorical_datasets(SHARED_DATA) if SHARED_DATA.exists() else ["bluebirds"]
METHODS = ["mv", "wmv", "wawa", "zbs", "ds", "onecoin", "ccds", "glad", "mace"]

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")


def answers(name: str) -> pd.DataFrame:
    folder = SHARED_DATA / name
    skip_missing(folder)
    return pd.read_csv(folder / "labels.csv")


def assert_same_fit(est, ref, tol=1e-6):
    """Same tasks, same labels, posteriors within ``tol``, same worker model size."""
    assert len(est.labels_) == len(ref.labels_) and set(est.labels_.index) == set(ref.labels_.index)
    labels = est.labels_.reindex(ref.labels_.index)
    assert (labels == ref.labels_).all(), f"{int((labels != ref.labels_).sum())} labels differ"
    proba = est.probas_.reindex(index=ref.probas_.index, columns=ref.probas_.columns).to_numpy()
    assert np.isfinite(proba).all()
    assert np.abs(proba - ref.probas_.to_numpy()).max() <= tol
    assert est.n_iter_ == ref.n_iter_
    assert len(est.workers_) == len(ref.workers_) and set(est.workers_) == set(ref.workers_)


def write_files(df: pd.DataFrame, folder, n_files=3, fmt="parquet"):
    """The answers shuffled over ``n_files`` files, so tasks are split across files."""
    folder.mkdir(parents=True, exist_ok=True)
    shuffled = df.sample(frac=1.0, random_state=0)
    for i in range(n_files):
        part = shuffled.iloc[i::n_files]
        if fmt == "parquet":
            part.to_parquet(folder / f"part{i}.parquet", index=False)
        else:
            part.to_csv(folder / f"part{i}.csv", index=False)
    return folder


@pytest.fixture(scope="module")
def client():
    logging.getLogger("distributed.shuffle").setLevel(logging.ERROR)  # p2p shuffle chatter
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                       dashboard_address=None)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


# ------------------------------------------------------------------- programs
@pytest.mark.parametrize("name", SETS)
def test_every_program_matches_the_in_memory_fit(name):
    """The rounds of each method, on 3 hash partitions, are the in-memory fit."""
    df = answers(name)
    for method in METHODS:
        ref = cl.get_method(method)().fit(df)
        est = cl.get_method(method)()
        engine, coding = LocalEngine.from_frame(df, 3)
        program = fit_program(est, engine, coding)
        collect_results(est, program, list(engine.outputs(program.output(), est.random_state)))
        assert_same_fit(est, ref)
        if method in ("ds", "onecoin", "ccds"):
            np.testing.assert_allclose(est.confusions_, ref.confusions_, atol=1e-9)
        if method == "glad":
            np.testing.assert_allclose(est.difficulties_.reindex(ref.tasks_), ref.difficulties_, atol=1e-9)


def test_supported_methods_and_refusal():
    assert set(supported_methods()) == set(METHODS)
    df = answers("bluebirds")
    engine, coding = LocalEngine.from_frame(df, 2)
    with pytest.raises(ValueError, match="no partitioned.*ds"):
        fit_program(cl.get_method("bp")(), engine, coding)


def test_tie_breaks_follow_the_task_not_its_position():
    """Two opposite answers per task: every task is tied, and its draw must not depend on
    where its rows are (a partition or file holds them in another order)."""
    first = np.random.default_rng(0).integers(0, 2, 200)
    df = pd.DataFrame({"task": np.repeat([f"t{i}" for i in range(200)], 2), "worker": ["a", "b"] * 200,
                       "label": np.column_stack([first, 1 - first]).ravel()})
    a = cl.MajorityVote().fit(df).labels_
    b = cl.MajorityVote().fit(df.iloc[::-1]).labels_.reindex(a.index)
    c = cl.MajorityVote().fit(df[df["task"] > "t5"]).labels_
    assert (a == b).all() and (a.reindex(c.index) == c).all()
    assert 60 < int((a == 1).sum()) < 140  # ties still go either way


# -------------------------------------------------------------------- stream
@pytest.mark.parametrize("name", SETS)
def test_stream_matches_the_in_memory_fit(name, tmp_path):
    df = answers(name)
    folder = write_files(df, tmp_path / "in")
    chunk = max(500, len(df) // 5)  # several chunks and buckets
    ref = cl.DawidSkene().fit(df)
    est = cl.DawidSkene()
    fit_stream(est, folder, chunk_answers=chunk)
    assert_same_fit(est, ref)


@pytest.mark.parametrize("method", ["mv", "wawa", "glad", "onecoin"])
def test_stream_other_methods_and_csv(method, tmp_path):
    df = pd.read_csv(SHARED_DATA / "zencrowd_us" / "labels.csv", dtype=str) if (SHARED_DATA / "zencrowd_us").exists() \
        else pytest.skip("shared data missing")
    folder = write_files(df, tmp_path / "in", fmt="csv")
    ref = cl.get_method(method)().fit(df)
    est = cl.get_method(method)()
    fit_stream(est, str(folder / "*.csv"), chunk_answers=2000)
    assert_same_fit(est, ref)


def test_stream_writes_every_task_once(tmp_path):
    df = answers("dog")
    folder = write_files(df, tmp_path / "in")
    (tmp_path / "in" / "empty.parquet").write_bytes(b"")  # not a Parquet file: refused clearly
    with pytest.raises(Exception, match="empty.parquet|Parquet"):
        fit_stream(cl.DawidSkene(), folder, chunk_answers=3000, out=tmp_path / "out")
    os.remove(tmp_path / "in" / "empty.parquet")
    df.iloc[:0].to_parquet(tmp_path / "in" / "empty.parquet", index=False)  # no answers: fine
    paths = fit_stream(cl.DawidSkene(), folder, chunk_answers=3000, out=tmp_path / "out")
    res = pd.concat([pd.read_parquet(p) for p in paths])
    assert len(paths) > 1
    assert res["task"].is_unique and set(res["task"]) == set(df["task"])
    ref = cl.DawidSkene().fit(df)
    np.testing.assert_array_equal(res.set_index("task")["label"].reindex(ref.labels_.index), ref.labels_)
    csv = fit_stream(cl.DawidSkene(), folder, chunk_answers=3000, out=tmp_path / "all.csv")
    assert len(pd.read_csv(csv[0])) == df["task"].nunique()


def test_stream_bad_input_is_named(tmp_path):
    df = answers("bluebirds").astype({"label": float})
    df.loc[17, "label"] = np.nan
    df.to_parquet(tmp_path / "a.parquet", index=False)
    with pytest.raises(ValueError, match="missing value in column 'label'"):
        fit_stream(cl.DawidSkene(), tmp_path / "a.parquet")
    with pytest.raises(ValueError, match="missing column"):
        fit_stream(cl.DawidSkene(), tmp_path / "a.parquet", columns=Columns(task="item"))
    with pytest.raises(FileNotFoundError, match="no answer files"):
        fit_stream(cl.DawidSkene(), tmp_path / "nothing-*.parquet")


def test_stream_csv_errors_match_the_in_memory_reader(tmp_path):
    """CSV errors of the stream engine name file lines (a 0-based answer number before),
    missing columns as the reader does (pandas' 'Usecols do not match' before), an empty or
    header-only file by its name."""
    src = tmp_path / "a.csv"
    src.write_text("task,worker,label\n1,a,x\n1,b,y\n2,a,x\n2,b,\n")
    for chunk in (2, 100):  # the line counts across chunks
        with pytest.raises(ValueError, match=r"a\.csv: missing value in column 'label' at line 5$"):
            fit_stream(cl.DawidSkene(), src, chunk_answers=chunk)
    with pytest.raises(ValueError, match=r"missing column\(s\) \['item'\]; the file has columns \['task', 'worker', 'label'\]"):
        fit_stream(cl.DawidSkene(), src, columns=Columns(task="item"))
    src.write_text("task,worker,label\n")
    with pytest.raises(ValueError, match=r"a\.csv: no rows"):
        fit_stream(cl.DawidSkene(), src)
    src.write_text("")
    with pytest.raises(ValueError, match=r"a\.csv: the file is empty"):
        fit_stream(cl.DawidSkene(), src)



def test_stream_and_dask_name_a_file_that_is_not_utf8(tmp_path, client):
    """A cp1252 CSV failed in the stream engine with the codec's message alone ("'utf-8'
    codec can't decode byte 0xe9 in position 1"), the file unnamed; the in-memory reader
    decodes such files, which a read by chunks or partitions cannot: the error names the
    file and says what to do."""
    src = tmp_path / "a.csv"
    src.write_bytes("task,worker,label\n1,a,x\n1,b,y\n2,a,caf\u00e9\n".encode("cp1252"))
    assert cl.CrowdLabels.from_csv(src).classes.tolist() == ["café", "x", "y"]
    with pytest.raises(ValueError, match=r"a\.csv: not UTF-8 text \(byte 0xe9\); the stream engine reads UTF-8 only"):
        fit_stream(cl.DawidSkene(), src)
    with pytest.raises(ValueError, match=r"a\.csv: not UTF-8 text.*; the dask engine reads UTF-8 only"):
        fit_dask(cl.DawidSkene(), str(src), client=client)


def test_stream_and_dask_name_the_line_of_an_unclosed_quote(tmp_path, client):
    """A quote opening the label of line 100 and never closed: pandas' chunked reader said
    "Error tokenizing data. C error: EOF inside string starting at row 99", without the
    file, and counting rows of the chunk or partition, not the file's lines."""
    src = tmp_path / "a.csv"
    lines = ["task,worker,label"] + [f"t{i // 3},w{i % 7},{i % 2}" for i in range(4_000)]
    lines[99] = lines[99][:-1] + '"' + lines[99][-1]
    src.write_text("\n".join(lines) + "\n")
    expected = rf"^{re.escape(str(src))}: line 100: unterminated quote: "
    for chunk in (1_000, 100_000):  # the quote in the first chunk, or in a later one
        with pytest.raises(ValueError, match=expected):
            fit_stream(cl.MajorityVote(), src, chunk_answers=chunk)
    with pytest.raises(ValueError, match=expected):
        fit_dask(cl.MajorityVote(), str(src), client=client)
    lines[0], lines[99] = 'task,worker,"label', lines[99].replace('"', "")  # in the header
    src.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(src))}: line 1: unterminated quote: "):
        fit_stream(cl.MajorityVote(), src)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(src))}: line 1: unterminated quote: "):
        fit_dask(cl.MajorityVote(), str(src), client=client)


def test_stream_and_dask_say_a_file_is_utf16_without_a_byte_order_mark(tmp_path, client):
    """pandas reads such a file as UTF-8 (its NUL bytes are valid UTF-8): the engines said
    "missing column(s) ['task', 'worker', 'label']; the file has columns ['t\\x00a\\x00s\\x00k\\x00', ...]"."""
    src = tmp_path / "a.csv"
    src.write_bytes("task,worker,label\n1,a,x\n1,b,y\n2,a,x\n".encode("utf-16-le"))
    assert cl.CrowdLabels.from_csv(src).n_labels == 3
    expected = r"a\.csv: not UTF-8 text \(UTF-16 without a byte-order mark\); the {} engine reads UTF-8 only"
    with pytest.raises(ValueError, match=expected.format("stream")):
        fit_stream(cl.DawidSkene(), src)
    with pytest.raises(ValueError, match=expected.format("dask")):
        fit_dask(cl.DawidSkene(), str(src), client=client)


# ---------------------------------------------------------------------- dask
@pytest.mark.parametrize("name", SETS)
def test_dask_matches_the_in_memory_fit(name, client):
    df = answers(name)
    ddf = dd.from_pandas(df.sample(frac=1.0, random_state=1), npartitions=3)
    ref = cl.DawidSkene().fit(df)
    est = cl.DawidSkene()
    fit_dask(est, ddf, client=client, npartitions=4)
    assert_same_fit(est, ref)


def test_dask_every_method_from_parquet_files(client, tmp_path):
    df = answers("zencrowd_us")
    folder = write_files(df, tmp_path / "in")
    for method in METHODS:
        # ten rounds at most: each round is a pass over the files, and the same fit is the
        # point here (the in-memory fit gets the same cap)
        params = {"max_iter": 10} if "max_iter" in cl.get_method(method)().get_params() else {}
        ref = cl.get_method(method)(**params).fit(df)
        est = cl.get_method(method)(**params)
        fit_dask(est, dd.read_parquet(str(folder)), client=client)
        assert_same_fit(est, ref)
    paths = fit_dask(cl.DawidSkene(), str(folder / "*.parquet"), client=client, out=str(tmp_path / "out"))
    res = pd.concat([pd.read_parquet(p) for p in paths])
    assert res["task"].is_unique and set(res["task"]) == set(df["task"])


def test_dask_empty_partition_and_mixed_ids(client):
    df = answers("bluebirds")
    # ids of mixed types: some tasks and workers are numbers, others text
    df = df.astype({"task": object, "worker": object})
    df.loc[df["task"].astype(int) % 2 == 0, "task"] = "t" + df["task"].astype(str)
    df.loc[df.index % 3 == 0, "worker"] = df["worker"].astype(str) + "x"
    ref = cl.DawidSkene().fit(df)
    import dask

    # dask turns object columns into text by default; keep the ids' own types
    with dask.config.set({"dataframe.convert-string": False}):
        ddf = dd.concat([dd.from_pandas(df, npartitions=3), dd.from_pandas(df.iloc[:0], npartitions=1)])
        est = cl.DawidSkene()
        fit_dask(est, ddf, client=client, npartitions=5)
    assert_same_fit(est, ref)
    assert {type(t) for t in est.labels_.index} == {int, str}


def test_dask_bad_input_is_named(client):
    df = answers("bluebirds").astype({"label": float})
    df.loc[5, "label"] = np.nan
    with pytest.raises(ValueError, match="missing value in the label column|missing value in column 'label'"):
        fit_dask(cl.DawidSkene(), dd.from_pandas(df, npartitions=2), client=client)
    with pytest.raises(ValueError, match="missing column"):
        fit_dask(cl.DawidSkene(), dd.from_pandas(df, npartitions=2), client=client, columns=Columns(worker="who"))
    with pytest.raises(TypeError, match="crowdlearn.scale.fit_dask"):
        cl.DawidSkene().fit(dd.from_pandas(df, npartitions=2))


def test_dask_missing_value_in_a_file_names_file_and_line(client, tmp_path):
    """The dask engine finds a missing value among distinct values, not rows: from files it
    names the file and line as the stream and in-memory readers do (it named neither)."""
    good, bad = tmp_path / "a.csv", tmp_path / "b.csv"
    good.write_text("task,worker,label\n1,a,x\n1,b,y\n")
    bad.write_text("task,worker,label\n2,a,x\n2,b,\n")
    with pytest.raises(ValueError, match=r"b\.csv: missing value in column 'label' at line 3$"):
        fit_dask(cl.DawidSkene(), str(tmp_path / "*.csv"), client=client)


def test_dask_missing_column_of_a_csv_file_is_named(client, tmp_path):
    """dask's read_csv wrapped pandas' error: the CLI printed "An error occurred while calling
    the read_csv method registered to the pandas backend." and nothing about the columns."""
    src = tmp_path / "pairs.csv"
    src.write_text("worker,left,right,label\na,x,y,x\nb,x,y,y\n")
    with pytest.raises(ValueError, match=r"pairs\.csv: missing column\(s\) \['task'\]; the file has columns"):
        fit_dask(cl.DawidSkene(), str(src), client=client)


def test_coding_matches_from_frame():
    """Global codes are the in-memory codes: sorted ids, one class per number spelling."""
    labels = pd.Series(["1", "1.0", "2", "10", "x"])
    coding = Coding.from_values(["b", "a", "c"], labels)
    ref = cl.CrowdLabels.from_frame(pd.DataFrame({"task": range(5), "worker": ["a", "b", "c", "a", "b"],
                                                  "label": labels}))
    assert list(coding.workers) == ["a", "b", "c"]
    assert coding.classes.equals(ref.classes)
    np.testing.assert_array_equal(coding.label_codes, ref.label[np.argsort(ref.task)])


# --------------------------------------------------------------- robustness
@pytest.mark.parametrize("method", ["ds", "glad"])
def test_a_worker_killed_mid_fit_never_gives_a_partial_result(method):
    """Kill one worker process after the third iteration: the fit must either finish with
    the in-memory result (lost blocks recomputed from their lineage) or raise DaskFitError."""
    from crowdlearn.scale.dask_engine import DaskFitError

    df = answers("zencrowd_us")
    ref = cl.get_method(method)(tol=0, max_iter=8).fit(df)
    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    try:
        with distributed.Client(cluster) as client:
            pids = list(client.run(os.getpid).values())
            killed = threading.Event()

            def kill_one(record):
                if record.iteration == 3 and not killed.is_set():
                    os.kill(pids[0], signal.SIGKILL)
                    killed.set()

            est = cl.get_method(method)(tol=0, max_iter=8)
            try:
                fit_dask(est, dd.from_pandas(df, npartitions=4), client=client, callback=kill_one)
            except DaskFitError as exc:
                assert "round" in str(exc)
            else:
                assert_same_fit(est, ref)
            assert killed.is_set()
    finally:
        cluster.close()


# ----------------------------------------------------------------------- CLI
def test_cli_engines(tmp_path, capsys):
    from crowdlearn.cli import main

    df = answers("bluebirds")
    folder = write_files(df, tmp_path / "in")
    ref = cl.DawidSkene().fit(df)
    assert main(["aggregate", str(folder / "*.parquet"), "--engine", "stream", "--chunk-answers", "1000",
                 "--out", str(tmp_path / "stream")]) == 0
    res = pd.concat([pd.read_parquet(p) for p in sorted((tmp_path / "stream").glob("*.parquet"))])
    assert len(res) == df["task"].nunique()
    np.testing.assert_array_equal(res.set_index("task")["label"].reindex(ref.labels_.index), ref.labels_)
    assert main(["aggregate", str(folder), "--engine", "stream", "--method", "glad"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("task,label,confidence,p_0,p_1") and "glad (stream engine)" in out.err
    assert main(["aggregate", str(folder), "--engine", "stream", "--method", "bp"]) == 2
    assert "runs ccds, ds, glad" in capsys.readouterr().err


@pytest.mark.parametrize("engine", ["stream", "dask"])
@pytest.mark.parametrize("kind", ["continuous", "ordinal", "pairwise"])
def test_cli_engines_refuse_other_answer_kinds(tmp_path, capsys, engine, kind):
    """The engines fit class labels only: with --kind continuous the stream engine ran
    Dawid-Skene on the numbers, one class per distinct value, and said nothing."""
    from crowdlearn.cli import main

    src = tmp_path / "scores.csv"
    src.write_text("task,worker,label\nt1,a,1.5\nt1,b,2.5\nt2,a,3\n")
    assert main(["aggregate", str(src), "--kind", kind, "--engine", engine,
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"--engine {engine} fits class labels, not {kind} answers" in err
    assert not (tmp_path / "out").exists()


def test_cli_dask_engine_with_a_local_cluster(tmp_path, capsys):
    """`--engine dask --workers 2` starts (and closes) its own local cluster."""
    from crowdlearn.cli import main

    df = answers("bluebirds")
    folder = write_files(df, tmp_path / "in")
    assert main(["aggregate", str(folder), "--engine", "dask", "--workers", "2", "--out", str(tmp_path / "out")]) == 0
    res = pd.concat([pd.read_parquet(p) for p in sorted((tmp_path / "out").glob("*.parquet"))])
    ref = cl.DawidSkene().fit(df)
    np.testing.assert_array_equal(res.set_index("task")["label"].reindex(ref.labels_.index), ref.labels_)
    assert "ds (dask engine)" in capsys.readouterr().err
    assert main(["aggregate", str(folder), "--engine", "dask", "--out", str(tmp_path / "x.csv")]) == 2
    assert "writes a folder" in capsys.readouterr().err


def test_given_classes_fix_the_order_and_refuse_other_labels(tmp_path):
    df = answers("bluebirds")
    folder = write_files(df, tmp_path / "in")
    ref = cl.DawidSkene().fit(cl.CrowdLabels.from_frame(df, classes=[1, 0]))
    est = cl.DawidSkene()
    fit_stream(est, folder, classes=[1, 0], chunk_answers=2000)
    assert list(est.classes_) == [1, 0]
    assert_same_fit(est, ref)
    with pytest.raises(ValueError, match="label 1 is not one of the given classes"):
        fit_stream(cl.DawidSkene(), folder, classes=[0])
