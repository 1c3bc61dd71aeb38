"""The README's learning and MMLC examples, timed as a new user runs them: on this 2-core
machine with a second CPU-bound job running (issue 16, item 6).

Usage::

    python benchmarks/first_hour.py [--blocks mmlc learning] [--compare-threads]

Each README block (``python`` fence holding ``mmlc-owf`` or ``make_classifier``) runs as
written in a fresh interpreter, from the checkout's root (its ``../shared/data`` paths), while
``python -c "while True: pass"`` holds one core.  ``threads`` is how torch's thread count was
chosen: ``auto`` (crowdlearn's choice for the network and the free cores, the default) or a
forced count through ``CROWDLEARN_NUM_THREADS`` (2 = torch's own default on this machine, the
behaviour before the choice existed).  ``--compare-threads`` adds a forced-2 run of a single
MMLC fit (one of the MMLC block's three fits; the whole block at 2 threads took 13.5 minutes
in the issue's report).  Wall times depend on what else runs on the machine: the one-minute
load average before each run is recorded beside it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_md import markdown_table, write_section  # noqa: E402  (benchmarks/ is on sys.path)

#: a README python block is chosen by a string it contains
BLOCKS = {"mmlc": "mmlc-owf", "learning": "make_classifier("}

SINGLE_MMLC_FIT = """
import crowdlearn as cl
from crowdlearn.mmlc import MMLC
MMLC().fit(cl.io.load_folder("../shared/data/music", with_features=True))
"""


def readme_block(marker: str) -> str:
    """The README's python block containing ``marker``."""
    text = (ROOT / "README.md").read_text()
    found = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if marker in b]
    if not found:
        raise SystemExit(f"no README python block contains {marker!r}")
    return found[0]


def timed_run(code: str, threads: str) -> tuple[float, float]:
    """(wall seconds, one-minute load average before) of ``code`` in a fresh interpreter, with
    a busy-loop process holding one core for the whole run."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "CROWDLEARN_NUM_THREADS")}
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["MPLBACKEND"] = "Agg"  # plot_worker_space draws without a display
    if threads != "auto":
        env["CROWDLEARN_NUM_THREADS"] = threads
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(2.0)  # let the busy job be running (and counted) before the fit starts
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        return time.perf_counter() - t0, load
    finally:
        busy.kill()
        busy.wait()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", nargs="+", default=list(BLOCKS), choices=list(BLOCKS))
    ap.add_argument("--compare-threads", action="store_true")
    args = ap.parse_args(argv)
    rows = []
    for name in args.blocks:
        wall, load = timed_run(readme_block(BLOCKS[name]), "auto")
        rows.append({"run": f"README {name} block", "threads": "auto", "seconds": wall, "load before": load})
        print(rows[-1], flush=True)
    if args.compare_threads:
        for threads in ("auto", "2"):
            wall, load = timed_run(SINGLE_MMLC_FIT, threads)
            rows.append({"run": "one MMLC fit (music)", "threads": threads, "seconds": wall, "load before": load})
            print(rows[-1], flush=True)
    table = pd.DataFrame(rows).set_index("run")
    md = ("README examples with a second CPU-bound job on the 2-core machine (wall seconds, "
          "fresh interpreter, imports and data loading included; 'load before' is the "
          "one-minute load average, the busy job included).\n\n" + markdown_table(table, ".1f"))
    write_section("first-hour-readme-timing", md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
