"""Write one marked section of ``benchmarks/RESULTS.md`` from the script that measures it.

Every table in RESULTS.md sits between two markers::

    <!-- section: NAME -->
    ... generated text ...
    <!-- end: NAME -->

:func:`write_section` replaces what lies between the markers of ``NAME`` (or appends a new
marked section at the end of the file) with the given markdown followed by a provenance line:
UTC date, machine (CPU model, usable cores), Python and package versions, and the command
that regenerates the section.  A benchmark script therefore owns its section, and running it
with ``--write-results`` is the one way the section changes.

Command line (to see which sections exist and what regenerates them)::

    python benchmarks/results_md.py            # list sections with their commands
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import io
import os
import platform
import re
import shlex
import sys
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"

_PACKAGES = ("crowdlearn", "numpy", "scipy", "pandas", "numba", "torch")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(name: str) -> str | None:
    mod = sys.modules.get(name)
    if mod is None:
        return None
    return getattr(mod, "__version__", None)


def provenance(command: str | None = None) -> str:
    """One line: date, machine, Python and the versions of already imported packages.

    Only packages the measuring script has imported are listed (importing torch just to
    print its version would cost seconds and say nothing about the measurement).
    """
    if command is None:
        command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
        command = command.replace(str(Path(__file__).resolve().parent.parent) + "/", "")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = os.environ.get("OMP_NUM_THREADS")
    versions = [f"{n} {v}" for n in _PACKAGES if (v := _version(n))]
    parts = [
        _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        f"{_cpu_model()}, {cores} cores" + (f", OMP_NUM_THREADS={threads}" if threads else ""),
        f"Python {platform.python_version()}",
        ", ".join(versions),
    ]
    return f"_Generated {'; '.join(p for p in parts if p)}. Command: `{command}`._"


def _markers(name: str) -> tuple[str, str]:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"section name {name!r}: use letters, digits, '.', '_' or '-'")
    return f"<!-- section: {name} -->", f"<!-- end: {name} -->"


def replace_section(text: str, name: str, body: str) -> str:
    """``text`` with the marked section ``name`` replaced by ``body`` (appended if absent)."""
    start, end = _markers(name)
    block = f"{start}\n{body.strip()}\n{end}"
    i = text.find(start)
    if i < 0:
        return text.rstrip("\n") + "\n\n" + block + "\n"
    j = text.find(end, i)
    if j < 0:
        raise ValueError(f"RESULTS.md: section {name!r} has no end marker {end!r}")
    return text[:i] + block + text[j + len(end):]


def write_section(name: str, markdown: str, command: str | None = None,
                  path: Path | str | None = None) -> Path:
    """Replace section ``name`` of ``path`` (default RESULTS.md) with ``markdown`` plus a
    provenance line."""
    path = Path(path or RESULTS)
    body = markdown.strip() + "\n\n" + provenance(command)
    # two benchmarks finishing together must not lose each other's section
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        text = path.read_text() if path.exists() else "# Benchmark results\n"
        path.write_text(replace_section(text, name, body))
    return path


def sections(path: Path | str | None = None) -> list[tuple[str, str]]:
    """(name, regenerating command) of every marked section, in file order."""
    text = Path(path or RESULTS).read_text()
    out = []
    for m in re.finditer(r"<!-- section: ([A-Za-z0-9_.-]+) -->(.*?)<!-- end: \1 -->", text, re.S):
        cmd = re.findall(r"Command: `([^`]*)`", m.group(2))
        out.append((m.group(1), cmd[-1] if cmd else "?"))
    return out


def markdown_table(df, floatfmt: str = ".4f", index: bool = True) -> str:
    """``df`` as a GitHub markdown table (pandas' ``to_markdown`` needs ``tabulate``)."""

    def cell(v) -> str:
        if isinstance(v, (float, np.floating)):
            return "" if np.isnan(v) else format(v, floatfmt)
        return str(v)

    cols = ([str(df.index.name or "")] if index else []) + [str(c) for c in df.columns]
    rows = []
    for idx, r in zip(df.index, df.itertuples(index=False)):
        rows.append(([cell(idx)] if index else []) + [cell(v) for v in r])
    numeric = [False] * len(cols)
    for j in range(len(cols)):
        vals = [row[j] for row in rows if row[j]]
        numeric[j] = bool(vals) and all(_is_number(v) for v in vals)
    sep = ["---:" if n else ":---" for n in numeric]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join(sep) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


class _Tee(io.TextIOBase):
    def __init__(self, *streams) -> None:
        self.streams = streams

    def write(self, s: str) -> int:
        for st in self.streams:
            st.write(s)
        return len(s)

    def flush(self) -> None:
        for st in self.streams:
            st.flush()


@contextlib.contextmanager
def recording(section: str, enabled: bool = True, command: str | None = None):
    """Everything printed to stdout inside the block also becomes section ``section``.

    The section is written only when the block ends without an exception and ``enabled``
    is true (a benchmark's ``--write-results`` flag), so a failed or partial run never
    replaces a recorded table.
    """
    buf = io.StringIO()
    old = sys.stdout
    sys.stdout = _Tee(old, buf)
    try:
        yield buf
    finally:
        sys.stdout = old
    if enabled:
        write_section(section, buf.getvalue(), command)
        print(f"(wrote section {section!r} of RESULTS.md)", file=sys.stderr)


if __name__ == "__main__":
    for name, cmd in sections():
        print(f"{name:28s} {cmd}")
