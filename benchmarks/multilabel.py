"""Binary relevance over several aggregators on simulated multi-label crowds; time at 10^6.

Sections of RESULTS.md written with ``--write-results``:

* ``multilabel-synthetic``: crowds of :func:`crowdlearn.simulate.multilabel.multilabel_crowd`
  (1,000 tasks, 30 workers, 6 tags, tag prior 0.3, 5 answers per task), with and without
  30% spammers; Hamming loss, subset accuracy, micro and macro F1 against the planted tag
  sets, mean of seeds 0-2.
* ``multilabel-speed``: fit time at 10^6 answers (200,000 tasks, 1,000 workers, 6 tags).

Usage::

    python benchmarks/multilabel.py [--write-results] [--skip-speed]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from results_md import markdown_table, recording  # noqa: E402

from crowdlearn.diagnostics.multilabel_metrics import hamming_loss, macro_f1, micro_f1, subset_accuracy  # noqa: E402
from crowdlearn.multilabel.binary_relevance import BinaryRelevance  # noqa: E402
from crowdlearn.simulate.multilabel import multilabel_crowd  # noqa: E402

AGGREGATORS = ["mv", "wawa", "onecoin", "ds", "glad"]


def synthetic() -> None:
    rows = []
    for spam in (0.0, 0.3):
        for method in AGGREGATORS:
            scores = []
            for seed in range(3):
                data, planted = multilabel_crowd(n_tasks=1000, n_workers=30, n_tags=6, labels_per_task=5,
                                                 spammers=spam, seed=seed)
                pred = np.asarray(BinaryRelevance(method=method).fit(data).decisions_, dtype=np.int8)
                scores.append([hamming_loss(pred, planted.truth), subset_accuracy(pred, planted.truth),
                               micro_f1(pred, planted.truth), macro_f1(pred, planted.truth)])
            h, s, mi, ma = np.mean(scores, axis=0)
            rows.append({"spammers": f"{spam:.0%}", "method": f"binary-relevance (method={method})",
                         "Hamming loss": h, "subset accuracy": s, "micro F1": mi, "macro F1": ma})
    print("Simulated multi-label crowds (1,000 tasks, 30 workers, 6 tags, tag prior 0.3, 5 answers "
          "per task; sensitivity 0.6-0.95, specificity 0.8-0.98), mean of seeds 0-2:\n")
    print(markdown_table(pd.DataFrame(rows), ".4f", index=False))


def speed() -> None:
    data, planted = multilabel_crowd(n_tasks=200_000, n_workers=1_000, n_tags=6, labels_per_task=5, seed=0)
    rows = []
    for method in AGGREGATORS:
        t0 = time.process_time()
        est = BinaryRelevance(method=method).fit(data)
        secs = time.process_time() - t0
        rows.append({"method": f"binary-relevance (method={method})", "answers": data.n_answers,
                     "tags": data.n_tags, "CPU s": secs,
                     "Hamming loss": hamming_loss(np.asarray(est.decisions_, np.int8), planted.truth)})
    print("Fit time (process CPU seconds, defaults) at 10^6 answers "
          "(200,000 tasks, 1,000 workers, 6 tags; one fit per tag):\n")
    print(markdown_table(pd.DataFrame(rows), ".3f", index=False))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    args = ap.parse_args(argv)
    cmd = "python benchmarks/multilabel.py --write-results"
    with recording("multilabel-synthetic", args.write_results, cmd):
        synthetic()
    if not args.skip_speed:
        with recording("multilabel-speed", args.write_results, cmd):
            speed()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
