"""Every ```python and ```bash snippet of README.md runs as written (issue 16, item 6).

Each snippet runs on its own in a fresh process, from a scratch checkout folder that has
``../shared`` beside it (the README's relative paths), with this checkout's ``src`` first on
the path and a ``crowdlearn`` command that runs it.  An HTML comment on the line before a
fence marks it: ``<!-- snippet: skip (why) -->`` (not run here, say why) or
``<!-- snippet: slow -->`` (run with ``-m slow``: training networks).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"(?:<!-- snippet: (?P<mark>[^>]*?) -->\n)?```(?P<lang>python|bash)\n(?P<code>.*?)```", re.S)


def snippets():
    text = README.read_text()
    out = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start("lang")) + 1
        mark = (m.group("mark") or "").strip()
        marks = []
        if mark.startswith("skip"):
            marks.append(pytest.mark.skip(reason=f"README line {line}: {mark}"))
        elif mark == "slow":
            marks.append(pytest.mark.slow)
        elif mark:
            raise ValueError(f"README line {line}: unknown snippet mark {mark!r}")
        out.append(pytest.param(m.group("lang"), m.group("code"), id=f"{m.group('lang')}-line{line}",
                                marks=marks))
    return out


def test_readme_has_runnable_snippets():
    params = snippets()
    run = [p for p in params if not any(m.name == "skip" for m in p.marks)]
    assert len(params) >= 8 and len(run) >= len(params) - 1


@pytest.fixture
def checkout(tmp_path):
    """A scratch working folder with ``../shared`` beside it, and a ``crowdlearn`` command."""
    work = tmp_path / "checkout"
    work.mkdir()
    if SHARED_DATA.is_dir():
        (tmp_path / "shared").mkdir()
        (tmp_path / "shared" / "data").symlink_to(SHARED_DATA.resolve())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cmd = bin_dir / "crowdlearn"
    cmd.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m crowdlearn.cli "$@"\n')
    cmd.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("CI",)}
    env.update(PYTHONPATH=str(ROOT / "src"), MPLBACKEND="Agg",
               PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
    return work, env


@pytest.mark.parametrize("lang,code", snippets())
def test_snippet_runs(lang, code, checkout):
    work, env = checkout
    if "../shared" in code and not SHARED_DATA.is_dir():
        pytest.skip(f"shared data missing: {SHARED_DATA}")
    argv = [sys.executable, "-c", code] if lang == "python" else ["bash", "-e", "-o", "pipefail", "-c", code]
    res = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, f"{lang} snippet failed:\n{code}\n--- stderr:\n{res.stderr[-3000:]}"


def test_main_install_declares_the_fast_paths():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=!~ \[]", d)[0].lower() for d in meta["dependencies"]}
    assert {"numba", "pyarrow", "numpy", "scipy", "pandas", "scikit-learn"} <= names
    extras = meta["optional-dependencies"]
    assert "fast" in extras and "parquet" in extras  # old install commands still work


@pytest.mark.slow
def test_first_command_installs_a_working_package(tmp_path):
    """The README's first command in a new virtual environment, then ``crowdlearn demo``.

    The build tools come from the package index; the dependencies from this environment's
    site-packages (``--system-site-packages``), so the test does not download the scientific
    stack.  What it checks: the package builds from the committed tree, ships its bundled data
    and runs from the installed copy.
    """
    src = tmp_path / "src_copy"
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "HEAD"], capture_output=True,
                             check=True).stdout
    src.mkdir()
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CI")}
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "."],
                   cwd=src, env=env, check=True, timeout=600)
    res = subprocess.run([str(venv / "bin" / "crowdlearn"), "demo", "--methods", "mv,ds"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "zencrowd_us" in res.stdout and len(res.stdout.splitlines()) == 4
    where = subprocess.run([str(py), "-c", "import crowdlearn; print(crowdlearn.__file__)"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, check=True).stdout
    assert str(venv) in where  # the installed copy ran, not a checkout
