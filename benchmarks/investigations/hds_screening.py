"""Does abandoning a lagging EM start change what ``hds`` computes?

``HierarchicalDawidSkene`` runs EM from majority vote and from the spectral moment estimate.
A later start more than ``EVIDENCE_MARGIN`` nats behind the kept one after ``SCREEN_ITER``
iterations is abandoned there (a speed setting).  This script fits ``hds`` twice on every
crowd below, once as shipped and once with ``SCREEN_ITER = max_iter`` (every start run to the
end, the behaviour before the rule), and counts the crowds whose posteriors differ, how
many starts were abandoned, and the CPU time of both.

Crowds: the 16 categorical sets of ../shared/data, the same thinned to 2 and 3 answers per
task (``auto_scoring.real_sets``), the simulated grid of ``model_choice.crowds``, the
few-answers crowds of ``auto_scoring.few_sets`` and the sparse crowds of ``hds_sparse`` at 2,
3 and 5 answers per task.  No gold is read: the question is whether the two rules give the
same fit.  Printed only (RESULTS section 9, "Time").

    python benchmarks/investigations/hds_screening.py
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import auto_scoring  # noqa: E402
import hds_sparse  # noqa: E402
from model_choice import crowds  # noqa: E402

from crowdlearn.aggregation import hierarchical_ds  # noqa: E402


def crowd_sets():
    yield from ((f"grid {scen} s{seed}", data) for (scen, seed), data in crowds().items())
    yield from auto_scoring.few_sets()
    for name, (k, groups) in hds_sparse.synthetic_scenarios().items():
        for per in (2, 3, 5):
            for seed in (0, 1, 2):
                yield f"sparse {name} {per} s{seed}", hds_sparse.crowd(400, k, groups, labels_per_task=per,
                                                                        seed=1000 + seed)
    yield from auto_scoring.real_sets()


def fit(data, screen: int):
    shipped = hierarchical_ds.SCREEN_ITER
    hierarchical_ds.SCREEN_ITER = screen
    try:
        t0 = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = hierarchical_ds.HierarchicalDawidSkene().fit(data)
        return est, time.process_time() - t0
    finally:
        hierarchical_ds.SCREEN_ITER = shipped


def main() -> int:
    n = differ = abandoned = 0
    seconds = {"shipped": 0.0, "every start to the end": 0.0}
    for name, data in crowd_sets():
        new, t_new = fit(data, hierarchical_ds.SCREEN_ITER)
        old, t_old = fit(data, 10**9)
        seconds["shipped"] += t_new
        seconds["every start to the end"] += t_old
        n += 1
        gone = int(new.starts_["error"].str.startswith("abandoned").sum())
        abandoned += gone
        gap = float(np.abs(new.probas_.to_numpy() - old.probas_.to_numpy()).max())
        if gap > 1e-9:
            differ += 1
            print(f"{name}: posteriors differ by up to {gap:.3g} (kept {new.init_!r}, before {old.init_!r})")
        elif gone:
            print(f"{name}: a start abandoned, same fit ({t_old:.2f} s -> {t_new:.2f} s)")
    print(f"{n} crowds: {differ} with different posteriors, {abandoned} starts abandoned; CPU seconds "
          + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
