"""Truth inference on a Dask cluster: the answers stay partitioned on the workers.

One fit, for a ``dask.dataframe`` of answers (for instance ``dd.read_parquet`` on a folder):

1. **Codes.** The distinct worker ids and label values are found by a distributed
   ``drop_duplicates`` (only O(workers + classes) values reach the client: the size of the
   worker model the client holds anyway) and coded as in memory
   (:class:`~crowdlearn.scale.coding.Coding`).  Task ids are never coded globally.
2. **One shuffle.** A hash shuffle on the task column puts all answers of a task in one
   partition; each partition is then coded into a block (local task codes, global worker
   and class codes) on its worker and persisted there.  Empty partitions are dropped.
3. **Iterations.** Every round of the method's :class:`~crowdlearn.scale.programs.Program`
   is one ``client.map`` of the step over the blocks (the round's parameters stored once on
   the cluster, fetched once by each worker) and one tree reduction of the statistics:
   first the partitions each worker holds, on that worker, then the workers' sums (fan-in
   :data:`FAN_IN`).  Only the summed statistics (a ``W*K x K`` count table for
   Dawid-Skene) come back to the client, which does the M-step.
4. **Results.** Each partition's ``task, label, confidence, p_<class>`` table is written by
   its worker (``out``: a folder, one Parquet file per partition) or gathered.

Failures: a worker lost mid-fit makes the scheduler recompute the lost blocks from their
lineage (the read and the shuffle), so the fit finishes with the same result; when that is
impossible the round's error is raised as :class:`DaskFitError`, naming the round.  No
result is ever returned from part of the partitions: every round sums all of them.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import pandas as pd

from ..core.data import CrowdLabels
from ..core.tables import column_hint, require_columns, unclosed_quote_error
from .coding import Coding, Columns, strip_columns
from .driver import apply_output, collect_results, fit_program
from .programs import Round, combine_all
from .stream import not_utf8, parse_error, refuse_utf16

__all__ = ["fit_dask", "DaskFitError", "FAN_IN"]

#: statistics of this many partitions (or partial sums) are added in one reduction task
FAN_IN = 8


class DaskFitError(RuntimeError):
    """A round of a Dask fit failed (a lost worker whose data could not be recomputed, ...)."""


def _encode(frame: pd.DataFrame, coding: Coding, columns: Columns, index: int) -> CrowdLabels | None:
    return coding.encode(frame, columns, f"partition {index}")


def _identity(value: Any) -> Any:
    return value


def _n_labels(block: CrowdLabels | None) -> int:
    return 0 if block is None else block.n_labels


def _apply(block: CrowdLabels, state: Any, step, params: Any) -> tuple[Any, dict]:
    return step(block, state, params)


def _stats_of(*outs: tuple[Any, dict]) -> dict:
    return combine_all([o[1] for o in outs])


def _state_of(out: tuple[Any, dict]) -> Any:
    return out[0]


def _sum(*parts: dict) -> dict:
    return combine_all(list(parts))


def _output(block: CrowdLabels, state: Any, step, params: Any, random_state: Any) -> pd.DataFrame:
    return apply_output(block, state, Round(step, params), random_state)


def _write_part(frame: pd.DataFrame, path: str) -> str:
    from .stream import write_frame

    write_frame(frame, path)
    return path


class DaskEngine:
    """Blocks persisted on a Dask cluster (see the module docstring)."""

    def __init__(self, client, blocks: list) -> None:
        self.client = client
        self.blocks = blocks
        self.states: list[Any] = [None] * len(blocks)
        self.round = 0

    def _share(self, value: Any):
        """``value`` stored once on the cluster; every worker fetches it once per round.

        Not a ``broadcast=True`` scatter: that waits for every worker to hold a copy, and
        hangs when one has just died.
        """
        if value is None:
            return None
        # scatter a one-element list: a bare tuple would be scattered element by element
        return self.client.scatter([value], hash=False)[0]

    def map_reduce(self, rnd: Round, stateful: bool = False) -> dict:
        """One round; retried once when it fails for a cluster reason (a lost worker took
        the round's scattered parameters with it: they have no lineage to recompute from)."""
        self.round += 1
        for attempt in (0, 1):
            try:
                return self._map_reduce(rnd, stateful)
            except (ValueError, TypeError, MemoryError):
                raise  # the user's data or parameters: the step's own message says what is wrong
            except Exception as exc:
                if attempt:
                    raise DaskFitError(f"round {self.round} of the Dask fit failed twice: "
                                       f"{type(exc).__name__}: {exc}") from exc

    def _map_reduce(self, rnd: Round, stateful: bool) -> dict:
        client = self.client
        params = self._share(rnd.params)
        outs = client.map(_apply, self.blocks, self.states, step=rnd.step, params=params, pure=False)
        # first level: the partitions of one worker are summed on that worker, so only one
        # statistics table per worker (not per partition) crosses the network
        held = client.who_has(self.blocks)
        groups: dict[str, list] = {}
        for block, out in zip(self.blocks, outs):
            where = held.get(block.key) or ("",)
            groups.setdefault(where[0], []).append(out)
        level = []
        for addr, group in sorted(groups.items()):
            for i in range(0, len(group), FAN_IN):
                place = {"workers": [addr], "allow_other_workers": True} if addr else {}
                level.append(client.submit(_stats_of, *group[i:i + FAN_IN], pure=False, **place))
        while len(level) > 1:
            level = [client.submit(_sum, *level[i:i + FAN_IN], pure=False) for i in range(0, len(level), FAN_IN)]
        stats = level[0].result()
        if stateful:  # only once the round has succeeded: a retry starts from the old states
            self.states = client.map(_state_of, outs, pure=False)
        return stats

    def outputs(self, rnd: Round, random_state: Any) -> list:
        """Futures of the partitions' result tables."""
        return self.client.map(_output, self.blocks, self.states, step=rnd.step,
                               params=self._share(rnd.params), random_state=random_state, pure=False)


#: a partition holds at most about this many answers (its block, posteriors and scratch
#: arrays then take about 1.5 GB): larger ones made Dask spill to disk at 10^8 answers
MAX_PARTITION_ANSWERS = 15_000_000


def default_partitions(n_answers: int, coding: Coding, given: int, threads: int) -> int:
    """Partitions after the shuffle: at least one per worker thread (every core works) and
    one per :data:`MAX_PARTITION_ANSWERS` answers (memory); otherwise no more than the input
    has, nor than makes each partition hold 4 answers per cell of the ``W*K x K``
    statistics table it sends every iteration (below that, adding up and moving the tables
    costs more than the answers' own work)."""
    cells = coding.n_workers * coding.n_classes ** 2
    return max(threads, -(-n_answers // MAX_PARTITION_ANSWERS), min(given, -(-n_answers // (4 * max(cells, 1)))))


def _as_dask_frame(answers: Any, columns: Columns):
    import dask.dataframe as dd

    if isinstance(answers, dd.DataFrame):
        return answers
    if isinstance(answers, pd.DataFrame):
        return dd.from_pandas(answers, npartitions=max(1, min(16, len(answers) // 100_000 + 1)))
    if isinstance(answers, str) and "://" in answers:  # s3://, gs://, hdfs://... read by fsspec
        if answers.rstrip("/").endswith((".csv", ".tsv", ".csv*", ".tsv*")):
            return dd.read_csv(answers, dtype=str, keep_default_na=False, na_values=[""], usecols=columns.names,
                               sep="\t" if ".tsv" in answers else ",")
        return dd.read_parquet(answers, columns=columns.names)
    if isinstance(answers, (str, os.PathLike, list, tuple)):
        from .stream import answer_files

        files = answer_files(answers)
        if all(str(f).endswith((".parquet", ".pq")) for f in files):
            return dd.read_parquet([str(f) for f in files], columns=columns.names)
        # dask samples the first file at once and wraps pandas' "Usecols do not match" in a
        # message of its own that names neither file nor column: read every header first, as
        # the stream engine does, so that a missing column is named with its file
        for f in files:
            refuse_utf16(f, "dask")
            try:
                header = pd.read_csv(f, sep="\t" if str(f).lower().endswith(".tsv") else ",", nrows=0)
            except pd.errors.EmptyDataError:
                raise ValueError(f"{f}: the file is empty") from None
            except pd.errors.ParserError as exc:  # an open quote in the header
                raise parse_error(f, exc, "\t" if str(f).lower().endswith(".tsv") else ",") from None
            require_columns(header, columns.names, f)
        # text ids stay text, as `crowdlearn aggregate` reads them
        return dd.read_csv([str(f) for f in files], dtype=str, keep_default_na=False, na_values=[""],
                           usecols=columns.names)
    raise TypeError(f"answers must be a dask or pandas DataFrame or a path of answer files, got {type(answers).__name__}")


def _unparsed(exc: ValueError, answers: Any) -> ValueError:
    """A CSV/TSV parse error raised by a partition, named by file (and, for a quoted value
    that never ends, by the line of its quote, found by reading the files again): pandas'
    message counts the records of the partition, not the lines of a file, and names none."""
    if isinstance(answers, (str, os.PathLike, list, tuple)):
        from .stream import answer_files

        files = [f for f in answer_files(answers) if f.suffix.lower() in (".csv", ".tsv")]
        for f in files:
            located = unclosed_quote_error(exc, f, "\t" if f.suffix.lower() == ".tsv" else ",")
            if located is not None:
                return located
        if len(files) == 1:
            return ValueError(f"{files[0]}: {exc}")
    return ValueError(f"{answers}: {exc}") if isinstance(answers, (str, os.PathLike)) else exc


def _located(exc: ValueError, answers: Any, columns: Columns) -> ValueError:
    """A missing value found by the coding (which sees distinct values, not rows), named by
    file and line when the answers are files: the streaming reader finds the first one."""
    if "missing value" not in str(exc) or not isinstance(answers, (str, os.PathLike, list, tuple)):
        return exc
    from .stream import answer_files, read_chunks

    try:
        for _ in read_chunks(answer_files(answers), columns, 1_000_000):
            pass
    except (ValueError, OSError) as located:
        return located if isinstance(located, ValueError) else exc
    return exc


def fit_dask(estimator, answers: Any, *, client=None, columns: Columns = Columns(), classes: Any = None,
             out: str | None = None, npartitions: int | None = None, verbose: bool | None = None,
             callback: Any = None, on_stage: Any = None) -> pd.DataFrame | list[str]:
    """Fit ``estimator`` on answers held by a Dask cluster.

    Parameters
    ----------
    estimator : an unfitted ``mv``, ``wmv``, ``wawa``, ``zbs``, ``ds``, ``onecoin``, ``ccds``, ``glad`` or ``mace``
        It receives the worker model (``confusions_``, ``skills_``, ``priors_``,
        ``history_``...) and, when the results are gathered (``out=None``), ``labels_`` and
        ``probas_`` as an in-memory fit does.
    answers : dask DataFrame, pandas DataFrame, or path(s) / glob / folder of Parquet or CSV files
    client : distributed.Client, optional
        Default: the current client (``distributed.get_client()``).
    columns : Columns
        The task, worker and label column names.
    classes : list, optional
        The class set and order (default: the labels seen, sorted).
    out : str, optional
        A folder: each partition's ``task, label, confidence, p_<class>...`` table is written
        there by its worker as ``part-NNNNN.parquet`` (a filesystem every worker can reach)
        and the list of files is returned.  Default: the tables are gathered and returned
        as one DataFrame sorted by task.
    npartitions : int, optional
        Partitions after the shuffle on tasks.  Default (:func:`default_partitions`): at least
        one per worker thread and one per 1.5 x 10^7 answers; otherwise at most as many as
        the input has, and few enough that each holds 4 answers per cell of the ``W*K x K``
        table it sends to its worker's sum every iteration.
    verbose, callback : as in ``fit`` (the iterations).
    on_stage : callable, optional
        Called with a line of text as each step of the set-up starts (the CLI prints it).
    """
    stage = on_stage or (lambda text: None)
    import dask
    from distributed import get_client

    client = client if client is not None else get_client()
    try:
        ddf = _as_dask_frame(answers, columns)
    except UnicodeDecodeError as exc:  # dask reads a sample of the first file here
        raise not_utf8(answers, exc, "dask") from None
    missing = [c for c in columns.names if c not in ddf.columns]
    if missing:
        raise ValueError(f"missing column(s) {missing}; the answers have columns {list(ddf.columns)}"
                         + column_hint(missing, ddf.columns))
    # text ids and labels stripped as in memory, before the shuffle hashes the task ids
    ddf = ddf[columns.names].map_partitions(strip_columns, columns)
    stage(f"coding the worker ids and labels of {ddf.npartitions} partition(s)")
    # the p2p shuffle moves Arrow tables, which refuse object columns of mixed types
    # (ids like 3 and "a"); the task-based shuffle pickles pandas frames and takes anything
    mixed = any(ddf[c].dtype == object for c in columns.names)
    shuffle_config = {"dataframe.shuffle.method": "tasks"} if mixed else {}
    with dask.config.set(scheduler=client, **shuffle_config):
        try:  # the first pass over every partition: where a byte that is not UTF-8 shows
            workers, labels, n_answers = dask.compute(ddf[columns.worker].drop_duplicates(),
                                                      ddf[columns.label].drop_duplicates(),
                                                      ddf.map_partitions(len).sum())
        except UnicodeDecodeError as exc:
            raise not_utf8(answers, exc, "dask") from None
        except pd.errors.ParserError as exc:
            raise _unparsed(exc, answers) from None
    if len(workers) == 0:
        raise ValueError("no crowd answers to aggregate")
    try:
        coding = Coding.from_values(workers, labels, classes)
    except ValueError as exc:
        raise _located(exc, answers, columns) from None
    stage(f"{coding.n_workers:,} workers, {coding.n_classes} classes: shuffling the answers by task")
    with dask.config.set(shuffle_config):
        npartitions = npartitions or default_partitions(int(n_answers), coding, ddf.npartitions,
                                                        sum(client.nthreads().values()) or 1)
        shuffled = ddf.shuffle(on=columns.task, npartitions=npartitions)
        parts = client.compute(shuffled.to_delayed())
    # the coding is a task's result, not scattered data: a block lost with its worker is
    # recomputed from its lineage, which must then still find the coding
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Ll]arge object")
        coding_f = client.submit(_identity, coding, pure=False)
    blocks = client.map(_encode, parts, coding=coding_f, columns=columns, index=list(range(len(parts))), pure=False)
    sizes = client.gather(client.map(_n_labels, blocks, pure=False))
    del parts  # the blocks hold what the fit needs; the frames can go
    blocks = [b for b, n in zip(blocks, sizes) if n > 0]
    engine = DaskEngine(client, blocks)
    stage(f"fitting {type(estimator).__name__} on {len(blocks)} partition(s)")
    program = fit_program(estimator, engine, coding, threads=1, verbose=verbose, callback=callback)
    frames = engine.outputs(program.output(), getattr(estimator, "random_state", 0))
    if out is not None:
        if "://" not in str(out):  # a URL (s3://...) has no folder to make
            os.makedirs(out, exist_ok=True)
        paths = [f"{str(out).rstrip('/')}/part-{i:05d}.parquet" for i in range(len(frames))]
        return client.gather(client.map(_write_part, frames, paths, pure=False))
    return collect_results(estimator, program, client.gather(frames))
