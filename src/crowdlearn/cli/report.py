"""``crowdlearn report``: one self-contained HTML page of a fit."""

from __future__ import annotations

import sys
import time

from .common import make_estimator
from .gold import read_label_gold, table_with_gold


def cmd_report(args) -> int:
    """``crowdlearn report``: the HTML page of a fit, with the other methods compared."""
    import pandas as pd

    from ..benchmarking import gold_accuracy
    from ..core.data import CrowdLabels
    from ..core.tables import check_writable, first_record_line, read_table
    from ..report import summarize

    check_writable(args.out, table=False)  # now, not after the fits
    cols = [args.task_col, args.worker_col, args.label_col]
    frame = read_table(args.input, columns=cols)
    truth = read_label_gold(args.gold, cols) if args.gold else None
    data = table_with_gold(args, lambda gold: CrowdLabels.from_frame(
        frame, *cols, truth=gold, first_line=first_record_line(args.input)), truth, frame[cols[0]])
    names = args.method or ["ds"]
    rows, main_fit = [], None
    for name in names:
        est = make_estimator(name, "classification", args.seed, {})
        t0 = time.perf_counter()
        est.fit(data)
        row = {"method": name, "seconds": time.perf_counter() - t0, "iterations": est.n_iter_,
               "converged": bool(est.converged_), "mean confidence": float(est.probas_.max(axis=1).mean())}
        if truth is not None:
            row["accuracy"] = gold_accuracy(est.labels_, data)
        rows.append(row)
        if main_fit is None:
            main_fit = (name, est)
    name, est = main_fit
    comparison = pd.DataFrame(rows).set_index("method") if len(rows) > 1 else None
    summarize(est, data).to_html(args.out, labels=data, comparison=comparison, title=f"crowdlearn report: {name}",
                                 summary={"iterations": est.n_iter_, "converged": est.converged_})
    print(f"report: {args.out} ({name}; {data.n_labels} answers, {data.n_tasks} tasks)", file=sys.stderr)
    return 0
