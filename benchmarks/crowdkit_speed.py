"""Speed/memory anchor of crowd-kit 1.4.2 on synthetic Dawid-Skene data.

Cases (all K=5 classes, 5 labels per task, worker accuracy U(0.75, 0.95),
``n_labels // 100`` workers; memory capped with RLIMIT_AS, 10 GiB default):

* ``ds1e5`` / ``ds1e6``   DawidSkene(n_iter=20, tol=0) at 1e5 / 1e6 labels
* ``glad1e5``             GLAD at 1e5 labels, n_iter=1 and n_iter=3 with tol=-inf;
                          marginal cost per EM iteration = (T3 - T1) / 2
* ``mmsr1e5``             MMSR with crowd-kit defaults at 1e5 labels (memory check)

Writes ``benchmarks/results/crowdkit_speed.json`` (merged with earlier runs)
and prints it.  "time" is wall seconds, "cpu_time" process CPU seconds; on a
shared machine trust cpu_time.  Usage::

    python benchmarks/crowdkit_speed.py [--cases ds1e5 glad1e5] [--mem-gb 10] [--write-results]

``--write-results`` also writes a table of every recorded run to the ``crowdkit-speed``
section of RESULTS.md (``--report-only`` re-renders it from the JSON without running).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from crowdkit_bridge import crowdkit_speed  # noqa: E402
from synthetic import make_ds_codes, save_npz  # noqa: E402
from results_md import recording  # noqa: E402  (benchmarks/ is on sys.path)

CASES = {
    # name: (n_labels, [(method, max_iter, tol), ...])
    "ds1e5": (100_000, [("DawidSkene", 20, "0")]),
    "ds1e6": (1_000_000, [("DawidSkene", 20, "0")]),
    "glad1e5": (100_000, [("GLAD", 1, "-inf"), ("GLAD", 3, "-inf")]),
    "mmsr1e5": (100_000, [("MMSR", 10000, "none")]),
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    p.add_argument("--mem-gb", type=float, default=10.0)
    p.add_argument("--timeout", type=float, default=3600.0, help="CPU seconds per run")
    p.add_argument("--out", type=Path, default=HERE / "results" / "crowdkit_speed.json")
    p.add_argument("--write-results", nargs="?", const="crowdkit-speed", metavar="SECTION",
                   help="also write a table of the recorded runs to this RESULTS.md section")
    p.add_argument("--report-only", action="store_true", help="only render the recorded JSON")
    args = p.parse_args(argv)
    if args.report_only:
        with recording(args.write_results or "", enabled=bool(args.write_results)):
            print(runs_table(json.loads(args.out.read_text()), args.out))
        return 0

    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases:
            n, runs = CASES[case]
            npz = Path(tmp) / f"ds_{n}.npz"
            if not npz.exists():
                t, w, y, z = make_ds_codes(n, n_classes=5, labels_per_task=5, seed=0)
                save_npz(npz, t, w, y, z)
            out = []
            for method, max_iter, tol in runs:
                print(f"{case}: {method} n_iter={max_iter} tol={tol}", file=sys.stderr, flush=True)
                r = crowdkit_speed(npz, method, max_iter=max_iter, tol=tol,
                                   mem_gb=args.mem_gb, timeout=args.timeout, stderr=None)
                print(json.dumps(r), file=sys.stderr, flush=True)
                out.append(r)
            entry = {"runs": out}
            if case == "glad1e5" and all(r["error"] is None for r in out):
                r1, r3 = out
                di = r3["n_iter"] - r1["n_iter"]
                if di > 0:
                    entry["marginal_sec_per_iter"] = (r3["time"] - r1["time"]) / di
                    entry["marginal_cpu_sec_per_iter"] = (r3["cpu_time"] - r1["cpu_time"]) / di
            results[case] = entry
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))
    if args.write_results:
        with recording(args.write_results):
            print(runs_table(results, args.out))
    return 0


def runs_table(results: dict, path: Path) -> str:
    """One markdown row per recorded crowd-kit run."""
    lines = [f"(from {path.relative_to(HERE.parent)})\n",
             "| case | method | labels | iterations | wall s | CPU s | CPU s/iter | peak MB | error |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for case, entry in results.items():
        for r in entry["runs"]:
            cells = [case, r.get("method"), r.get("n_labels"), r.get("n_iter"), r.get("time"),
                     r.get("cpu_time"), r.get("cpu_sec_per_iter"), r.get("peak_rss_mb"),
                     (r.get("error") or "")[:60]]
            lines.append("| " + " | ".join("" if c is None else (f"{c:.3f}" if isinstance(c, float) else str(c))
                                           for c in cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
