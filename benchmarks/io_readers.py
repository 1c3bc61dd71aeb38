"""Time the platform export readers (crowdlearn.io.read_export) against the long CSV.

For each size, one synthetic crowd (tasks, workers, 4 classes) is written as each platform's
export (the columns and keys a real export has, including the ones the reader ignores) and
as a long ``task,worker,label`` CSV.  Each export is read with ``read_export`` (format
detected from the content) and checked to give the same answers as
``CrowdLabels.from_csv`` on the long CSV; the table gives seconds for both.

    python benchmarks/io_readers.py --sizes 1e5 1e6 --write-results
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_md import markdown_table, write_section  # noqa: E402

from crowdlearn.core.data import CrowdLabels  # noqa: E402
from crowdlearn.io import read_export  # noqa: E402


def synthetic(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    task = [f"t{i}" for i in rng.integers(0, max(n // 5, 1), n)]
    worker = [f"w{i}" for i in rng.integers(0, 1000, n)]
    label = [f"c{i}" for i in rng.integers(0, 4, n)]
    return task, worker, label


def write_rows(path: Path, header, rows, sep: str) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, delimiter=sep, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def write_toloka(path, task, worker, label):
    header = ["INPUT:image", "OUTPUT:result", "GOLDEN:result", "HINT:text", "ASSIGNMENT:link",
              "ASSIGNMENT:assignment_id", "ASSIGNMENT:worker_id", "ASSIGNMENT:status", "ASSIGNMENT:started"]
    write_rows(path, header, (
        (t, y, "", "", f"https://toloka.ai/task/{i}", f"a{i}", w, "APPROVED", "2024-01-02T10:00:00")
        for i, (t, w, y) in enumerate(zip(task, worker, label))), "\t")


def write_mturk(path, task, worker, label):
    header = ["HITId", "HITTypeId", "Title", "AssignmentId", "WorkerId", "AssignmentStatus",
              "WorkTimeInSeconds", "Input.image_url", "Answer.animal"]
    write_rows(path, header, (
        (t, "HT1", "Which animal?", f"A{i}", w, "Approved", "12", f"{t}.jpg", y)
        for i, (t, w, y) in enumerate(zip(task, worker, label))), ",")


def write_crowdflower(path, task, worker, label):
    header = ["_unit_id", "_created_at", "_golden", "_id", "_missed", "_started_at", "_tainted",
              "_channel", "_trust", "_worker_id", "_country", "animal", "animal_gold", "image_url"]
    write_rows(path, header, (
        (t, "1/2/2017 10:00:00", "false", str(i), "", "1/2/2017 09:59:00", "false", "neodev", "0.9",
         w, "USA", y, "", f"{t}.jpg")
        for i, (t, w, y) in enumerate(zip(task, worker, label))), ",")


def write_labelstudio(path, task, worker, label):
    by_task: dict[str, list] = {}
    for t, w, y in zip(task, worker, label):
        by_task.setdefault(t, []).append({
            "completed_by": w, "was_cancelled": False, "ground_truth": False,
            "result": [{"from_name": "animal", "to_name": "image", "type": "choices",
                        "value": {"choices": [y]}}]})
    with open(path, "w", encoding="utf-8") as fh:
        json.dump([{"id": t, "data": {"image": f"{t}.jpg"}, "annotations": anns}
                   for t, anns in by_task.items()], fh)


def write_prodigy(path, task, worker, label):
    with open(path, "w", encoding="utf-8") as fh:
        for t, w, y in zip(task, worker, label):
            fh.write(json.dumps({"text": f"photo {t}", "options": [{"id": "c0"}, {"id": "c1"}],
                                 "accept": [y], "answer": "accept", "_input_hash": t,
                                 "_annotator_id": w, "_view_id": "choice"}) + "\n")


WRITERS = {
    "toloka": ("results.tsv", write_toloka),
    "mturk": ("batch.csv", write_mturk),
    "crowdflower": ("report.csv", write_crowdflower),
    "labelstudio": ("export.json", write_labelstudio),
    "prodigy": ("db-out.jsonl", write_prodigy),
}


def triples(d: CrowdLabels):
    return sorted(zip(d.tasks.take(d.task), d.workers.take(d.worker), d.classes.take(d.label)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", nargs="+", default=["1e5", "1e6"])
    p.add_argument("--formats", nargs="+", default=list(WRITERS))
    p.add_argument("--write-results", nargs="?", const="io-readers", metavar="SECTION")
    args = p.parse_args(argv)
    rows = []
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            n = int(float(size))
            task, worker, label = synthetic(n)
            long_path = Path(tmp) / "long.csv"
            write_rows(long_path, ["task", "worker", "label"], zip(task, worker, label), ",")
            t0 = time.perf_counter()
            want = CrowdLabels.from_csv(long_path)
            long_s = time.perf_counter() - t0
            check = triples(want) if n <= 10**5 else None
            for fmt in args.formats:
                name, writer = WRITERS[fmt]
                path = Path(tmp) / name
                writer(path, task, worker, label)
                t0 = time.perf_counter()
                got = read_export(path)
                secs = time.perf_counter() - t0
                same = (got.n_labels, got.n_tasks, got.n_workers, got.n_classes) == (
                    want.n_labels, want.n_tasks, want.n_workers, want.n_classes)
                if check is not None:
                    same = same and triples(got) == check
                rows.append({"format": fmt, "answers": f"{n:.0e}", "MB": path.stat().st_size / 2**20,
                             "read_export s": secs, "long CSV s": long_s,
                             "same answers": "yes" if same else "NO"})
                print(rows[-1], flush=True)
                path.unlink()
    table = pd.DataFrame(rows).set_index("format")
    text = (
        "Platform export readers: `read_export` (format detected from the content) on a "
        "synthetic crowd (n/5 tasks, 1000 workers, 4 classes) written in each platform's "
        "format, against `CrowdLabels.from_csv` on the same answers as a long CSV (pyarrow's "
        "parser when installed).  Wall seconds, one run, including format detection "
        f"(1-minute load average {load:.1f} at the start: other jobs shared the cores).  "
        "The JSON formats are bound by Python's json parser (about half their time).  "
        "\"same answers\": the same counts, and at 10^5 the same (task, worker, label) "
        "triples.\n\n" + markdown_table(table, floatfmt=".2f")
    )
    print(text)
    if args.write_results:
        write_section(args.write_results, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
