"""Run crowd-kit 1.4.2 aggregators as a comparison baseline.

This script runs INSIDE the crowd-kit venv (``benchmarks/.venv-crowdkit``, made
by ``setup_crowdkit.sh``) and must never import crowdlearn.  It only calls
crowd-kit's public API; no crowd-kit code is copied into the project.

Modes (each prints exactly one JSON object on stdout; logs go to stderr)::

    python _crowdkit_runner.py accuracy DATASET_DIR [--methods M ...] [--timeout 300]
        -> {method: {"time": s, "cpu_time": s, "labels": {task: label}, "error": str|null,
                     "n_iter": int|null}}

    python _crowdkit_runner.py speed --npz FILE --method DawidSkene --max-iter 20 [--tol 0]
        -> {"method", "time", "cpu_time", "peak_rss_mb", "n_iter", "n_labels", ..., "error"}

    python _crowdkit_runner.py pairwise --csv FILE [--methods BradleyTerry ...] [--max-iter 100]
            [--tol none] [--group-col query]
        -> {method: {"time", "cpu_time", "scores": {item: score}, "error", "kwargs",
                     "dropped_ties"}}

    python _crowdkit_runner.py pairwise-speed --npz FILE --method BradleyTerry --max-iter 20 --tol 0
        -> {"method", "time", "cpu_time", "n_comparisons", "n_items", "peak_rss_mb", "error"}

Pairwise modes: crowd-kit's pairwise models have no ties (a label must be the left or the
right item), so rows whose label is neither are dropped and counted (``dropped_ties``); with
``--group-col`` the item ids become ``"<group>::<item>"`` (crowd-kit takes one id per item;
``benchmarks/pairwise.py`` splits them back into crowdlearn's (group, item) units), so the
scores can be compared item by item.

"time" is wall-clock seconds of ``fit_predict``; "cpu_time" is the process CPU
seconds over the same span (less sensitive to other load on the machine).

crowd-kit 1.4.2 names the iteration cap ``n_iter`` and the stopping threshold
``tol`` (DawidSkene/OneCoinDawidSkene stop when the per-label ELBO gain is
``< tol``, GLAD when the per-label Q gain is ``< tol``, MMSR when the change of
``u v^T`` is ``< tol``).  ``--max-iter`` is passed as ``n_iter`` to every class
whose constructor has it, and ``--tol`` as ``tol`` where present.  Note that
``tol=0`` still stops EM early if the objective *decreases* (``gain < 0``);
use ``--tol -inf`` to force exactly ``max_iter`` iterations.  ``n_iter`` in the
output is ``len(loss_history_)`` when the fitted model has one.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import math
import os
import resource
import signal
import sys
import time
import traceback
from pathlib import Path

# Categorical (single-label classification) aggregators of crowd-kit 1.4.2.
# GoldMajorityVote is the only other one; it needs gold labels in fit(), so it
# is not a truth-inference method and is left out.
CATEGORICAL_METHODS = [
    "MajorityVote",
    "Wawa",
    "ZeroBasedSkill",
    "DawidSkene",
    "OneCoinDawidSkene",
    "GLAD",
    "MACE",
    "KOS",
    "MMSR",
]


def _log(*args) -> None:
    print(*args, file=sys.stderr, flush=True)


class _Timeout(BaseException):  # not Exception: library code must not swallow it
    pass


def _on_alarm(signum, frame):  # pragma: no cover - signal handler
    raise _Timeout()


def _set_mem_limit(mem_gb: float | None) -> None:
    if mem_gb:
        lim = int(mem_gb * 1024**3)
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))


def _peak_rss_mb() -> float:
    # Linux: ru_maxrss is in KiB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _make(method: str, max_iter: int | None = None, tol: float | None = None):
    import crowdkit.aggregation as agg

    cls = getattr(agg, method)
    params = inspect.signature(cls).parameters
    kwargs = {}
    if max_iter is not None and "n_iter" in params:
        kwargs["n_iter"] = int(max_iter)
    if tol is not None and "tol" in params:
        kwargs["tol"] = float(tol)
    return cls(**kwargs), kwargs


_CLOCKS = {  # timeout clock -> (interval timer, its signal)
    "cpu": (signal.ITIMER_PROF, signal.SIGPROF),  # process CPU seconds (user+sys)
    "wall": (signal.ITIMER_REAL, signal.SIGALRM),
}


def _fit_predict(method: str, df, timeout: float, max_iter=None, tol=None, clock="cpu"):
    """Returns (labels Series or None, wall s, cpu s, error str or None, n_iter, kwargs).

    The per-method timeout is measured on ``clock``: "cpu" (default) counts the
    process's CPU seconds, so a busy shared machine does not cut a method off
    early; "wall" is a plain alarm.  Either way the signal is only handled
    between Python bytecodes, so a single long C call overruns it.
    """
    model, kwargs = _make(method, max_iter, tol)
    which, signum = _CLOCKS[clock]
    old = signal.signal(signum, _on_alarm)
    if timeout and timeout > 0:
        signal.setitimer(which, float(timeout))
    t0 = time.perf_counter()
    c0 = time.process_time()
    labels, err = None, None
    try:
        # keep stdout clean for the JSON result
        with contextlib.redirect_stdout(sys.stderr):
            labels = model.fit_predict(df)
    except _Timeout:
        err = f"timeout after {timeout:g} s ({clock} time)"
    except MemoryError as e:
        err = f"MemoryError: {e}"
    except Exception as e:  # noqa: BLE001 - report any crash of the baseline
        err = f"{type(e).__name__}: {e}"
        _log(f"[{method}] crashed:\n{traceback.format_exc()}")
    finally:
        signal.setitimer(which, 0)
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - c0
        signal.signal(signum, old)
    hist = getattr(model, "loss_history_", None)
    n_iter = len(hist) if isinstance(hist, list) else None
    return labels, elapsed, cpu, err, n_iter, kwargs


def _jsonable_label(x):
    if x is None:
        return None
    try:
        if isinstance(x, float) and math.isnan(x):
            return None
    except TypeError:
        pass
    if hasattr(x, "item"):
        x = x.item()
    return x if isinstance(x, (str, int, float, bool)) else str(x)


def cmd_accuracy(args) -> dict:
    import pandas as pd

    path = Path(args.dataset_dir) / "labels.csv"
    df = pd.read_csv(
        path,
        dtype={"task": str, "worker": str, "label": str},
        keep_default_na=False,
        usecols=["task", "worker", "label"],
    )
    _log(f"{path}: {len(df)} labels, {df.task.nunique()} tasks, "
         f"{df.worker.nunique()} workers, {df.label.nunique()} classes")
    n_classes = df.label.nunique()
    out = {}
    for m in args.methods:
        if m == "KOS" and n_classes != 2:
            out[m] = {"time": 0.0, "cpu_time": 0.0, "labels": {}, "n_iter": None,
                      "error": f"skipped: KOS is binary-only ({n_classes} classes)"}
            _log(f"  {m:18s} skipped (binary-only, {n_classes} classes)")
            continue
        labels, secs, cpu, err, n_iter, _ = _fit_predict(m, df, args.timeout, clock=args.timeout_clock)
        res = {"time": round(secs, 6), "cpu_time": round(cpu, 6), "labels": {},
               "error": err, "n_iter": n_iter}
        if labels is not None:
            res["labels"] = {str(k): _jsonable_label(v) for k, v in labels.items()}
        _log(f"  {m:18s} {secs:9.3f} s wall {cpu:9.3f} s cpu" + (f"  ERROR {err}" if err else ""))
        out[m] = res
    return out


def cmd_speed(args) -> dict:
    import numpy as np
    import pandas as pd

    with np.load(args.npz) as z:
        task, worker, label = z["task"], z["worker"], z["label"]
        truth = z["truth"] if "truth" in z.files else None
    t0 = time.perf_counter()
    df = pd.DataFrame({"task": task.astype(np.int64),
                       "worker": worker.astype(np.int64),
                       "label": label.astype(np.int64)})
    build = time.perf_counter() - t0
    rss_before = _peak_rss_mb()
    tol = None if args.tol is None else float(args.tol)
    labels, secs, cpu, err, n_iter, kwargs = _fit_predict(
        args.method, df, args.timeout, max_iter=args.max_iter, tol=tol,
        clock=args.timeout_clock)
    res = {
        "method": args.method,
        "kwargs": {k: (str(v) if isinstance(v, float) and not math.isfinite(v) else v)
                   for k, v in kwargs.items()},
        "n_labels": int(len(df)),
        "n_tasks": int(df.task.nunique()),
        "n_workers": int(df.worker.nunique()),
        "n_classes": int(df.label.nunique()),
        "time": round(secs, 6),
        "cpu_time": round(cpu, 6),
        "sec_per_iter": round(secs / n_iter, 6) if n_iter else None,
        "cpu_sec_per_iter": round(cpu / n_iter, 6) if n_iter else None,
        "n_iter": n_iter,
        "build_df_time": round(build, 6),
        "peak_rss_mb": round(_peak_rss_mb(), 1),
        "rss_before_fit_mb": round(rss_before, 1),
        "mem_limit_gb": args.mem_gb,
        "error": err,
    }
    if labels is not None and truth is not None:
        pred = labels.reindex(np.arange(truth.size))
        res["accuracy"] = round(float(np.mean(pred.to_numpy() == truth)), 6)
    return res


PAIRWISE_METHODS = ["BradleyTerry", "NoisyBradleyTerry"]


def cmd_pairwise(args) -> dict:
    import pandas as pd

    df = pd.read_csv(args.csv, dtype=str, keep_default_na=False)
    if args.group_col:
        for col in ("left", "right", "label"):
            df[col] = df[args.group_col] + "::" + df[col]
    strict = (df["label"] == df["left"]) | (df["label"] == df["right"])
    dropped = int((~strict).sum())
    df = df.loc[strict, ["worker", "left", "right", "label"]].reset_index(drop=True)
    _log(f"{args.csv}: {len(df)} strict comparisons ({dropped} ties dropped)")
    tol = None if args.tol is None else float(args.tol)
    out = {}
    for m in args.methods:
        scores, secs, cpu, err, n_iter, kwargs = _fit_predict(
            m, df, args.timeout, max_iter=args.max_iter, tol=tol, clock=args.timeout_clock)
        res = {"time": round(secs, 6), "cpu_time": round(cpu, 6), "scores": {}, "error": err,
               "kwargs": {k: (str(v) if isinstance(v, float) and not math.isfinite(v) else v)
                          for k, v in kwargs.items()},
               "dropped_ties": dropped}
        if scores is not None:
            res["scores"] = {str(k): float(v) for k, v in scores.items()}
        _log(f"  {m:18s} {secs:9.3f} s wall" + (f"  ERROR {err}" if err else ""))
        out[m] = res
    return out


def cmd_pairwise_speed(args) -> dict:
    import numpy as np
    import pandas as pd

    with np.load(args.npz) as z:
        left, right, winner = z["left"], z["right"], z["winner"]
        worker = z["worker"] if "worker" in z.files else np.zeros_like(left)
    df = pd.DataFrame({"worker": worker.astype(np.int64), "left": left.astype(np.int64),
                       "right": right.astype(np.int64), "label": winner.astype(np.int64)})
    tol = None if args.tol is None else float(args.tol)
    scores, secs, cpu, err, n_iter, kwargs = _fit_predict(
        args.method, df, args.timeout, max_iter=args.max_iter, tol=tol, clock=args.timeout_clock)
    return {"method": args.method, "kwargs": kwargs, "n_comparisons": int(len(df)),
            "n_items": int(np.unique(np.concatenate([left, right])).size),
            "time": round(secs, 6), "cpu_time": round(cpu, 6),
            "peak_rss_mb": round(_peak_rss_mb(), 1), "error": err}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="mode", required=True)

    a = sub.add_parser("accuracy", help="run aggregators on DATASET_DIR/labels.csv")
    a.add_argument("dataset_dir")
    a.add_argument("--methods", nargs="+", default=CATEGORICAL_METHODS)
    a.add_argument("--timeout", type=float, default=300.0, help="per-method seconds, 0 = none")
    a.add_argument("--mem-gb", type=float, default=None, help="RLIMIT_AS cap (GiB)")
    a.add_argument("--out", default=None, help="also write the JSON here")

    s = sub.add_parser("speed", help="time one aggregator on synthetic codes")
    s.add_argument("--npz", required=True)
    s.add_argument("--method", default="DawidSkene")
    s.add_argument("--max-iter", type=int, default=20)
    s.add_argument("--tol", default="0", help="float; 'none' keeps crowd-kit's default")
    s.add_argument("--timeout", type=float, default=0.0, help="seconds, 0 = none")
    s.add_argument("--mem-gb", type=float, default=None, help="RLIMIT_AS cap (GiB)")
    s.add_argument("--out", default=None)

    pw = sub.add_parser("pairwise", help="pairwise aggregators on a worker,left,right,label CSV")
    pw.add_argument("--csv", required=True)
    pw.add_argument("--methods", nargs="+", default=PAIRWISE_METHODS)
    pw.add_argument("--group-col", default=None)
    ps = sub.add_parser("pairwise-speed", help="time one pairwise aggregator on saved codes")
    ps.add_argument("--npz", required=True)
    ps.add_argument("--method", default="BradleyTerry")
    # (max_iter, tol, timeout) defaults: accuracy runs as a user would, speed runs every iteration
    for sp, max_iter, tol, timeout in ((pw, 100, "none", 300.0), (ps, 20, "0", 0.0)):
        sp.add_argument("--max-iter", type=int, default=max_iter)
        sp.add_argument("--tol", default=tol, help="float; 'none' keeps crowd-kit's default")
        sp.add_argument("--timeout", type=float, default=timeout, help="seconds, 0 = none")
        sp.add_argument("--mem-gb", type=float, default=None, help="RLIMIT_AS cap (GiB)")
        sp.add_argument("--out", default=None)

    for sp in (a, s, pw, ps):
        sp.add_argument("--timeout-clock", choices=sorted(_CLOCKS), default="cpu",
                        help="clock the timeout is measured on (default: cpu)")
    args = p.parse_args(argv)
    if getattr(args, "tol", None) is not None and str(args.tol).lower() == "none":
        args.tol = None
    _set_mem_limit(args.mem_gb)
    os.environ.setdefault("TQDM_DISABLE", "1")

    modes = {"accuracy": cmd_accuracy, "speed": cmd_speed, "pairwise": cmd_pairwise,
             "pairwise-speed": cmd_pairwise_speed}
    result = modes[args.mode](args)
    text = json.dumps(result)
    if args.out:
        Path(args.out).write_text(text)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
