"""Fit time of crowdlearn vs crowd-kit 1.4.2 on the same synthetic data, in one run.

Data: ``synthetic.make_ds_codes`` (K=5, 5 answers per task, workers 75-95% accurate,
``n_labels // 100`` workers).  Both libraries fit the same arrays with the same iteration
count (crowdlearn ``max_iter=N, tol=0``; crowd-kit ``n_iter=N, tol=-inf`` so it cannot stop
early).  crowd-kit runs in its own venv (``bash benchmarks/setup_crowdkit.sh``) through
``crowdkit_bridge``.  Times are process CPU seconds of the fit alone (the machine may be
shared; CPU time is the fairer clock), crowdlearn timed after one warm-up fit so numba's
one-off compilation is not counted.  Peak memory is the resident high-water mark of a fresh
process per case.

Usage::

    python benchmarks/speed.py                    # 1e5 and 1e6 cases with crowd-kit
    python benchmarks/speed.py --big              # adds 1e7 labels (crowdlearn only by default)
    python benchmarks/speed.py --cases ds:1e6 glad:1e5
    python benchmarks/speed.py --all 1e6 --no-crowdkit   # every registered method at 1e6 labels
    python benchmarks/speed.py --cases ds:1e7 --no-crowdkit --n-jobs 2   # two threads

Methods without a crowd-kit counterpart run on the crowdlearn side only, with their defaults.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from crowdkit_bridge import available as crowdkit_available  # noqa: E402
from crowdkit_bridge import crowdkit_speed  # noqa: E402
from synthetic import make_ds_codes, save_npz  # noqa: E402
from results_md import markdown_table, recording  # noqa: E402

# crowdlearn name -> (crowd-kit class, iterations forced on both sides or None for each
# library's own defaults, crowd-kit's default n_iter passed when None)
METHODS = {
    "ds": ("DawidSkene", 20, None),
    "onecoin": ("OneCoinDawidSkene", 20, None),
    "glad": ("GLAD", 5, None),
    "mace": ("MACE", None, 50),
    "mmsr": ("MMSR", None, 10000),
    "mv": ("MajorityVote", None, 1),
    "wawa": ("Wawa", None, 1),
    "zbs": ("ZeroBasedSkill", None, 100),
}

_CHILD = r"""
import json, resource, sys, time
import numpy as np
sys.path.insert(0, {here!r})
import crowdlearn as cl
d = np.load({npz!r})
data = cl.CrowdLabels.from_codes(d["task"], d["worker"], d["label"], n_classes=5)
est = cl.get_method({method!r})()
params = est.get_params()
if {iters!r} is not None:
    key = "max_iter" if "max_iter" in params else "n_iter"
    est.set_params(**{{key: {iters!r}}})
    if "tol" in params:
        est.set_params(tol=0)
if {n_jobs!r} is not None and "n_jobs" in params:
    est.set_params(n_jobs={n_jobs!r})
if {warmup!r}:
    est.fit(data)               # warm-up: numba compilation / caches
t0 = time.process_time(); w0 = time.perf_counter()
est.fit(data)
cpu = time.process_time() - t0; wall = time.perf_counter() - w0
acc = float(np.mean(est.label_codes_ == d["truth"]))
print(json.dumps({{"cpu_time": cpu, "time": wall, "n_iter": est.n_iter_, "accuracy": acc,
                  "fallback": getattr(est, "fallback_", None),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def crowdlearn_fit(npz: Path, method: str, iters: int | None, warmup: bool = True,
                   timeout: float | None = None, n_jobs: int | None = None) -> dict:
    code = _CHILD.format(here=str(HERE), npz=str(npz), method=method, iters=iters, warmup=warmup,
                         n_jobs=n_jobs)
    env = {"OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    import os

    try:
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True,
            env={**os.environ, **env}, timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def parse_case(text: str) -> tuple[str, int]:
    method, _, size = text.partition(":")
    return method, int(float(size))


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--cases", nargs="+", default=["ds:1e5", "ds:1e6", "glad:1e5", "mmsr:1e5", "mmsr:1e6", "mace:1e5", "zbs:1e6", "mv:1e6"])
    p.add_argument("--big", action="store_true", help="add ds:1e7 (crowdlearn only)")
    p.add_argument("--crowdkit-max-labels", type=float, default=1e6,
                   help="skip crowd-kit above this size (its DS takes ~6.6 s per iteration at 1e7)")
    p.add_argument("--mem-gb", type=float, default=10.0)
    p.add_argument("--all", type=float, default=None, metavar="SIZE",
                   help="time every registered method at SIZE labels (replaces --cases)")
    p.add_argument("--workers", type=int, default=None,
                   help="workers in the synthetic crowd (default n_labels / 100: 10^4 at 1e6, "
                        "too sparse for the moment methods, which then fall back to MV)")
    p.add_argument("--no-crowdkit", action="store_true")
    p.add_argument("--n-jobs", type=int, default=None,
                   help="threads for methods with an n_jobs parameter (default: one)")
    p.add_argument("--no-warmup", action="store_true", help="time the first fit (includes JIT)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per crowdlearn fit")
    p.add_argument("--write-results", nargs="?", const="speed", metavar="SECTION",
                    help="also write the output to this RESULTS.md section (default speed)")
    args = p.parse_args(argv)
    if args.all:
        from crowdlearn.registry import method_kinds

        cases = [(name, int(args.all)) for name, kind in method_kinds().items() if kind == "classification"]
    else:
        cases = [parse_case(c) for c in args.cases]
    cases += [("ds", 10**7)] if args.big else []
    ck = crowdkit_available() and not args.no_crowdkit
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for method, n in cases:
            ck_name, iters, ck_default = METHODS.get(method, (None, None, None))
            npz = Path(tmp) / f"syn_{n}.npz"
            if not npz.exists():
                task, worker, label, truth = make_ds_codes(n, n_classes=5, n_workers=args.workers, seed=0)
                save_npz(npz, task, worker, label, truth)
            ours = crowdlearn_fit(npz, method, iters, not args.no_warmup, args.timeout, args.n_jobs)
            theirs = {}
            if ck and ck_name and n <= args.crowdkit_max_labels:
                theirs = crowdkit_speed(
                    str(npz), ck_name, max_iter=iters or ck_default, tol="-inf" if iters else "none",
                    mem_gb=args.mem_gb,
                )
            row = {
                "method": method,
                "labels": f"{n:.0e}",
                "iterations": ours.get("n_iter"),
                "crowdlearn s": ours.get("cpu_time"),
                "crowdlearn s/iter": (ours["cpu_time"] / ours["n_iter"]) if ours.get("n_iter") else None,
                "crowdlearn wall s": ours.get("time"),
                "crowdlearn MB": ours.get("peak_rss_mb"),
                "crowdlearn acc": ours.get("accuracy"),
                "crowdlearn error": (ours.get("error") or "")[:60] or None,
                "fallback": (ours.get("fallback") or "")[:60] or None,
                "crowd-kit s": theirs.get("cpu_time"),
                "crowd-kit iterations": theirs.get("n_iter"),
                "crowd-kit MB": theirs.get("peak_rss_mb"),
                "crowd-kit error": (theirs.get("error") or "")[:60] or None,
                "speed-up": (theirs["cpu_time"] / ours["cpu_time"])
                if theirs.get("cpu_time") and ours.get("cpu_time") and not theirs.get("error") else None,
            }
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    import pandas as pd

    with recording(args.write_results or "", enabled=bool(args.write_results)):
        print(markdown_table(pd.DataFrame(rows), ".3f", index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
