"""Accuracy/time baseline of crowd-kit 1.4.2 on the shared real datasets.

Runs ``_crowdkit_runner.py accuracy`` inside ``benchmarks/.venv-crowdkit`` for
every categorical dataset under the data root (``../shared/data`` next to the
repo by default), scores the predictions against ``truth.csv`` and writes

* ``benchmarks/results/crowdkit_raw/NAME.json``  raw runner output (per-task labels)
* ``benchmarks/results/crowdkit_baseline.json``  {dataset: {method: {accuracy, time, error, ...}}}
* ``benchmarks/results/crowdkit_baseline.md``    methods x datasets tables

Accuracy is over the truth tasks that have at least one crowd answer; a task
with no prediction counts as wrong.  Standard library only (no crowdlearn,
no crowd-kit imports), so any Python 3.10+ can drive it::

    bash benchmarks/setup_crowdkit.sh
    python benchmarks/crowdkit_baseline.py [--datasets bluebirds dog] [--timeout 300]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from crowdkit_bridge import VENV_PY, run_runner  # noqa: E402
from results_md import recording  # noqa: E402  (benchmarks/ is on sys.path)

REPO = HERE.parent
DEFAULT_DATA = REPO.parent / "shared" / "data"
NUMERIC = {"snow_emotion", "snow_wordsim"}  # regression datasets: not categorical


def _read_col_map(path: Path, key: str, val: str) -> dict[str, str]:
    with open(path, newline="", encoding="utf-8") as f:
        return {row[key]: row[val] for row in csv.DictReader(f)}


def _answered_tasks(path: Path) -> set[str]:
    with open(path, newline="", encoding="utf-8") as f:
        return {row["task"] for row in csv.DictReader(f)}


def categorical_datasets(root: Path) -> list[str]:
    return sorted(
        p.name for p in root.iterdir()
        if p.is_dir() and p.name not in NUMERIC
        and (p / "labels.csv").exists() and (p / "truth.csv").exists()
    )


def run_dataset(name: str, root: Path, args) -> dict:
    raw_dir = args.out_dir / "crowdkit_raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    cmd = ["accuracy", root / name, "--timeout", args.timeout,
           "--timeout-clock", args.timeout_clock, "--out", raw_dir / f"{name}.json"]
    if args.methods:
        cmd += ["--methods", *args.methods]
    if args.mem_gb:
        cmd += ["--mem-gb", args.mem_gb]
    try:
        raw = run_runner(cmd, stderr=None)
    except RuntimeError as e:
        return {"_error": {"accuracy": None, "time": None, "cpu_time": None,
                           "error": str(e), "n_iter": None, "n_eval": 0}}
    truth = _read_col_map(root / name / "truth.csv", "task", "truth")
    answered = _answered_tasks(root / name / "labels.csv")
    eval_tasks = [t for t in truth if t in answered]
    out = {}
    for method, r in raw.items():
        acc = None
        if r["error"] is None:
            pred = r["labels"]
            hits = sum(1 for t in eval_tasks if str(pred.get(t)) == truth[t])
            acc = hits / len(eval_tasks) if eval_tasks else None
        out[method] = {"accuracy": acc, "time": r["time"], "cpu_time": r.get("cpu_time"),
                       "error": r["error"],
                       "n_iter": r.get("n_iter"), "n_eval": len(eval_tasks)}
    return out


def _fmt_table(results: dict, key: str, fmt) -> str:
    datasets = list(results)
    methods: list[str] = []
    for d in datasets:
        for m in results[d]:
            if m not in methods:
                methods.append(m)
    lines = ["| method | " + " | ".join(datasets) + " |",
             "|---" * (len(datasets) + 1) + "|"]
    for m in methods:
        cells = []
        for d in datasets:
            r = results[d].get(m)
            if r is None:
                cells.append("")
            elif r["error"] is not None:
                e = r["error"]
                cells.append("n/a" if e.startswith("skipped") else
                             "timeout" if "timeout" in e else "err")
            else:
                cells.append(fmt(r[key]))
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def to_markdown(results: dict) -> str:
    errors = [f"- {d} / {m}: {r['error']}" for d, rs in results.items()
              for m, r in rs.items() if r["error"]]
    return "\n\n".join([
        "#### crowd-kit 1.4.2 accuracy (truth tasks with answers)",
        _fmt_table(results, "accuracy", lambda v: f"{v:.4f}"),
        "#### crowd-kit 1.4.2 fit_predict wall time (s)",
        _fmt_table(results, "time", lambda v: f"{v:.2f}"),
        "#### crowd-kit 1.4.2 fit_predict CPU time (s)",
        _fmt_table(results, "cpu_time", lambda v: f"{v:.2f}"),
        "#### errors\n\n" + ("\n".join(errors) if errors else "none"),
    ]) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-root", type=Path, default=DEFAULT_DATA)
    p.add_argument("--datasets", nargs="+", default=None)
    p.add_argument("--methods", nargs="+", default=None)
    p.add_argument("--timeout", type=float, default=300.0, help="per method (s)")
    p.add_argument("--timeout-clock", choices=["cpu", "wall"], default="cpu")
    p.add_argument("--mem-gb", type=float, default=10.0)
    p.add_argument("--out-dir", type=Path, default=HERE / "results")
    p.add_argument("--report-only", action="store_true",
                   help="only re-render the markdown from the saved JSON")
    p.add_argument("--write-results", nargs="?", const="crowdkit-baseline", metavar="SECTION",
                   help="also write the tables to this RESULTS.md section (default crowdkit-baseline)")
    args = p.parse_args(argv)
    summary_path = args.out_dir / "crowdkit_baseline.json"
    if args.report_only:
        md = to_markdown(json.loads(summary_path.read_text()))
        (args.out_dir / "crowdkit_baseline.md").write_text(md)
        with recording(args.write_results or "", enabled=bool(args.write_results)):
            print(f"(rendered from {summary_path.relative_to(HERE.parent)}, as measured)\n")
            print(md)
        return 0
    if not VENV_PY.exists():
        print(f"missing {VENV_PY}; run benchmarks/setup_crowdkit.sh first", file=sys.stderr)
        return 2
    args.out_dir.mkdir(parents=True, exist_ok=True)
    results = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    for name in args.datasets or categorical_datasets(args.data_root):
        print(f"== {name}", file=sys.stderr, flush=True)
        results[name] = run_dataset(name, args.data_root, args)
        summary_path.write_text(json.dumps(results, indent=1))  # checkpoint
    (args.out_dir / "crowdkit_baseline.md").write_text(to_markdown(results))
    with recording(args.write_results or "", enabled=bool(args.write_results)):
        print(to_markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
