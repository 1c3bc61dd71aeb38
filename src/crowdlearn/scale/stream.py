"""Out-of-core truth inference on one machine: answer tables larger than memory.

The answers are read in chunks (Parquet record batches, CSV chunks) and never all held:

1. **Codes** (one pass): the distinct worker ids and label values, coded as in memory
   (:class:`~crowdlearn.scale.coding.Coding`), and the number of answers.
2. **Buckets** (one pass): each answer goes to bucket ``hash(task) mod B`` on disk, so all
   answers of a task share a bucket whichever file or chunk they came from; ``B`` is chosen
   so that a bucket holds about ``chunk_answers`` answers.  Each bucket is then coded once
   (its tasks sorted, local codes) into ``.npy`` arrays.
3. **Iterations**: every round of the method's program loads one bucket at a time, runs the
   step and adds its statistics to a running sum.  Per-partition state (GLAD's task
   easiness) is kept on disk beside the bucket.
4. **Results** are written bucket by bucket.

Memory is bounded by the worker model plus one bucket (and, in step 1, the distinct ids):
it does not grow with the number of answers.  Disk: about 12 bytes per answer for the coded
buckets, plus the task ids once.
"""

from __future__ import annotations

import glob
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd

from ..core.data import CrowdLabels
from ..core.ids import factorize_ids, row_list
from ..core.tables import require_columns, unclosed_quote_error
from ..core.kernels import resolve_n_jobs
from .coding import Coding, Columns, bucket_of, strip_columns
from .driver import apply_output, collect_results, fit_program, running_sum
from .programs import Round

__all__ = ["fit_stream", "answer_files", "read_chunks", "write_frame", "CHUNK_ANSWERS"]

#: default answers per chunk read and per bucket (about 50 MB of coded answers)
CHUNK_ANSWERS = 4_000_000

_PARQUET = (".parquet", ".pq")
_TEXT = (".csv", ".tsv")


def answer_files(source: Any) -> list[Path]:
    """The answer files of ``source``: a file, a folder (its Parquet/CSV files, recursively),
    a glob pattern, or a list of those; sorted, so a fit reads them in a fixed order."""
    items = list(source) if isinstance(source, (list, tuple)) else [source]
    files: list[Path] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix.lower() in _PARQUET + _TEXT)
        elif path.exists():
            found = [path]
        else:
            found = sorted(Path(p) for p in glob.glob(str(item), recursive=True))
        if not found:
            raise FileNotFoundError(f"{item}: no answer files (Parquet or CSV) there")
        files.extend(found)
    for f in files:
        if f.suffix.lower() not in _PARQUET + _TEXT:
            raise ValueError(f"{f}: streaming reads Parquet (.parquet) or CSV/TSV files")
    return files


def read_chunks(files: list[Path], columns: Columns, chunk_answers: int) -> Iterator[tuple[str, pd.DataFrame]]:
    """The answers of ``files`` as ``(where, frame)``: frames of at most ``chunk_answers``
    rows in file order, ``where`` naming the file and rows for error messages.

    CSV ids and labels are read as text, as ``crowdlearn aggregate`` reads them; Parquet
    columns keep their types.  A missing value raises ``ValueError`` naming where it is.
    """
    for f, frame in _raw_chunks(files, columns, chunk_answers):
        frame = strip_columns(frame, columns)  # "t1 " is "t1", as in memory; a blank is missing
        first = frame.index[0] if len(frame) else 0
        where = f"{f}, answers {first:,} to {first + len(frame) - 1:,} (0-based)"
        for col in columns.names:
            bad = np.array(frame[col].isna())
            if bad.any():  # CSV rows by file line (header = line 1), as the in-memory reader
                bad[int(np.argmax(bad)) + 1:] = False
                at = row_list(bad, first + 2) if f.suffix.lower() not in _PARQUET else \
                    f"row position {first + int(np.argmax(bad)):,}"
                raise ValueError(f"{f}: missing value in column {col!r} at {at}")
        yield where, frame


def _raw_chunks(files: list[Path], columns: Columns, chunk_answers: int) -> Iterator[tuple[Path, pd.DataFrame]]:
    for f in files:
        if f.suffix.lower() in _PARQUET:
            import pyarrow.parquet as pq

            try:
                pf = pq.ParquetFile(f)
            except Exception as exc:  # pyarrow's ArrowInvalid / OSError: say which file
                raise ValueError(f"{f}: not a readable Parquet file ({exc})") from None
            require_columns(pd.DataFrame(columns=pf.schema_arrow.names), columns.names, f)
            start = 0
            for batch in pf.iter_batches(batch_size=chunk_answers, columns=columns.names):
                frame = batch.to_pandas()
                frame.index = pd.RangeIndex(start, start + len(frame))
                start += len(frame)
                yield f, frame
        else:
            sep = "\t" if f.suffix.lower() == ".tsv" else ","
            refuse_utf16(f, "stream")
            try:  # the header first: a missing column is named as the in-memory reader does
                header = pd.read_csv(f, sep=sep, nrows=0)
            except pd.errors.EmptyDataError:
                raise ValueError(f"{f}: the file is empty") from None
            except UnicodeDecodeError as exc:
                raise not_utf8(f, exc, "stream") from None
            except ValueError as exc:
                raise parse_error(f, exc, sep) from None
            require_columns(header, columns.names, f)
            try:
                reader = pd.read_csv(f, sep=sep, dtype=str, keep_default_na=False, na_values=[""],
                                     usecols=columns.names, chunksize=chunk_answers)
            except ValueError as exc:
                raise ValueError(f"{f}: {exc}") from None
            with reader:
                try:
                    for frame in reader:  # pandas numbers the rows of a file across chunks
                        yield f, frame
                except UnicodeDecodeError as exc:  # found chunks in: too late to decode afresh
                    raise not_utf8(f, exc, "stream") from None
                except pd.errors.ParserError as exc:
                    raise parse_error(f, exc, sep) from None


def parse_error(path: Path, exc: ValueError, sep: str) -> ValueError:
    """The one-line error of a CSV/TSV file pandas cannot parse, starting with the file:
    a quoted value that never ends is named by the line of its quote, as the in-memory
    reader names it (pandas says "EOF inside string starting at row N", a record number
    that is not the file line, of the chunk or partition it was reading)."""
    located = unclosed_quote_error(exc, path, sep)
    return located if located is not None else ValueError(f"{path}: {exc}")


def not_utf8(where: Any, exc: UnicodeDecodeError | None, engine: str) -> ValueError:
    """The error of CSV/TSV answers that are not UTF-8, for the ``engine`` (stream, dask)
    that read them: the in-memory reader guesses the encoding from the whole file, which a
    read in chunks or partitions cannot do.  ``exc`` None: UTF-16 without a byte-order mark
    (:func:`refuse_utf16`), which UTF-8 decoding does not refuse."""
    if exc is None:
        found = " (UTF-16 without a byte-order mark)"
    else:  # an error raised on a Dask worker comes back without the bytes it was decoding
        found = f" (byte 0x{exc.object[exc.start]:02x})" if isinstance(exc.object, bytes) else ""
    return ValueError(f"{where}: not UTF-8 text{found}; the {engine} engine reads UTF-8 only: save "
                      "the file as UTF-8, or aggregate it without --engine")


def refuse_utf16(path: Path, engine: str) -> None:
    """Raise :func:`not_utf8`'s error for a file of UTF-16 text without a byte-order mark:
    pandas reads it as UTF-8 (its NUL bytes are valid UTF-8), and its header's names as
    ``t\x00a\x00s\x00k\x00``, which only said that the columns were missing."""
    from ..io.common import sniff_utf16

    if sniff_utf16(path):
        raise not_utf8(path, None, engine)


def write_frame(frame: pd.DataFrame, path: str | os.PathLike) -> None:
    """Write a result table (Parquet or CSV by extension).  Task ids of mixed types, which
    Parquet cannot store in one column, are written as text."""
    path = str(path)
    if path.endswith(_PARQUET):
        try:
            frame.to_parquet(path, index=False)
        except Exception:  # pyarrow's type errors for mixed object columns
            frame.assign(task=frame["task"].astype(str), label=frame["label"].astype(str)).to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False, sep="\t" if path.endswith(".tsv") else ",")


class StreamEngine:
    """Coded buckets on disk, loaded one at a time (see the module docstring)."""

    def __init__(self, folder: Path, n_buckets: int, coding: Coding) -> None:
        self.folder = folder
        self.n_buckets = n_buckets
        self.coding = coding
        self.kept: list[int] = []  # buckets with answers
        self.stateful = False

    def _file(self, b: int, what: str) -> Path:
        return self.folder / f"bucket-{b:05d}.{what}"

    def build(self, files: list[Path], columns: Columns, chunk_answers: int) -> None:
        """Pass 2: answers to bucket files, then each bucket coded into .npy arrays."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        writers: dict[int, Any] = {}
        try:
            for where, chunk in read_chunks(files, columns, chunk_answers):
                worker, label = self.coding.codes(chunk, columns, where)
                # tasks keep their ids until their bucket is complete, then get local codes
                bucket = bucket_of(chunk[columns.task], self.n_buckets)
                order = np.argsort(bucket, kind="stable")
                bounds = np.searchsorted(bucket[order], np.arange(self.n_buckets + 1))
                task_col = chunk[columns.task].to_numpy()
                for b in range(self.n_buckets):
                    rows = order[bounds[b]:bounds[b + 1]]
                    if rows.size == 0:
                        continue
                    table = pa.table({"task": pa.array(task_col[rows]), "worker": worker[rows], "label": label[rows]})
                    if b not in writers:
                        writers[b] = pq.ParquetWriter(self._file(b, "parquet"), table.schema)
                    writers[b].write_table(table)
        finally:
            for w in writers.values():
                w.close()
        for b in sorted(writers):
            part = pq.read_table(self._file(b, "parquet")).to_pandas()
            task, tasks = factorize_ids(part["task"], "task")
            order = np.argsort(task, kind="stable")
            np.save(self._file(b, "task.npy"), task[order].astype(np.int32))
            np.save(self._file(b, "worker.npy"), part["worker"].to_numpy()[order].astype(np.int32))
            np.save(self._file(b, "label.npy"), part["label"].to_numpy()[order].astype(np.int32))
            pd.DataFrame({"task": tasks}).to_parquet(self._file(b, "tasks.parquet"))
            os.remove(self._file(b, "parquet"))
            self.kept.append(b)

    def block(self, b: int, with_ids: bool = False) -> CrowdLabels:
        task = np.load(self._file(b, "task.npy"))
        n = int(task[-1]) + 1 if task.size else 0
        tasks = pd.read_parquet(self._file(b, "tasks.parquet"))["task"] if with_ids else pd.RangeIndex(n)
        return CrowdLabels(task, np.load(self._file(b, "worker.npy")), np.load(self._file(b, "label.npy")),
                           tasks=pd.Index(tasks), workers=self.coding.workers, classes=self.coding.classes)

    def _state(self, b: int) -> Any:
        path = self._file(b, "state.npz")
        if not path.exists():
            return None
        with np.load(path) as z:
            return {k: z[k] for k in z.files}

    def map_reduce(self, rnd: Round, stateful: bool = False) -> dict:
        acc = None
        self.stateful = stateful
        for b in self.kept:
            state, stats = rnd.step(self.block(b), self._state(b) if stateful else None, rnd.params)
            if stateful:
                np.savez(self._file(b, "state.npz"), **state)
            acc = running_sum(acc, stats)
        return acc

    def outputs(self, rnd: Round, random_state: Any) -> Iterator[pd.DataFrame]:
        for b in self.kept:
            yield apply_output(self.block(b, with_ids=True), self._state(b) if self.stateful else None, rnd, random_state)


def fit_stream(estimator, source: Any, *, columns: Columns = Columns(), classes: Any = None,
               out: str | os.PathLike | None = None, chunk_answers: int = CHUNK_ANSWERS,
               workdir: str | os.PathLike | None = None, verbose: bool | None = None,
               callback: Any = None, on_stage: Any = None) -> pd.DataFrame | list[str]:
    """Fit ``estimator`` on answer files too large for memory, one chunk at a time.

    Parameters
    ----------
    estimator : an unfitted ``mv``, ``wmv``, ``wawa``, ``zbs``, ``ds``, ``onecoin``, ``ccds``, ``glad`` or ``mace``
        Receives the worker model; with ``out=None`` also ``labels_`` and ``probas_``.
    source : a Parquet/CSV file, a folder, a glob pattern, or a list of them
    columns : Columns
        The task, worker and label column names.
    classes : list, optional
        The class set and order (default: the labels seen, sorted).
    out : path, optional
        Where to write the ``task, label, confidence, p_<class>...`` tables: a folder (one
        ``part-NNNNN.parquet`` per bucket) or one ``.csv``/``.tsv`` file written bucket by
        bucket; the written files are returned.  Default: gathered into one DataFrame.
    chunk_answers : int
        Answers per chunk read and (about) per bucket: the memory bound.
    workdir : path, optional
        Where the coded buckets go (default: a temporary folder, removed afterwards).
        They take about 12 bytes per answer.
    verbose, callback : as in ``fit`` (the iterations).
    on_stage : callable, optional
        Called with a line of text as each pass over the files starts (the CLI prints it).
    """
    stage = on_stage or (lambda text: None)
    if chunk_answers < 1:
        raise ValueError(f"chunk_answers must be positive, got {chunk_answers}")
    files = answer_files(source)
    stage(f"reading the ids of {len(files)} file(s)")
    # pass 1: distinct workers and labels, and the number of answers
    workers, labels, n_answers = [], [], 0
    for _, chunk in read_chunks(files, columns, chunk_answers):
        workers.append(pd.Index(pd.unique(chunk[columns.worker])))
        labels.append(pd.Index(pd.unique(chunk[columns.label])))
        n_answers += len(chunk)
        if len(workers) > 8:  # keep the id lists short: merge as we go
            workers = [workers[0].append(workers[1:]).unique()]
            labels = [labels[0].append(labels[1:]).unique()]
    if n_answers == 0:
        raise ValueError(f"{files[0]}: no rows" if len(files) == 1 else
                         f"no rows in any of the {len(files)} files ({files[0]}, ...)")
    coding = Coding.from_values(workers[0].append(workers[1:]).unique(), labels[0].append(labels[1:]).unique(), classes)
    n_buckets = max(1, math.ceil(n_answers / chunk_answers))
    tmp = None
    if workdir is None:
        tmp = tempfile.mkdtemp(prefix="crowdlearn-stream-")
        folder = Path(tmp)
    else:
        folder = Path(workdir)
        folder.mkdir(parents=True, exist_ok=True)
    try:
        engine = StreamEngine(folder, n_buckets, coding)
        stage(f"{n_answers:,} answers, {coding.n_workers:,} workers, {coding.n_classes} classes: "
              f"hashing them into {n_buckets} bucket(s) under {folder}")
        engine.build(files, columns, chunk_answers)
        stage(f"fitting {type(estimator).__name__}, one bucket at a time")
        threads = resolve_n_jobs(getattr(estimator, "n_jobs", None))
        program = fit_program(estimator, engine, coding, threads=threads, verbose=verbose, callback=callback)
        frames = engine.outputs(program.output(), getattr(estimator, "random_state", 0))
        stage("writing the results" if out is not None else "gathering the results")
        if out is None:
            return collect_results(estimator, program, list(frames))
        return _write_all(frames, Path(out))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _write_all(frames: Iterator[pd.DataFrame], out: Path) -> list[str]:
    """A folder of Parquet parts, or one CSV/TSV file appended bucket by bucket."""
    if out.suffix.lower() in _TEXT:
        out.parent.mkdir(parents=True, exist_ok=True)
        sep = "\t" if out.suffix.lower() == ".tsv" else ","
        with open(out, "w", newline="") as fh:
            for i, frame in enumerate(frames):
                frame.to_csv(fh, index=False, header=i == 0, sep=sep)
        return [str(out)]
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, frame in enumerate(frames):
        path = out / f"part-{i:05d}.parquet"
        write_frame(frame, path)
        paths.append(str(path))
    return paths
