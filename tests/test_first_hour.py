"""The first hour of a new user (issue 16, item 6): output checked before the work, numba's
absence said once, truth files read by pandas scored by value, and torch thread counts."""

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crowdlearn as cl
from crowdlearn.cli import main
from crowdlearn.diagnostics import metrics

SRC = str(Path(cl.__file__).resolve().parents[1])


def _crowd_with_numeric_ids(tmp_path):
    """A crowd whose task ids and classes are numbers, written to CSV (read back as text by
    the library) with a truth file that ``pd.read_csv`` reads as integers."""
    data = cl.simulate.dawid_skene(n_tasks=300, n_workers=15, n_classes=3, labels_per_task=5, seed=3)
    frame = data.to_frame()
    codes = {c: i for i, c in enumerate(data.classes)}
    frame["task"] = frame["task"].map({t: 1000 + i for i, t in enumerate(data.tasks)})
    frame["label"] = frame["label"].map(codes)
    frame.to_csv(tmp_path / "answers.csv", index=False)
    truth = data.truth_series()
    pd.DataFrame({"task": [1000 + data.tasks.get_loc(t) for t in truth.index],
                  "truth": truth.map(codes).to_numpy()}).to_csv(tmp_path / "truth.csv", index=False)
    return tmp_path / "answers.csv", tmp_path / "truth.csv"


def test_accuracy_against_a_pandas_truth_file_compares_by_value(tmp_path):
    answers, truth_file = _crowd_with_numeric_ids(tmp_path)
    labels = cl.CrowdLabels.from_csv(answers)              # ids and classes as text
    ds = cl.DawidSkene().fit(labels)
    truth = pd.read_csv(truth_file, index_col="task")["truth"]   # ints
    assert pd.api.types.is_string_dtype(ds.labels_.index) and truth.index.dtype.kind == "i"
    # what the user saw: plain == between the two gives nothing right
    naive = (ds.labels_.to_numpy()[: len(truth)] == truth.to_numpy()).mean()
    assert naive == 0.0
    text_truth = pd.read_csv(truth_file, dtype=str, index_col="task")["truth"]
    expected = metrics.accuracy(ds.labels_, text_truth)    # same types: exact comparison
    assert expected > 0.8
    assert metrics.accuracy(ds.labels_, truth) == pytest.approx(expected)
    assert metrics.log_loss(ds.probas_, truth) == pytest.approx(metrics.log_loss(ds.probas_, text_truth))
    assert metrics.expected_calibration_error(ds.probas_, truth) == pytest.approx(
        metrics.expected_calibration_error(ds.probas_, text_truth))
    pd.testing.assert_frame_equal(metrics.worker_accuracy(labels, truth),
                                  metrics.worker_accuracy(labels, text_truth))


def test_value_comparison_keeps_exact_matching_within_one_type():
    pred = pd.Series(["1", "2"], index=["007", "8"])
    # text ids on both sides: "007" is not "7", so only task "8" is scored
    assert metrics.accuracy(pred, pd.Series(["2", "2"], index=["7", "8"])) == 1.0
    # numbers against text: 1.0 and "1" are one value
    assert metrics.accuracy(pd.Series(["1", "2"], index=["a", "b"]), pd.Series([1.0, 3.0], index=["a", "b"])) == 0.5
    with pytest.raises(ValueError, match="same number"):   # truth "7" and "07" against task 7
        metrics.accuracy(pd.Series(["1"], index=[7]), pd.Series(["1", "2"], index=["7", "07"]))


def test_bad_output_is_reported_before_reading(tmp_path, capsys, monkeypatch):
    missing = str(tmp_path / "no_such_answers.csv")  # reading it would fail: the check comes first
    assert main(["aggregate", missing, "--out", str(tmp_path / "r.xlsx")]) == 2
    assert "r.xlsx: unknown file type" in capsys.readouterr().err
    assert main(["aggregate", missing, "--out", str(tmp_path / "nodir" / "r.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "pyarrow", None)   # import pyarrow -> ImportError
    assert main(["aggregate", missing, "--out", str(tmp_path / "r.parquet")]) == 2
    err = capsys.readouterr().err
    assert "writing Parquet needs pyarrow" in err and "no such file" not in err


def test_missing_numba_is_said_once():
    code = textwrap.dedent("""
        import sys, warnings
        sys.modules["numba"] = None
        from crowdlearn.core import kernels
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            a = kernels.resolve_backend("auto", 10**6)
            b = kernels.resolve_backend("auto", 10**6)
        print(a, b, sum("numba is not importable" in str(w.message) for w in seen))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"}, check=True).stdout
    assert out.split() == ["numpy", "numpy", "1"]


def test_thread_choice_follows_model_size_and_free_cores(monkeypatch):
    pytest.importorskip("torch")
    from crowdlearn.learning import torch_utils as tu

    assert tu.choose_threads(20_000, 64, cores=2) == 1            # a crowd-data MLP: one thread
    assert tu.choose_threads(10**7, 256, cores=2) == 2            # a large network: the free cores
    assert tu.choose_threads(10**7, 256, cores=1) == 1            # ... but never more than free
    assert 1 <= tu.free_cores() <= (len(tu.os.sched_getaffinity(0)) if hasattr(tu.os, "sched_getaffinity") else 64)
    before = tu.torch.get_num_threads()
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "CROWDLEARN_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(tu, "_IMPORT_THREADS", before)
    monkeypatch.setattr(tu, "free_cores", lambda: 2)
    with tu.fit_threads(10**7, 256) as n:                          # nobody chose: ours
        assert n == 2 and tu.torch.get_num_threads() == 2
    assert tu.torch.get_num_threads() == before                   # and given back
    monkeypatch.setenv("CROWDLEARN_NUM_THREADS", "3")
    with tu.fit_threads(100, 1) as n:                              # the user's choice stands
        assert n == 3 and tu.torch.get_num_threads() == 3
    assert tu.torch.get_num_threads() == before


def test_learner_records_its_thread_count():
    pytest.importorskip("torch")
    from crowdlearn.learning import make_classifier

    data = cl.simulate.dawid_skene(n_tasks=60, n_workers=5, n_classes=2, labels_per_task=3, seed=0)
    X = np.random.default_rng(0).normal(size=(60, 4))
    clf = make_classifier("two-stage", epochs=2).fit(X, data)
    assert clf.n_threads_ >= 1
