"""Fairness of crowd labels on recidivism_race (Dressel & Farid 2018), issue 17 item 5.

Per defendant race: majority vote (ties to "will not recidivate", the paper's rule), ``ds``,
and ``ds`` with worker confusions per race (``split_workers_by_group``); then the accuracy
against the demographic parity difference of per-group thresholds (``fair_thresholds``) on the
majority-vote posteriors, for strengths 0 to 1.  Groups: African-American, Caucasian, other.

Usage::

    python benchmarks/fairness.py [--write-results]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_md import markdown_table, write_section  # noqa: E402

from crowdlearn.core.io import load_folder  # noqa: E402
from crowdlearn.fairness import disparities, fair_thresholds, group_report, split_workers_by_group  # noqa: E402
from crowdlearn.registry import get_method  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-root", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)
    folder = args.data_root / "recidivism_race"
    data = load_folder(folder)
    race = pd.read_csv(folder / "tasks.csv", dtype=str).set_index("task")["race"].reindex(data.tasks)
    groups = race.where(race.isin(["African-American", "Caucasian"]), "other")
    truth = pd.Series(data.classes.take(data.truth), index=data.tasks)
    pos, neg = data.classes[1], data.classes[0]

    mv = get_method("mv")().fit(data)
    mv_labels = pd.Series(np.where(mv.probas_[pos] > 0.5, pos, neg), index=data.tasks)  # ties to 0
    fits = {"mv (ties to 0)": mv_labels, "ds": get_method("ds")().fit(data).labels_,
            "ds, confusions per race": get_method("ds")().fit(split_workers_by_group(data, groups)).labels_}
    parts = []
    for name, labels in fits.items():
        rep = group_report(labels.reindex(data.tasks), truth, groups, positive=pos)
        rep.insert(0, "method", name)
        parts.append(rep.reset_index())
    per_group = pd.concat(parts, ignore_index=True)[["method", "group", "tasks", "accuracy", "positive_rate", "fpr", "fnr"]]
    md = ("#### Per race (tasks = defendants; FPR/FNR against two-year recidivism; paper, race shown, "
          "black / white: accuracy 66.2 / 67.6%, FPR 40.0 / 26.2%, FNR 30.1 / 42.1%)\n\n"
          + markdown_table(per_group, floatfmt=".3f", index=False))
    rows = []
    for s in (0.0, 0.25, 0.5, 0.75, 1.0):
        lab = fair_thresholds(mv.probas_, groups, positive=pos, strength=s)
        d = disparities(group_report(lab, truth, groups, positive=pos))
        rows.append({"strength": s, "accuracy": float((lab == truth).mean()), **d})
    trade = pd.DataFrame(rows)
    md += ("\n\n#### Per-race thresholds on majority-vote posteriors: accuracy against disparity\n\n"
           + markdown_table(trade, floatfmt=".4f", index=False))
    print(md)
    if args.write_results:
        write_section("fairness-recidivism", md, "python benchmarks/fairness.py --write-results")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
