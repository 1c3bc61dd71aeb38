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
    python benchmarks/speed.py --preset issue3 --write-results   # RESULTS section speed-issue3

Methods without a crowd-kit counterpart run on the crowdlearn side only, with their defaults.
The warm-up fit runs on a separate copy of the data, so the timed fit does not reuse what a
``CrowdLabels`` caches on first use (worker order, incidence matrix).

``--preset issue3`` times the methods of issue 3 at 10^6 labels for 10^4 workers (the default
crowd) and 500 workers, crowdlearn only, and prints one table, method x worker count.  A cell
gives CPU seconds, rounds and peak memory, with notes read from the fitted estimator (a moment
method's ``fallback_``, also inside a wrapper or a stacked member; warnings raised by the fit).
A fit (warm-up included) that exceeds the preset's timeout (``--timeout`` overrides it) is
re-measured at the preset's smaller size (10^5 labels, same worker count), and the cell says so.
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
import json, resource, sys, time, warnings
import numpy as np
sys.path.insert(0, {here!r})
import crowdlearn as cl
from crowdlearn.registry import methods
d = np.load({npz!r})
def load():
    return cl.CrowdLabels.from_codes(d["task"], d["worker"], d["label"], n_classes=5)
data = load()
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
    est.fit(load())             # warm-up on a copy: numba compilation, not the data's caches
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    t0 = time.process_time(); w0 = time.perf_counter()
    est.fit(data)
    cpu = time.process_time() - t0; wall = time.perf_counter() - w0
acc = float(np.mean(est.label_codes_ == d["truth"]))
names = {{}}
for name, cls in methods().items():
    names.setdefault(cls, name)
notes = []
def walk(e, where):
    # why a moment method fell back to majority vote, also inside wrappers and stacks
    fb = getattr(e, "fallback_", None)
    if fb:
        notes.append(f"{{where}}falls back to MV ({{fb}})")
    for attr in ("base_", "best_"):
        sub = getattr(e, attr, None)
        if sub is not None and not any(sub is m for _, m in getattr(e, "members_", ())):
            walk(sub, f"{{names.get(type(sub), type(sub).__name__)}}: ")
    for _, m in getattr(e, "members_", ()):
        walk(m, f"{{names.get(type(m), type(m).__name__)}}: ")
walk(est, "")
weights = getattr(est, "weights_", None)
if weights is not None:
    used = weights[weights > 0].sort_values(ascending=False)
    notes.append(f"stacks {{len(used)}} candidates, largest weight {{used.index[0]}} {{used.iloc[0]:.2f}}")
for w in caught:
    text = f"warns: {{str(w.message).splitlines()[0]}}"
    if text not in notes:
        notes.append(text)
base = est.get_params().get("base")
print(json.dumps({{"cpu_time": cpu, "time": wall, "n_iter": est.n_iter_, "accuracy": acc,
                  "fallback": getattr(est, "fallback_", None), "notes": notes,
                  "base": base if isinstance(base, str) else None,
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
        return {"error": f"timed out after {timeout:.0f} s", "timed_out": True}
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def parse_case(text: str) -> tuple[str, int]:
    method, _, size = text.partition(":")
    return method, int(float(size))


#: named sets of cases that own a RESULTS.md section: methods, labels, worker counts (None:
#: the default crowd, labels / 100 workers), the section, the size a timed-out fit is
#: re-measured at, and the per-fit timeout (seconds, warm-up included)
PRESETS = {
    "issue3": {
        "methods": ["ds", "spectral-ds", "multispa-kl", "cnmf", "tensor-admm", "eigenratio",
                    "spammer-filtered", "auto", "group-ds", "minimax"],
        "labels": 10**6,
        "workers": [None, 500],
        "section": "speed-issue3",
        "fallback_size": 10**5,
        "timeout": 900.0,
    },
}


def _pow10(n: int) -> str:
    """10^6 for powers of ten, else the number with thousands separators."""
    e = len(str(n)) - 1
    return f"10^{e}" if n == 10**e and e >= 3 else f"{n:,}"


def _seconds(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:.0f}"


def _cell(r: dict, n: int, size: int) -> str:
    """One measurement as a table cell: CPU s (rounds, peak GB[, at size]); notes."""
    if r.get("error"):
        return f"error: {r['error'][:80]}"
    stacked = any(t.startswith("stacks ") for t in r.get("notes") or [])
    # n_iter_ of a stack is its largest member's; 0 rounds = no iterative step (e.g. MV)
    extra = [f"{r['n_iter']} rounds"] if r.get("n_iter") and not stacked else []
    extra.append(f"{r['peak_rss_mb'] / 1024:.1f} GB")
    if n != size:
        extra.append(f"at {_pow10(n)} labels")
    text = f"{_seconds(r['cpu_time'])} ({', '.join(extra)})"
    notes = [t.replace("|", "/") for t in r.get("notes") or []]
    return text + ("; " + "; ".join(notes) if notes else "")


def run_preset(name: str, args) -> str:
    """Time a preset's methods for each worker count; return the markdown of its section."""
    try:  # the children's compiled passes: numba's version then goes in the section's footer
        import numba  # noqa: F401
    except ImportError:
        pass
    preset = PRESETS[name]
    size, fallback = preset["labels"], preset["fallback_size"]
    timeout = args.timeout if args.timeout_given else preset["timeout"]
    cells: dict[tuple[str, int | None], str] = {}
    labels: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        def npz_for(n: int, workers: int | None) -> Path:
            path = Path(tmp) / f"syn_{n}_{workers}.npz"
            if not path.exists():
                save_npz(path, *make_ds_codes(n, n_classes=5, n_workers=workers, seed=0))
            return path

        for workers in preset["workers"]:
            for method in preset["methods"]:
                iters = METHODS.get(method, (None, None, None))[1]
                r = crowdlearn_fit(npz_for(size, workers), method, iters, not args.no_warmup,
                                   timeout, args.n_jobs)
                print(json.dumps({"method": method, "labels": size, "workers": workers, **r}),
                      file=sys.stderr, flush=True)
                cell = _cell(r, size, size)
                if r.get("timed_out") and fallback:
                    small = crowdlearn_fit(npz_for(fallback, workers),
                                           method, iters, not args.no_warmup, timeout, args.n_jobs)
                    print(json.dumps({"method": method, "labels": fallback, "workers": workers, **small}),
                          file=sys.stderr, flush=True)
                    cell = f"not measured at {_pow10(size)} ({r['error']}); {_cell(small, fallback, size)}"
                cells[method, workers] = cell
                label = method + (f" ({iters} rounds)" if iters else "")
                labels[method] = label + (f" (base {r['base']})" if r.get("base") else "")
    cols = [f"{_pow10(w)} workers" if w else f"{_pow10(size // 100)} workers (default: labels / 100)"
            for w in preset["workers"]]
    lines = [
        f"{_pow10(size)} labels (K=5, {size // 5:,} tasks, 5 answers per task, workers 75-95% accurate): "
        "CPU seconds of one fit, one thread, timed after a warm-up fit on a copy of the data; "
        "rounds (`n_iter_`), peak resident memory of the process; notes read from the fitted "
        "estimator (`fallback_`, stacking weights, warnings).",
        "",
        "| method | " + " | ".join(cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for method in preset["methods"]:
        lines.append(f"| {labels[method]} | " + " | ".join(cells[method, w] for w in preset["workers"]) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--cases", nargs="+", default=["ds:1e5", "ds:1e6", "glad:1e5", "mmsr:1e5", "mmsr:1e6", "mace:1e5", "zbs:1e6", "mv:1e6"])
    p.add_argument("--big", action="store_true", help="add ds:1e7 (crowdlearn only)")
    p.add_argument("--crowdkit-max-labels", type=float, default=1e6,
                   help="skip crowd-kit above this size (its DS takes ~6.6 s per iteration at 1e7)")
    p.add_argument("--mem-gb", type=float, default=10.0)
    p.add_argument("--all", type=float, default=None, metavar="SIZE",
                   help="time every registered method at SIZE labels (replaces --cases)")
    p.add_argument("--preset", choices=sorted(PRESETS), default=None,
                   help="a named table (replaces --cases, --all, --workers; crowdlearn only): "
                        "issue3 = the issue-3 methods at 1e6 labels, 10^4 and 500 workers, "
                        "section speed-issue3")
    p.add_argument("--workers", type=int, default=None,
                   help="workers in the synthetic crowd (default n_labels / 100: 10^4 at 1e6, "
                        "too sparse for the moment methods, which then fall back to MV)")
    p.add_argument("--no-crowdkit", action="store_true")
    p.add_argument("--n-jobs", type=int, default=None,
                   help="threads for methods with an n_jobs parameter (default: one)")
    p.add_argument("--no-warmup", action="store_true", help="time the first fit (includes JIT)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds per crowdlearn fit, warm-up included (default 1800; a preset's own)")
    p.add_argument("--write-results", nargs="?", const="", metavar="SECTION",
                   help="also write the output to this RESULTS.md section (default speed, or the "
                        "preset's section)")
    args = p.parse_args(argv)
    args.timeout_given = args.timeout is not None
    if not args.timeout_given:
        args.timeout = 1800.0
    if args.preset:
        section = args.write_results or PRESETS[args.preset]["section"]
        table = run_preset(args.preset, args)
        with recording(section, enabled=args.write_results is not None):
            print(table)
        return 0
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

    section = "speed" if args.write_results == "" else args.write_results
    with recording(section or "", enabled=args.write_results is not None):
        print(markdown_table(pd.DataFrame(rows), ".3f", index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
