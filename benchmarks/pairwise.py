"""Pairwise comparisons: crowdlearn's bt / thurstone / crowd-bt / noisy-bt beside crowd-kit 1.4.2.

Three tables, each written to its own RESULTS.md section with ``--write-results``:

* ``pairwise-accuracy``: Kendall tau-b, Spearman and NDCG@10 against the truth on
  ``music_similarity_pairs`` (within queries) and on synthetic crowds, crowdlearn's methods
  and crowd-kit's ``BradleyTerry`` / ``NoisyBradleyTerry`` fitted in the same run (crowd-kit
  in its own venv through ``crowdkit_bridge``).  crowd-kit's models have no ties, so the
  side-by-side rows use the strict comparisons only (every method gets the same rows);
  crowdlearn's methods are also reported on all answers, ties included.
* ``pairwise-speed``: Bradley-Terry at 10^6 comparisons, the same number of iterations in
  both libraries (``--speed-iter``, no early stop), crowd-kit's fit_predict on a DataFrame
  against crowdlearn's table build + fit (best of ``--speed-repeat`` runs each; crowdlearn
  after a warm-up fit that loads numba; its lazily computed standard errors timed apart);
  and every crowdlearn method at 10^6 comparisons with its defaults.
* ``pairwise-crowdkit-noisybt-gradient``: the finite-difference check of crowd-kit's NoisyBT
  gradient (``investigations/_crowdkit_noisybt_grad.py``).

Synthetic crowds (``crowdlearn.simulate.pairwise.pairwise_crowd``): 200 items, 50 workers,
5,000 comparisons, no ties; "reversers": 30% of workers with eta in [0.05, 0.35]; "guessers
+ position bias": 30% of workers with eta in [0.5, 0.6] and position biases N(0, 1).

Usage::

    python benchmarks/pairwise.py [--write-results] [--seeds 3] [--speed-items 1000 10000]
        [--speed-iter 20] [--speed-repeat 3] [--skip-crowdkit] [--skip-speed] [--skip-accuracy]
"""

from __future__ import annotations

import os

# one BLAS thread in both libraries (set before numpy loads; the crowd-kit runner inherits it):
# on a shared 2-core machine, threaded BLAS oversubscribes and times become noise
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from crowdkit_bridge import (VENV_PY, available, crowdkit_pairwise,  # noqa: E402
                             crowdkit_pairwise_speed)
from results_md import markdown_table, write_section  # noqa: E402

import crowdlearn  # noqa: E402
from crowdlearn.diagnostics.pairwise_metrics import kendall_tau, ndcg_at_k, spearman  # noqa: E402
from crowdlearn.pairwise.data import Comparisons, read_truth  # noqa: E402
from crowdlearn.simulate.pairwise import pairwise_crowd  # noqa: E402

#: the real data sets: $CROWDLEARN_SHARED_DATA, else ../shared/data beside the checkout
DATA = Path(os.environ.get("CROWDLEARN_SHARED_DATA") or HERE.parent.parent / "shared" / "data")
MUSIC = DATA / "music_similarity_pairs"
OURS = list(crowdlearn.methods(kind="pairwise"))
#: crowd-kit runs: (label, method, n_iter, tol) -- BradleyTerry has no default n_iter
CROWDKIT = [("BradleyTerry (n_iter=100, tol default)", "BradleyTerry", 100, "none"),
            ("BradleyTerry (n_iter=100, tol=0)", "BradleyTerry", 100, "0"),
            ("NoisyBradleyTerry (defaults)", "NoisyBradleyTerry", 100, "none")]


def _metrics(scores: pd.Series, truth: pd.Series, groups: pd.Series | None) -> dict:
    return {"kendall_tau": kendall_tau(scores, truth, groups),
            "spearman": spearman(scores, truth, groups),
            "ndcg@10": ndcg_at_k(scores, truth, 10, groups)}


#: non-default settings reported for sensitivity only (defaults were set on synthetic data:
#: Kendall tau within +-0.004 for prior_strength 0.01..3 there)
VARIANTS = {"bt (prior_strength=0.01, sensitivity)": ("bt", {"prior_strength": 0.01}),
            "noisy-bt (0.1.0 prior N(0,10) on q, g; before)":
                ("noisy-bt", {"worker_prior": 0.1, "population": False})}
#: extra random_state values of crowd-kit's NoisyBradleyTerry (its start is random) on music
CROWDKIT_NBT_SEEDS = [1, 2, 3, 4]


def _crowdkit_scores(res: dict, data: Comparisons) -> pd.Series:
    """crowd-kit's scores keyed as crowdlearn's units.  crowd-kit takes one id per item, so
    the runner names a grouped unit ``group::item``; crowdlearn keys it by the (group, item)
    pair.  Split at the first separator, which no id of music_similarity_pairs holds."""
    scores = pd.Series(res["scores"], dtype=float)
    if data.grouped:
        scores.index = pd.MultiIndex.from_tuples([tuple(k.split("::", 1)) for k in scores.index],
                                                 names=data.items.names)
    return scores


def _fit_ours(name: str, data: Comparisons):
    name, params = VARIANTS.get(name, (name, {}))
    est = crowdlearn.get_method(name)(**params)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        est.fit(data)
    return est, time.perf_counter() - t0


def _run_crowdkit(csv: Path, group_col: str | None) -> dict:
    out = {}
    for label, method, n_iter, tol in CROWDKIT:
        res = crowdkit_pairwise(str(csv), methods=[method], max_iter=n_iter, tol=tol,
                                group_col=group_col)[method]
        out[label] = res
    return out


def _compare(dataset: str, data: Comparisons, csv: Path | None, group_col: str | None,
             use_crowdkit: bool) -> list[dict]:
    """Rows of the accuracy table for one answer table (and its CSV for crowd-kit)."""
    truth = data.truth_series()
    groups = pd.Series(data.item_group, index=data.items) if data.grouped else None
    rows = []
    for name in OURS + list(VARIANTS):
        est, secs = _fit_ours(name, data)
        rows.append({"dataset": dataset, "library": "crowdlearn", "method": name,
                     **_metrics(est.scores_, truth, groups), "time_s": secs})
    if use_crowdkit and csv is not None:
        for label, res in _run_crowdkit(csv, group_col).items():
            if res["error"]:
                rows.append({"dataset": dataset, "library": "crowd-kit 1.4.2", "method": label,
                             "note": res["error"]})
                continue
            scores = _crowdkit_scores(res, data)
            missing = len(data.items.difference(scores.index))
            rows.append({"dataset": dataset, "library": "crowd-kit 1.4.2", "method": label,
                         **_metrics(scores, truth, groups), "time_s": res["time"],
                         "note": f"{missing} items unscored" if missing else ""})
    return rows


def _crowdkit_nbt_seed_rows(dataset: str, data: Comparisons, csv: Path,
                            group_col: str | None) -> list[dict]:
    """crowd-kit's NoisyBradleyTerry at other random_state values, with the iterations and
    message its L-BFGS-B reported (``investigations/_crowdkit_noisybt_seeds.py``)."""
    script = HERE / "investigations" / "_crowdkit_noisybt_seeds.py"
    cmd = [str(VENV_PY), str(script), "--csv", str(csv), "--seeds", *map(str, CROWDKIT_NBT_SEEDS)]
    if group_col:
        cmd += ["--group-col", group_col]
    out = json.loads(subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    text=True, check=True).stdout)
    truth = data.truth_series()
    groups = pd.Series(data.item_group, index=data.items) if data.grouped else None
    rows = []
    for seed, res in out.items():
        scores = _crowdkit_scores(res, data)
        rows.append({"dataset": dataset, "library": "crowd-kit 1.4.2",
                     "method": f"NoisyBradleyTerry (random_state={seed})",
                     **_metrics(scores, truth, groups),
                     "note": f"L-BFGS-B stopped after {res['nit']} iterations: {res['message']}"})
    return rows


def _strict_frame(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame["label"] == frame["left"]) | (frame["label"] == frame["right"])]


def accuracy_rows(seeds: int, use_crowdkit: bool, tmp: Path) -> list[dict]:
    rows = []
    if not (MUSIC / "pairs.csv").exists():
        print(f"{MUSIC} missing (set CROWDLEARN_SHARED_DATA): synthetic rows only",
              file=sys.stderr)
    else:
        truth = read_truth(MUSIC / "truth.csv", group="query", lower_is_better=True)
        full = Comparisons.from_csv(MUSIC / "pairs.csv", group="query", truth=truth)
        rows += _compare("music_similarity_pairs (all 2805, ties included)", full, None,
                         "query", False)
        frame = pd.read_csv(MUSIC / "pairs.csv", dtype=str, keep_default_na=False)
        strict = _strict_frame(frame)
        strict_csv = tmp / "music_strict.csv"
        strict.to_csv(strict_csv, index=False)
        data = Comparisons.from_frame(strict, group="query", truth=truth)
        title = f"music_similarity_pairs (strict only, {len(strict)})"
        rows += _compare(title, data, strict_csv, "query", use_crowdkit)
        if use_crowdkit:
            rows += _crowdkit_nbt_seed_rows(title, data, strict_csv, "query")
    scenarios = {
        "synthetic reversers (200 items, 30% eta<0.35)": dict(frac_unreliable=0.3),
        "synthetic guessers + position bias": dict(frac_unreliable=0.3,
                                                   eta_unreliable=(0.5, 0.6), bias_scale=1.0),
    }
    for title, kw in scenarios.items():
        per_seed = []
        for seed in range(seeds):
            data, _ = pairwise_crowd(200, 50, 5000, seed=seed, **kw)
            csv = tmp / f"synthetic_{seed}.csv"
            data.to_frame().to_csv(csv, index=False)
            per_seed += _compare(title, data, csv, None, use_crowdkit)
        frame = pd.DataFrame(per_seed)
        frame["note"] = frame.get("note", pd.Series("", index=frame.index)).fillna("")
        mean = (frame.groupby(["dataset", "library", "method"], sort=False)
                .agg(kendall_tau=("kendall_tau", "mean"), spearman=("spearman", "mean"),
                     **{"ndcg@10": ("ndcg@10", "mean")}, time_s=("time_s", "mean"),
                     note=("note", "first")).reset_index())
        mean["dataset"] = mean["dataset"] + f" (mean of {seeds} seeds)"
        rows += mean.to_dict("records")
    return rows


def warm_up() -> float:
    """Seconds of one small Bradley-Terry fit that is large enough for the compiled loops:
    the first such fit in a process imports numba and loads them from the disk cache
    (compiles them on a machine's first run), a one-time cost kept out of the timings."""
    from crowdlearn.pairwise.bt import BradleyTerry

    data, _ = pairwise_crowd(400, 10, 100_000, frac_unreliable=0.0, seed=1)
    t0 = time.perf_counter()
    BradleyTerry(max_iter=2, tol=0).fit(Comparisons.from_frame(data.to_frame()))
    return time.perf_counter() - t0


def _time_ours(frame: pd.DataFrame, n_iter: int) -> dict:
    """One crowdlearn run: table build, fit (standard errors are lazy, so not in it), then
    the first read of ``stderr_``; wall and CPU seconds."""
    from crowdlearn.pairwise.bt import BradleyTerry

    t0, c0 = time.perf_counter(), time.process_time()
    table = Comparisons.from_frame(frame)
    t1 = time.perf_counter()
    est = BradleyTerry(max_iter=n_iter, tol=0).fit(table)
    t2, c2 = time.perf_counter(), time.process_time()
    est.stderr_
    t3, c3 = time.perf_counter(), time.process_time()
    return {"build": t1 - t0, "fit": t2 - t1, "stderr": t3 - t2, "cpu": c2 - c0,
            "cpu_stderr": c3 - c2, "n_iter": est.n_iter_}


def speed_rows(items: list[int], n_iter: int, use_crowdkit: bool, tmp: Path,
               repeat: int = 3) -> list[dict]:
    rows = []
    n = 10**6
    for n_items in items:
        data, planted = pairwise_crowd(n_items, 1000, n, frac_unreliable=0.0, seed=0)
        winner = np.where(data.outcome == 0, data.left, data.right)
        frame = pd.DataFrame({"worker": data.worker.astype(np.int64), "left": data.left.astype(np.int64),
                              "right": data.right.astype(np.int64), "label": winner.astype(np.int64)})
        # best of `repeat` runs on both sides: the machine is shared, and the fastest run is
        # the one least disturbed by other processes
        ours = min((_time_ours(frame, n_iter) for _ in range(repeat)),
                   key=lambda r: r["build"] + r["fit"])
        total = ours["build"] + ours["fit"]
        row = {"comparisons": n, "items": n_items, "iterations": n_iter,
               "crowdlearn bt: build table (s)": ours["build"],
               "crowdlearn bt: fit, no stderr (s)": ours["fit"],
               "crowdlearn bt: total (s)": total, "crowdlearn bt: total CPU (s)": ours["cpu"],
               "crowdlearn bt: stderr_ first read (s)": ours["stderr"],
               "crowdlearn bt: total with stderr (s)": total + ours["stderr"],
               "crowdlearn iterations run": ours["n_iter"]}
        if use_crowdkit:
            npz = tmp / f"speed_{n_items}.npz"
            np.savez(npz, left=data.left, right=data.right, winner=winner, worker=data.worker)
            runs = [crowdkit_pairwise_speed(str(npz), "BradleyTerry", max_iter=n_iter, tol="0",
                                            mem_gb=12.0) for _ in range(repeat)]
            failed = [r for r in runs if r["error"]]
            if failed:
                row["crowd-kit BradleyTerry (s)"] = float("nan")
                row["note"] = failed[0]["error"]
            else:
                res = min(runs, key=lambda r: r["time"])
                row["crowd-kit BradleyTerry (s)"] = res["time"]
                row["crowd-kit CPU (s)"] = res["cpu_time"]
                row["crowd-kit peak RSS (MB)"] = res["peak_rss_mb"]
                row["speed-up (wall)"] = res["time"] / total
                row["speed-up (CPU)"] = res["cpu_time"] / ours["cpu"]
                row["speed-up with stderr (wall)"] = res["time"] / (total + ours["stderr"])
        rows.append(row)
    return rows


def defaults_rows(n_items: int) -> list[dict]:
    rows = []
    for name in OURS:
        data, planted = pairwise_crowd(n_items, 1000, 10**6, frac_unreliable=0.3, seed=0)
        est, secs = _fit_ours(name, data)
        rows.append({"method": name, "comparisons": 10**6, "items": n_items,
                     "time (s)": secs, "iterations": est.n_iter_,
                     "spearman vs planted": spearman(est.scores_, planted.scores)})
    return rows


def gradient_check() -> dict:
    script = HERE / "investigations" / "_crowdkit_noisybt_grad.py"
    proc = subprocess.run([str(VENV_PY), str(script)], stdout=subprocess.PIPE, text=True,
                          check=True)
    return json.loads(proc.stdout)


def _gradient_markdown(rep: dict) -> str:
    blocks = pd.DataFrame(rep["blocks"]).T
    blocks.index.name = "parameter block"
    lines = [f"crowd-kit {rep['crowdkit']} `NoisyBradleyTerry._compute_gradient` against central "
             f"finite differences of its own loss `_compute_log_likelihood` (regularisation 0), "
             f"{rep['items']} items, {rep['workers']} workers, {rep['answers']} random "
             f"comparisons, {rep['points']} random points:", "",
             markdown_table(blocks, floatfmt=".3g"), "",
             "Diagnosis (max abs difference; ~1e-10 means exact):", ""]
    for k, v in rep["diagnosis"].items():
        lines.append(f"- {k}: {v:.3g}")
    reg = rep["regulariser"]
    lines += ["", f"Regulariser (ratio {reg['ratio']}): |gradient - fd| = "
              f"{reg['max_abs(gradient_reg - fd_reg)']:.3g}, |gradient + fd| = "
              f"{reg['max_abs(gradient_reg + fd_reg)']:.3g} (fd magnitude "
              f"{reg['max_abs(fd_reg)']:.3g}): the gradient is that of the regulariser with the "
              "opposite sign to the one the loss adds.", "",
             "Reading: the score gradients are right except the last item's; each worker's "
             "position-bias and skill derivatives are right for one answer but are assigned "
             "with `=` (so only the worker's last answer counts) at index `labels + w`, one "
             "below the parameter's `1 + labels + w`: worker 0's bias derivative overwrites "
             "the last score's, worker 0's skill derivative lands on the last worker's bias, "
             "and the last worker's skill gets none. crowdlearn's `noisy-bt` gradient is "
             "checked against finite differences in tests/test_pairwise.py."]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--write-results", action="store_true")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--speed-items", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--speed-iter", type=int, default=20)
    p.add_argument("--speed-repeat", type=int, default=3,
                   help="runs per library and size in the speed table; the fastest is reported")
    p.add_argument("--skip-crowdkit", action="store_true")
    p.add_argument("--skip-speed", action="store_true")
    p.add_argument("--skip-accuracy", action="store_true")
    args = p.parse_args(argv)
    use_ck = available() and not args.skip_crowdkit
    if not use_ck:
        print("crowd-kit venv missing or skipped: crowdlearn only", file=sys.stderr)

    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        acc_md = None
        if not args.skip_accuracy:
            acc = pd.DataFrame(accuracy_rows(args.seeds, use_ck, tmp))
            acc["note"] = acc.get("note", pd.Series("", index=acc.index)).fillna("")
            acc_md = markdown_table(acc.set_index("dataset"), floatfmt=".4f")
            print(acc_md)
        if not args.skip_speed:
            warm_s = warm_up()
            speed = pd.DataFrame(speed_rows(args.speed_items, args.speed_iter, use_ck, tmp,
                                            args.speed_repeat))
            speed_md = markdown_table(speed.set_index("comparisons"), floatfmt=".3f")
            print(speed_md)
            defaults = pd.DataFrame(defaults_rows(args.speed_items[0]))
            defaults_md = markdown_table(defaults.set_index("method"), floatfmt=".3f")
            print(defaults_md)
        grad_md = _gradient_markdown(gradient_check()) if use_ck else None
        if grad_md:
            print(grad_md)

    if args.write_results:
        intro = ("Kendall tau-b / Spearman / NDCG@10 against the truth (music_similarity_pairs: "
                 "truth groups, within queries; synthetic: planted scores). crowd-kit 1.4.2 "
                 "fitted in the same run. crowd-kit's `BradleyTerry` with its default `tol` "
                 "stops after 2 iterations whatever `n_iter` (its convergence check compares "
                 "an array with itself: `p_old = p_new` aliases), hence the `tol=0` row. "
                 "Defaults of crowdlearn's methods were set on synthetic crowds (prior_strength "
                 "1: Kendall tau flat or better than 0.01-0.1 on synthetic sets, by up to 0.1 "
                 "for crowd-bt / noisy-bt on sparse ones); the `prior_strength=0.01` row shows "
                 "what the prior costs on music_similarity_pairs, whose truth the data set's "
                 "authors derived from these same answers (its SOURCE.md), which favours the "
                 "unregularised fit. noisy-bt: hierarchical prior on each worker's skill and "
                 "position bias (population means fitted, precisions by empirical Bayes; "
                 "chosen on synthetic crowds only, section pairwise-noisybt-prior); the "
                 "`0.1.0 prior` row is the former prior `N(0, 10)`, for before/after. "
                 "crowd-kit's NoisyBradleyTerry starts from a random point and its L-BFGS-B "
                 "stops after a few iterations (its gradient is wrong, section "
                 "pairwise-crowdkit-noisybt-gradient), so its scores depend on "
                 "`random_state`: the rows at random_state 1-4 show by how much. Time: "
                 "seconds of fit (one run; shared 2-core machine).")
        if acc_md:
            write_section("pairwise-accuracy", intro + "\n\n" + acc_md)
        if not args.skip_speed:
            write_section("pairwise-speed",
                          f"Bradley-Terry, 10^6 comparisons (no ties), {args.speed_iter} iterations "
                          "in both libraries (crowd-kit `n_iter`, `tol=0`; crowdlearn `max_iter`, "
                          "`tol=0`). crowd-kit: `fit_predict` on an integer DataFrame (its own "
                          "factorisation included); crowdlearn: `Comparisons.from_frame` on the "
                          "same DataFrame + `fit`, **standard errors not included** in `fit` "
                          "and `total` (`stderr_` is computed on first read; that read is its "
                          "own column, and `total with stderr` / `speed-up with stderr` "
                          "include it). Best of "
                          f"{args.speed_repeat} runs per library and size. crowdlearn timed after "
                          f"one warm-up fit ({warm_s:.2f} s: it imports numba and loads the "
                          "compiled loops, once per process). One BLAS thread, one thread in "
                          "both libraries; CPU seconds are the steadier measure on a shared "
                          "machine. crowd-kit's per-iteration cost and memory grow "
                          "with items^2 (dense win matrix), crowdlearn's with distinct pairs.\n\n"
                          + speed_md + "\n\nEvery crowdlearn pairwise method with its defaults "
                          "at 10^6 comparisons (30% reversing workers):\n\n" + defaults_md)
        if grad_md:
            write_section("pairwise-crowdkit-noisybt-gradient", grad_md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
