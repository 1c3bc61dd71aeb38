"""The ``crowdlearn`` command.

Sub-commands: ``aggregate``, ``preferences``, ``methods``, ``benchmark``, ``demo``, ``datasets``,
``simulate``, ``next``, ``report``; each lives in the module named for it (``methods``,
``datasets`` and ``demo`` in :mod:`.catalogue`), and what they share in :mod:`.common` and
:mod:`.gold`.  This module holds the argument parser and :func:`main`.  Bad input ends with
exit status 2 and one line ``crowdlearn: error: ...`` on stderr; nothing below this package
prints.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from .aggregate import cmd_aggregate
from .benchmark import cmd_benchmark
from .catalogue import cmd_datasets, cmd_demo, cmd_methods
from .common import UsageError, parse_params
from .next import cmd_next
from .preferences import cmd_preferences
from .report import cmd_report
from .simulate import cmd_simulate

__all__ = ["main", "build_parser", "UsageError", "parse_params"]


def _seed(text: str) -> int:
    """``--seed``: numpy seeds are integers in [0, 2^32)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**32), got {text!r}") from None
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**32), got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="crowdlearn", description="Learning from crowds.")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True)

    a = sub.add_parser(
        "aggregate", help="infer the truth of every task (class, number, ranking, clusters)",
        description="Aggregate crowd answers of any kind. The kind is the method's kind, else "
        "--kind, else read from the columns (left,right: pairwise; item_a,item_b: similarity; "
        "otherwise class labels). Output: class labels and ordinal "
        "task,label,confidence,p_<class>...; continuous task,estimate,stderr; multilabel "
        "task,label,confidence,p:<tag>...; pairwise item,score,rank,stderr; similarity "
        "item,cluster,confidence.")
    a.add_argument("input", help="CSV/TSV/Parquet/JSON Lines file of answers")
    a.add_argument("--method", default=None, help="registered method (default: the kind's default)")
    a.add_argument("--kind", default=None,
                   help="classification, continuous, ordinal, multilabel, pairwise or similarity")
    a.add_argument("--col", action="append", metavar="ROLE=COLUMN",
                   help="column of a role (e.g. left=first, group=query; a 'group' column groups "
                        "comparisons unless group= is given); repeatable")
    a.add_argument("--out", help="output .csv/.tsv/.parquet/.jsonl (default: CSV on stdout)")
    a.add_argument("--task-col", default="task")
    a.add_argument("--worker-col", default="worker")
    a.add_argument("--label-col", default="label")
    a.add_argument("--classes", help="comma-separated class set (multilabel: tag set), in output order "
                   "(ordinal: lowest first), a name with a comma in double quotes (default: the labels seen)")
    a.add_argument("--gold", help="file of task,truth; reports accuracy")
    a.add_argument("--format", default=None, metavar="NAME",
                   help="read a platform export: toloka, mturk, labelstudio, prodigy, argilla, "
                   "crowdflower, peerannot, cleanlab, or auto (detected from the content)")
    a.add_argument("--question", help="the export's question when it holds several")
    a.add_argument("--statuses", help="comma-separated assignment statuses kept "
                   "(default: the platform's accepted ones)")
    a.add_argument("--delimiter", help="multilabel: the separator of tags in a label (default |)")
    a.add_argument("--gold-lower-is-better", action="store_true",
                   help="pairwise gold 'item,truth' holds ranks or groups (1 = best), not "
                   "scores ('score' columns are scores and 'task,truth' ranks, as in benchmark)")
    a.add_argument("--seed", type=_seed, default=None)
    a.add_argument("--param", action="append", metavar="KEY=VALUE", help="estimator parameter")
    a.add_argument("--calibrate", action="store_true",
                   help="give the --gold tasks to the fit and calibrate on them the confidences "
                   "of class labels (CalibratedAggregator) or the standard errors of continuous "
                   "answers (CalibratedContinuous); reports what cross-fitting measures on them")
    a.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show what is being done and a bar of the iterations on stderr "
                   "(default: when stderr is a terminal; never when the CI variable is set)")
    a.add_argument("--group-col", help="class labels: report accuracy, positive rate, TPR/FPR/FNR "
                   "per value of this column (of the answers file, or of --tasks) on stderr")
    a.add_argument("--tasks", help="table with the task column and the --group-col column")
    a.add_argument("--positive", help="the positive class of the group report (default: the last class)")
    a.add_argument("--group-report", help="also write the per-group table here (CSV/Parquet/...)")
    a.add_argument("--engine", choices=("memory", "dask", "stream"), default="memory",
                   help="class labels beyond memory: 'dask' fits on a Dask cluster, 'stream' reads "
                   "the files chunk by chunk on this machine; INPUT may then be a folder or a glob "
                   "of Parquet/CSV files and --out a folder (methods: mv, wmv, wawa, zbs, ds, onecoin, ccds, glad, mace)")
    a.add_argument("--scheduler", help="--engine dask: address of a running scheduler (default: a local cluster)")
    a.add_argument("--workers", type=int, help="--engine dask: worker processes of the local cluster (default 2)")
    a.add_argument("--chunk-answers", type=int, default=4_000_000,
                   help="--engine stream: answers read at a time (the memory bound; default 4,000,000)")
    a.set_defaults(func=cmd_aggregate)

    pr = sub.add_parser(
        "preferences", help="aggregate preference annotations (which response is better) for DPO",
        description="Rows prompt,response_a,response_b,worker,label (label a, b or tie). Writes "
        "pair,prompt,response_1,response_2,p_1,p_2,p_tie,outcome (a response or tie),preferred,confidence; --dpo also writes "
        "prompt,chosen,rejected,confidence JSON Lines for a DPO trainer.")
    pr.add_argument("input", help="CSV/TSV/JSON Lines file of preference annotations")
    pr.add_argument("--method", default="crowd-bt", help="crowd-bt (default) or ds")
    pr.add_argument("--out", help="output table (default: CSV on stdout)")
    pr.add_argument("--dpo", help="also write DPO JSON Lines here")
    pr.add_argument("--min-confidence", type=float, default=0.5,
                    help="pairs whose preferred response has a lower probability are left out of --dpo")
    pr.add_argument("--seed", type=_seed, default=None)
    pr.add_argument("--param", action="append", metavar="KEY=VALUE",
                    help="parameter of the underlying method")
    pr.set_defaults(func=cmd_preferences)

    m = sub.add_parser("methods", help="list the registered methods: kind, needs, description")
    m.add_argument("--kind", help="only methods of this kind (classification, learning, "
                   "continuous, ordinal, multilabel, pairwise, similarity)")
    m.set_defaults(func=cmd_methods)

    b = sub.add_parser("benchmark", help="agreement with gold over dataset folders, any kind")
    b.add_argument("folders", nargs="+",
                   help="folders holding labels.csv (pairs.csv for comparisons) and truth.csv")
    b.add_argument("--methods", help="comma-separated method names (default: all of the kind)")
    b.add_argument("--kind", help="answer kind of every folder (default: each folder's SOURCE.md)")
    b.add_argument("--seed", type=_seed, default=0)
    b.set_defaults(func=cmd_benchmark)

    d = sub.add_parser("demo", help="aggregate a bundled real dataset with every method")
    d.add_argument("--dataset", default="zencrowd_us")
    d.add_argument("--methods", help="comma-separated method names (default: all)")
    d.add_argument("--seed", type=_seed, default=0)
    d.set_defaults(func=cmd_demo)

    ds = sub.add_parser("datasets", help="list the bundled datasets and those of a shared folder",
                        description="Name, kind, counts and a one-line description of every "
                        "dataset 'crowdlearn.datasets.load(name)' opens: the bundled ones and the "
                        "folders under --root (default $CROWDLEARN_SHARED_DATA or ../shared/data).")
    ds.add_argument("--root", help="folder of dataset folders in the shared format")
    ds.add_argument("--kind", help="only datasets of this answer kind")
    ds.add_argument("--sources", action="store_true", help="also print where each dataset is")
    ds.set_defaults(func=cmd_datasets)

    s = sub.add_parser("simulate", help="write a synthetic crowd with planted truth (any kind)")
    s.add_argument("--kind", default=None, help="classification (Dawid-Skene workers, the default), "
                   "continuous, ordinal, multilabel, pairwise (--tasks items, tasks x "
                   "labels-per-task comparisons) or similarity (--classes clusters)")
    s.add_argument("--tasks", type=int, default=1000)
    s.add_argument("--workers", type=int, default=50)
    s.add_argument("--classes", type=int, default=3)
    s.add_argument("--labels-per-task", type=int, default=5)
    s.add_argument("--spammers", type=float, default=0.0, help="fraction of uniform spammers")
    s.add_argument("--adversaries", type=float, default=0.0, help="fraction of adversaries")
    s.add_argument("--seed", type=_seed, default=0)
    s.add_argument("--out", required=True,
                   help="answers file (.csv/.tsv/.parquet/.jsonl), or a folder (existing, or "
                   "ending in /) to write as a dataset that 'benchmark' reads: labels.csv "
                   "(pairs.csv, similarity.csv), truth.csv and SOURCE.md")
    s.add_argument("--truth-out", help="also write the planted truth here: task,truth "
                   "(similarity item,truth; pairwise item,score, higher = better)")
    s.set_defaults(func=cmd_simulate)

    nx = sub.add_parser(
        "next", help="which tasks (and workers) to ask next, from the answers so far",
        description="Writes task,worker,score: the --budget tasks to label next, best first (distinct "
        "tasks; worker empty unless --workers lists who can be asked).")
    nx.add_argument("input", help="CSV/TSV/Parquet/JSON Lines file of the answers so far")
    nx.add_argument("--budget", type=int, required=True,
                    help="how many (task, worker) pairs; 0 writes the header only")
    nx.add_argument("--strategy", default="entropy", help="entropy (default), margin, eig, kg or random")
    nx.add_argument("--method", default="ds", help="truth-inference method refit on the answers")
    nx.add_argument("--tasks", help="file with the --task-col column: the pool to choose from "
                    "(default: the tasks answered so far; new tasks are scored with the class prior)")
    nx.add_argument("--workers", help="file with the --worker-col column: who can be asked now")
    nx.add_argument("--worker-strategy", default=None,
                    help="eig (default; the worker whose answer tells most about the task; with "
                    "--strategy eig or kg, task and worker are chosen together), eig-thompson, greedy, ucb, "
                    "thompson or epsilon (on the estimated accuracies)")
    nx.add_argument("--task-col", default="task")
    nx.add_argument("--worker-col", default="worker")
    nx.add_argument("--label-col", default="label")
    nx.add_argument("--out", help="output .csv/.tsv/.parquet/.jsonl (default: CSV on stdout)")
    nx.add_argument("--seed", type=_seed, default=None)
    nx.set_defaults(func=cmd_next)

    rp = sub.add_parser("report", help="one self-contained HTML page of a fit (workers, confusions, "
                        "confidence, reliability against gold, convergence, method comparison)")
    rp.add_argument("input", help="CSV/TSV/Parquet/JSON Lines file of class-label answers")
    rp.add_argument("--method", action="append", help="method (repeat to compare; the first is "
                    "the page's subject; default ds)")
    rp.add_argument("--gold", help="file of task,truth: accuracy, log-loss and a reliability diagram")
    rp.add_argument("--out", required=True, help="the .html file to write")
    rp.add_argument("--task-col", default="task")
    rp.add_argument("--worker-col", default="worker")
    rp.add_argument("--label-col", default="label")
    rp.add_argument("--seed", type=_seed, default=None)
    rp.set_defaults(func=cmd_report)
    return p


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning of a method as one line, as errors are (not the file, line and source of
    the call that raised it)."""
    text = str(message).strip().splitlines()
    print(f"crowdlearn: warning: {text[0] if text else category.__name__}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings():  # restores the default display on the way out
            if not args.debug:
                warnings.showwarning = _show_warning
            return args.func(args)
    except BrokenPipeError:  # the reader went away (`| head`): not an error of ours
        sys.stderr = open(os.devnull, "w")  # silence the flush at interpreter exit
        return 0
    except (ValueError, TypeError, KeyError, FileNotFoundError, ImportError, OSError) as exc:
        if args.debug:
            raise
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"crowdlearn: error: {msg}", file=sys.stderr)
        return 2
    except MemoryError:
        print("crowdlearn: error: out of memory", file=sys.stderr)
        return 2
    except Exception as exc:  # pragma: no cover - last resort: one line, not a traceback
        if args.debug:
            raise
        print(f"crowdlearn: internal error ({type(exc).__name__}): {exc}; rerun with --debug", file=sys.stderr)
        return 1
