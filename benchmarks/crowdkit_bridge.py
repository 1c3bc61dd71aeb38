"""Call the crowd-kit 1.4.2 baseline from the project's own environment.

crowd-kit lives in ``benchmarks/.venv-crowdkit`` (see ``setup_crowdkit.sh``)
because it breaks with scikit-learn >= 1.6; these helpers run
``_crowdkit_runner.py`` there in a subprocess and return its JSON.  Standard
library only, so crowdlearn-side benchmarks can import it freely::

    from crowdkit_bridge import crowdkit_accuracy, crowdkit_speed
    crowdkit_speed("/tmp/ds_1e5.npz", "DawidSkene", max_iter=20)
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV_PY = HERE / ".venv-crowdkit" / "bin" / "python"
RUNNER = HERE / "_crowdkit_runner.py"

__all__ = ["VENV_PY", "available", "run_runner", "crowdkit_accuracy", "crowdkit_speed",
           "crowdkit_pairwise", "crowdkit_pairwise_speed"]


def available() -> bool:
    return VENV_PY.exists()


def run_runner(args: list[str], stderr=None) -> dict:
    """Run ``_crowdkit_runner.py ARGS`` in the crowd-kit venv; return its JSON."""
    if not available():
        raise RuntimeError(f"{VENV_PY} missing: run benchmarks/setup_crowdkit.sh")
    proc = subprocess.run([str(VENV_PY), str(RUNNER), *map(str, args)],
                          stdout=subprocess.PIPE, stderr=stderr, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"crowd-kit runner exited {proc.returncode}: {args}")
    return json.loads(proc.stdout)


def crowdkit_accuracy(dataset_dir, methods=None, timeout=300.0, mem_gb=None,
                      timeout_clock="cpu", stderr=subprocess.DEVNULL) -> dict:
    """{method: {"time", "cpu_time", "labels": {task: label}, "error", "n_iter"}}."""
    args = ["accuracy", dataset_dir, "--timeout", timeout, "--timeout-clock", timeout_clock]
    if methods:
        args += ["--methods", *methods]
    if mem_gb:
        args += ["--mem-gb", mem_gb]
    return run_runner(args, stderr=stderr)


def crowdkit_speed(npz, method="DawidSkene", max_iter=20, tol="0", mem_gb=10.0,
                   timeout=0.0, timeout_clock="cpu", stderr=subprocess.DEVNULL) -> dict:
    """Time one crowd-kit aggregator on codes saved by ``synthetic.save_npz``.

    ``tol``: a float, "-inf" (never stop early) or "none" (crowd-kit default).
    """
    args = ["speed", "--npz", npz, "--method", method, "--max-iter", max_iter,
            f"--tol={tol}", "--timeout", timeout, "--timeout-clock", timeout_clock]
    if mem_gb:
        args += ["--mem-gb", mem_gb]
    return run_runner(args, stderr=stderr)


def crowdkit_pairwise(csv, methods=None, max_iter=100, tol="none", group_col=None,
                      timeout=300.0, stderr=subprocess.DEVNULL) -> dict:
    """{method: {"time", "cpu_time", "scores": {item: score}, "error", "dropped_ties"}} of
    crowd-kit's pairwise aggregators on a ``worker,left,right,label`` CSV (ties dropped)."""
    args = ["pairwise", "--csv", csv, "--max-iter", max_iter, f"--tol={tol}", "--timeout", timeout]
    if methods:
        args += ["--methods", *methods]
    if group_col:
        args += ["--group-col", group_col]
    return run_runner(args, stderr=stderr)


def crowdkit_pairwise_speed(npz, method="BradleyTerry", max_iter=20, tol="0", mem_gb=10.0,
                            timeout=0.0, stderr=subprocess.DEVNULL) -> dict:
    """Time one crowd-kit pairwise aggregator on codes saved as ``left, right, winner``."""
    args = ["pairwise-speed", "--npz", npz, "--method", method, "--max-iter", max_iter,
            f"--tol={tol}", "--timeout", timeout]
    if mem_gb:
        args += ["--mem-gb", mem_gb]
    return run_runner(args, stderr=stderr)
