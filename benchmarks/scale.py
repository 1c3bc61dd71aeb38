"""Dawid-Skene beyond one fit in memory: Dask on a LocalCluster, and streaming from disk.

Data: a one-coin crowd generated chunk by chunk straight to partitioned Parquet (int64 ids):
5 answers per task, ``K = 5`` classes, workers uniformly 75-95% accurate, answers drawn
uniformly from the workers.  Nothing is ever whole in the generating process.

* ``--dask N`` (default 1e8, 1M workers: the 10^8 case of RESULTS section ``speed``): the
  fit on a 2-worker ``distributed.LocalCluster`` (one thread each) from the Parquet folder,
  beside the in-memory fit of the same answers (``CrowdLabels.from_codes`` on the same
  codes, one core).  Reported: set-up (codes, shuffle, coding the partitions), seconds per
  EM iteration, peak resident memory per Dask worker process and of the in-memory process,
  agreement of the two fits' labels.
* ``--stream N`` (default 3e8, 10^5 workers): ``fit_stream`` in a fresh process, reporting
  its passes, seconds per iteration and the process's peak resident memory.

Every fit runs ``max_iter`` iterations (``tol=0``) so times per iteration compare.

Usage::

    python benchmarks/scale.py --dask 1e8 --crowd-workers 1000000 100000 --stream 3e8 --write-results
    python benchmarks/scale.py --dask 1e6 --stream 1e6       # a quick check of the script
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from results_md import markdown_table, recording  # noqa: E402

K = 5
PER_TASK = 5
#: spark-crowd (Rodrigo et al. 2019, Table 3): 10^8 answers, Dawid-Skene, 3 machines x 10 cores
SPARK_CROWD = "426 s for the whole fit (3 machines x 10 cores, 10^8 answers)"


def generate(folder: Path, n_answers: int, n_workers: int, files: int, seed: int = 0) -> None:
    """Write ``n_answers`` one-coin answers as ``files`` Parquet files (int64 columns)."""
    import pandas as pd

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    acc = rng.uniform(0.75, 0.95, n_workers)
    n_tasks = n_answers // PER_TASK
    per_file = -(-n_tasks // files)
    for f in range(files):
        lo, hi = f * per_file, min(n_tasks, (f + 1) * per_file)
        if lo >= hi:
            break
        truth = rng.integers(0, K, hi - lo)
        task = np.repeat(np.arange(lo, hi, dtype=np.int64), PER_TASK)
        worker = rng.integers(0, n_workers, task.size)
        right = rng.random(task.size) < acc[worker]
        wrong = (np.repeat(truth, PER_TASK) + rng.integers(1, K, task.size)) % K
        label = np.where(right, np.repeat(truth, PER_TASK), wrong)
        pd.DataFrame({"task": task, "worker": worker.astype(np.int64), "label": label.astype(np.int64)}) \
            .to_parquet(folder / f"part-{f:04d}.parquet", index=False)


_DASK_CHILD = r"""
import json, logging, os, resource, sys, time
import numpy as np
import crowdlearn as cl
from crowdlearn.scale import fit_dask
from distributed import Client, LocalCluster
logging.getLogger("distributed").setLevel(logging.ERROR)
folder, iters, out, npart = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
import dask
dask.config.set({"temporary-directory": os.path.dirname(out)})  # shuffle spill beside the data
cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                       memory_limit="10GB")
client = Client(cluster)
marks = []
est = cl.DawidSkene(max_iter=iters, tol=0)
t0 = time.perf_counter()
files = fit_dask(est, folder, client=client, out=out, npartitions=npart or None,
                 callback=lambda r: marks.append(time.perf_counter()))
t_end = time.perf_counter()
rss = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
per_iter = float(np.median(np.diff(marks))) if len(marks) > 1 else float("nan")
print(json.dumps({"setup": marks[0] - t0 - per_iter, "per_iter": per_iter, "total": t_end - t0,
                  "write": t_end - marks[-1], "worker_peak_mb": sorted(rss.values()),
                  "client_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "files": len(files), "partitions": len(files), "n_iter": est.n_iter_}))
client.close(); cluster.close()
"""

_MEMORY_CHILD = r"""
import json, resource, sys, time
import numpy as np, pandas as pd, pyarrow.parquet as pq
import crowdlearn as cl
from pathlib import Path
folder, iters, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
parts = [pq.read_table(f).to_pandas() for f in sorted(Path(folder).glob("*.parquet"))]
task = np.concatenate([p["task"].to_numpy(np.int32) for p in parts])
worker = np.concatenate([p["worker"].to_numpy(np.int32) for p in parts])
label = np.concatenate([p["label"].to_numpy(np.int32) for p in parts])
del parts
data = cl.CrowdLabels.from_codes(task, worker, label, n_classes=5)
del task, worker, label
marks = []
est = cl.DawidSkene(max_iter=iters, tol=0)
t0 = time.perf_counter()
est.fit(data, callback=lambda r: marks.append(time.perf_counter()))
np.save(out, est.label_codes_)
print(json.dumps({"per_iter": float(np.median(np.diff(marks))), "total": time.perf_counter() - t0,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

_STREAM_CHILD = r"""
import json, resource, sys, time
import numpy as np
import crowdlearn as cl
from crowdlearn.scale import fit_stream
folder, iters, out, work, chunk = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
marks = []
est = cl.DawidSkene(max_iter=iters, tol=0, n_jobs=-1)
t0 = time.perf_counter()
files = fit_stream(est, folder, out=out, workdir=work, chunk_answers=chunk,
                   callback=lambda r: marks.append(time.perf_counter()))
t_end = time.perf_counter()
per_iter = float(np.median(np.diff(marks)))
print(json.dumps({"setup": marks[0] - t0 - per_iter, "per_iter": per_iter, "total": t_end - t0,
                  "write": t_end - marks[-1], "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "files": len(files)}))
"""


def child(code: str, *args) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, env=env)
    if proc.returncode:
        raise RuntimeError(proc.stderr.strip()[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_dask(n: int, n_workers: int, iters: int, root: Path, npart: int) -> tuple[dict, dict, float]:
    import pandas as pd

    folder = root / "dask-in"
    t = time.perf_counter()
    generate(folder, n, n_workers, files=max(2, n // 5_000_000))
    print(f"(generated {n:.0e} answers in {time.perf_counter() - t:.0f} s)", file=sys.stderr)
    mem = child(_MEMORY_CHILD, folder, iters, root / "memory-labels.npy")
    dsk = child(_DASK_CHILD, folder, iters, root / "dask-out", npart)
    res = pd.concat([pd.read_parquet(f, columns=["task", "label"]) for f in sorted((root / "dask-out").glob("*.parquet"))])
    codes = np.load(root / "memory-labels.npy")
    agree = float(np.mean(res["label"].to_numpy() == codes[res["task"].to_numpy()]))
    assert len(res) == n // PER_TASK and res["task"].is_unique
    shutil.rmtree(folder)
    shutil.rmtree(root / "dask-out")
    return mem, dsk, agree


def run_stream(n: int, iters: int, root: Path, chunk: int) -> dict:
    folder = root / "stream-in"
    t = time.perf_counter()
    generate(folder, n, 100_000, files=max(2, n // 5_000_000), seed=1)
    print(f"(generated {n:.0e} answers in {time.perf_counter() - t:.0f} s)", file=sys.stderr)
    out = child(_STREAM_CHILD, folder, iters, root / "stream-out", root / "stream-work", chunk)
    shutil.rmtree(folder)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dask", type=float, default=None, metavar="N", help="answers for the Dask run (e.g. 1e8)")
    p.add_argument("--stream", type=float, default=None, metavar="N", help="answers for the streaming run (e.g. 3e8)")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--partitions", type=int, default=0,
                   help="Dask partitions after the shuffle (default 0: fit_dask's own choice)")
    p.add_argument("--crowd-workers", type=int, nargs="+", default=None,
                   help="worker counts of the Dask runs (default: answers / 100)")
    p.add_argument("--chunk", type=int, default=4_000_000, help="streaming chunk_answers")
    p.add_argument("--root", default=None, help="scratch folder (default: a temporary one)")
    p.add_argument("--write-results", action="store_true")
    args = p.parse_args(argv)
    root = Path(args.root or tempfile.mkdtemp(prefix="crowdlearn-scale-"))
    try:
        with recording("scale", enabled=args.write_results):
            print("### Dawid-Skene beyond memory: Dask LocalCluster and streaming from disk\n")
            if args.dask:
                import pandas as pd

                n = int(args.dask)
                rows, notes = [], []
                for n_workers in args.crowd_workers or [max(PER_TASK, n // 100)]:
                    mem, dsk, agree = run_dask(n, n_workers, args.iters, root, args.partitions)
                    crowd = f"{n_workers:,} workers"
                    rows.append({"crowd": crowd, "fit": "in memory, 1 core", "set-up (s)": np.nan,
                                 "s / iteration": mem["per_iter"], "writing results (s)": np.nan,
                                 "peak memory (GB)": mem["peak_mb"] / 1e3})
                    rows.append({"crowd": crowd, "fit": f"Dask, 2 workers x 1 thread, {dsk['partitions']} partitions",
                                 "set-up (s)": dsk["setup"], "s / iteration": dsk["per_iter"],
                                 "writing results (s)": dsk["write"],
                                 "peak memory (GB)": max(dsk["worker_peak_mb"]) / 1e3})
                    notes.append(f"{crowd}: Dask worker processes peaked at "
                                 f"{', '.join(f'{m / 1e3:.1f}' for m in dsk['worker_peak_mb'])} GB, the client at "
                                 f"{dsk['client_peak_mb'] / 1e3:.1f} GB; the two fits' labels agree on {agree:.6f} of the tasks")
                print(f"{n:.0e} answers ({n // PER_TASK:,} tasks, K = {K}) from {max(2, n // 5_000_000)} Parquet files; "
                      f"{args.iters} iterations each; the `W x K x K` count table of 1,000,000 workers is 200 MB, "
                      f"of 100,000 workers 20 MB (docs/SCALE.md).\n")
                print(markdown_table(pd.DataFrame(rows).set_index("crowd"), floatfmt=".2f"))
                print("\n" + ";\n".join(notes) + ".")
                print(f"\nspark-crowd's published figure: {SPARK_CROWD}.\n")
            if args.stream:
                n = int(args.stream)
                st = run_stream(n, args.iters, root, args.chunk)
                print(f"Streaming: {n:.0e} answers ({n // PER_TASK:,} tasks, 100,000 workers, K = {K}) from "
                      f"{max(2, n // 5_000_000)} Parquet files, `chunk_answers={args.chunk:,}`, "
                      f"`n_jobs=-1` (2 threads), {args.iters} iterations: set-up (codes pass, bucket pass, "
                      f"coding the buckets) {st['setup']:.0f} s, {st['per_iter']:.1f} s per iteration, "
                      f"writing {st['files']} result files {st['write']:.0f} s, total {st['total']:.0f} s; "
                      f"peak resident memory of the process {st['peak_mb'] / 1e3:.2f} GB.")
    finally:
        if args.root is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
