"""Progress of long fits (issue 16, item 3): a bar on a terminal, none in a pipe, and a
callback per iteration that does not change the numbers."""

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import numpy as np
import pytest

import crowdlearn as cl
from crowdlearn.core import progress

SRC = str(Path(cl.__file__).resolve().parents[1])


@pytest.fixture(scope="module")
def crowd_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("progress") / "answers.csv"
    data = cl.simulate.dawid_skene(n_tasks=400, n_workers=20, n_classes=3, labels_per_task=5, seed=1)
    data.to_frame().to_csv(path, index=False)
    return path


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(PYTHONPATH=SRC, **extra)
    return env


def _run_on_tty(args, env):
    """Run the CLI with stderr on a pseudo-terminal; (exit code, everything written to it)."""
    master, slave = pty.openpty()
    # a terminal 100 columns wide (a fresh pty reports 0 x 0, too narrow for any bar)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "crowdlearn.cli", *args], stdout=subprocess.DEVNULL,
                            stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return proc.wait(timeout=120), b"".join(chunks).decode("utf-8", "replace")


def _has_bar(text: str) -> bool:
    return "DawidSkene" in text and "%|" in text


def test_terminal_shows_a_bar_and_a_pipe_none(crowd_csv, tmp_path):
    args = ["aggregate", str(crowd_csv), "--method", "ds", "--out", str(tmp_path / "r.csv"),
            "--param", "tol=0"]  # tol=0: all max_iter iterations, so there is a bar to draw
    code, tty_err = _run_on_tty([*args, "--progress"], _env())
    assert code == 0, tty_err
    assert _has_bar(tty_err), tty_err
    assert "crowdlearn: reading" in tty_err and "crowdlearn: fitting ds" in tty_err
    piped = subprocess.run([sys.executable, "-m", "crowdlearn.cli", *args], capture_output=True,
                           text=True, env=_env(), timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert not _has_bar(piped.stderr) and "\r" not in piped.stderr and "crowdlearn: reading" not in piped.stderr
    assert piped.stderr.startswith("ds: 2000 answers")  # the summary line only
    # CI: no bar even when asked for
    code, ci_err = _run_on_tty([*args, "--progress"], _env(CI="true"))
    assert code == 0 and not _has_bar(ci_err)
    # --no-progress on a terminal: nothing but the summary
    code, off_err = _run_on_tty([*args, "--no-progress"], _env())
    assert code == 0 and not _has_bar(off_err) and "crowdlearn: reading" not in off_err


def test_callback_once_per_iteration_without_changing_the_fit():
    data = cl.simulate.dawid_skene(n_tasks=500, n_workers=20, n_classes=3, labels_per_task=4, seed=2)
    plain = cl.DawidSkene().fit(data)
    seen = []
    watched = cl.DawidSkene().fit(data, callback=seen.append)
    assert len(seen) == watched.n_iter_ > 1
    its = [r.iteration for r in seen]
    assert its == sorted(its) and its[0] == 1 and its[-1] == watched.n_iter_
    assert np.all(np.diff([r.elapsed for r in seen]) >= 0)
    assert [r.objective for r in seen] == pytest.approx(watched.history_)
    assert seen[0].total == watched.max_iter and seen[0].name == "DawidSkene"
    np.testing.assert_array_equal(plain.probas_.to_numpy(), watched.probas_.to_numpy())
    # the same through settings(), for fits made inside other code (spammer-filtered -> ds)
    inner = []
    with progress.settings(callback=inner.append):
        cl.SpammerFiltered(base="ds").fit(data)
    assert inner and all(r.name == "DawidSkene" for r in inner)


@pytest.mark.parametrize("name", ["glad", "bds", "mace", "spectral-ds", "kos", "minimax"])
def test_other_iterative_aggregators_report_iterations(name):
    data = cl.simulate.dawid_skene(n_tasks=200, n_workers=12, n_classes=2, labels_per_task=4, seed=3)
    seen = []
    with progress.settings(callback=seen.append):
        est = cl.get_method(name)().fit(data)
    assert len(seen) >= max(1, est.n_iter_ if name != "mace" else 1)
    its = [r.iteration for r in seen]
    assert its == list(range(1, len(its) + 1))


def test_learner_and_mmlc_report_epochs():
    pytest.importorskip("torch")
    from crowdlearn.learning import make_classifier
    from crowdlearn.mmlc import MMLC

    data = cl.simulate.dawid_skene(n_tasks=120, n_workers=8, n_classes=2, labels_per_task=3, seed=4)
    X = np.random.default_rng(0).normal(size=(120, 4))
    seen = []
    with progress.settings(callback=seen.append):
        clf = make_classifier("maxmig", epochs=3).fit(X, data)
    mine = [r for r in seen if r.name == type(clf).__name__]
    assert [r.iteration for r in mine] == list(range(1, len(clf.history_) + 1))
    seen.clear()
    with progress.settings(callback=seen.append):
        m = MMLC(epochs=4).fit(X, data)
    assert [r.iteration for r in seen] == [1, 2, 3, 4] and seen[0].total == 4 == m.n_epochs_


def test_no_tqdm_no_bar_same_callback(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    seen = []
    rep = progress.start(3, "x", verbose=True, callback=seen.append)
    for _ in range(3):
        rep.step(1.0)
    rep.close()
    assert [r.iteration for r in seen] == [1, 2, 3]
