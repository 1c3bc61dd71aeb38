"""The answer table of the continuous kind: :class:`ContinuousAnswers`.

A continuous crowd answer is a number: a rating, a score, a coordinate.  The table stores L
answers as two ``int32`` code arrays (task, worker) and one ``float64`` value array, sorted by
task with CSR offsets ``task_ptr`` (the answers of task ``n`` are the slice
``task_ptr[n]:task_ptr[n + 1]``), like :class:`~crowdlearn.core.data.CrowdLabels`.  Ids live in
pandas Indexes; every array is read-only.  Memory is O(L + N).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..core.answer_table import AnswerTable, check_codes, freeze
from ..core.gold import keyed_gold, refuse_contradicting_gold
from ..core.ids import factorize_ids, positions_by_value, row_list, show_value, strip_frame, strip_text
from ..core.tables import column_hint

__all__ = ["ContinuousAnswers", "as_continuous_answers", "to_numbers"]


def to_numbers(values: pd.Series | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(float64 values, mask of entries that are not finite numbers).

    Text is parsed as a number after stripping blanks (files are read as text: ``"4.00"``,
    ``" 7"``, ``"1e-3"`` are numbers); booleans are not numbers; missing values, ``nan`` and
    ``inf`` are flagged, as a continuous answer or gold value must be a finite number.
    """
    s = pd.Series(values, copy=False)
    if pd.api.types.is_bool_dtype(s.dtype):
        return np.full(len(s), np.nan), np.ones(len(s), dtype=bool)
    if s.dtype == object:
        is_bool = s.map(lambda v: isinstance(v, (bool, np.bool_))).to_numpy(bool)
        text = s.where(~s.map(lambda v: isinstance(v, str)), s.astype(str).str.strip())
        num = pd.to_numeric(text.where(~is_bool, np.nan), errors="coerce")
    else:
        is_bool = np.zeros(len(s), dtype=bool)
        num = pd.to_numeric(s, errors="coerce")
    out = np.asarray(num, dtype=np.float64)
    bad = ~np.isfinite(out) | is_bool
    return out, bad


class ContinuousAnswers(AnswerTable):
    """Numeric crowd answers as an immutable, integer-coded long table sorted by task.

    Parameters
    ----------
    task, worker : array of int
        Codes of length L, ``0 <= task < n_tasks``, ``0 <= worker < n_workers``, sorted by
        task (use :meth:`from_codes` for unsorted codes).
    value : array of float
        The answers, finite numbers.
    tasks, workers : pandas.Index
        The identifiers behind the codes.
    truth : array of float, optional
        Gold value per task, ``NaN`` where unknown.
    features : array, shape (n_tasks, n_features), optional
        Item features aligned with ``tasks`` (end-to-end regression heads).

    Notes
    -----
    Files are read as text and every answer is parsed as a number (``4.00``, ``1e-3``); a
    value that is not a finite number (text, empty, ``nan``, ``inf``) is refused with one
    ``ValueError`` naming its row position (frames, 0-based) or file line (header = line 1).
    Repeated (task, worker) answers are kept.  A task listed through ``all_tasks`` may have
    no answer; estimators then give it the global prior.

    Text ids lose surrounding whitespace, as class labels' do
    (:func:`~crowdlearn.core.ids.strip_text`): ``" t1"`` and ``"t1"`` are one task, on
    every path (answers, gold, ``all_tasks``, feature rows), so gold still matches; an id of
    blanks is a missing value.
    """

    #: default column names of the roles, in order
    ROLES = ("task", "worker", "label")

    __slots__ = ("task", "worker", "value", "tasks", "workers", "task_ptr", "truth", "features",
                 "_cache")

    def __init__(self, task, worker, value, tasks, workers, truth=None, features=None) -> None:
        task = np.ascontiguousarray(task, dtype=np.int32)
        worker = np.ascontiguousarray(worker, dtype=np.int32)
        value = np.ascontiguousarray(value, dtype=np.float64)
        if not (len(task) == len(worker) == len(value)):
            raise ValueError("task, worker and value arrays must have the same length")
        if len(task) > 1 and np.any(task[1:] < task[:-1]):
            raise ValueError("task codes must be sorted; use ContinuousAnswers.from_codes")
        n, m = len(tasks), len(workers)
        check_codes((task, n, "task"), (worker, m, "worker"))
        bad = ~np.isfinite(value)
        if bad.any():
            raise ValueError(f"answers must be finite numbers; not at {row_list(bad)}")
        self.task, self.worker, self.value = task, worker, value
        self.tasks = pd.Index(tasks, name="task")
        self.workers = pd.Index(workers, name="worker")
        self.task_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(task, minlength=n), out=self.task_ptr[1:])
        if truth is not None:
            truth = np.array(truth, dtype=np.float64)
            if truth.shape != (n,):
                raise ValueError(f"truth must have one entry per task ({n}), got {truth.shape}")
            if np.isinf(truth).any():
                raise ValueError("truth values must be finite numbers (NaN = unknown)")
        self.truth = truth
        if features is not None:
            features = np.array(features)
            if features.ndim < 2 or features.shape[0] != n:
                raise ValueError(f"features must have one row per task: expected {n} rows, "
                                 f"got shape {features.shape}")
        self.features = features
        self._cache: dict[str, Any] = {}
        freeze(self.task, self.worker, self.value, self.task_ptr, self.truth, self.features)

    # ------------------------------------------------------------------ sizes
    @property
    def n_tasks(self) -> int:
        return len(self.tasks)

    @property
    def n_answers(self) -> int:
        return len(self.task)

    def __len__(self) -> int:
        return self.n_answers

    def __repr__(self) -> str:
        extra = []
        if self.truth is not None:
            extra.append(f"gold={int(np.isfinite(self.truth).sum())}")
        if self.features is not None:
            extra.append(f"features={self.features.shape[1:]}")
        tail = (", " + ", ".join(extra)) if extra else ""
        return (f"ContinuousAnswers(answers={self.n_answers}, tasks={self.n_tasks}, "
                f"workers={self.n_workers}{tail})")

    # ---------------------------------------------------------- derived data
    def labels_per_task(self) -> np.ndarray:
        return np.diff(self.task_ptr)

    def answers_per_worker(self) -> np.ndarray:
        return np.bincount(self.worker, minlength=self.n_workers)

    def truth_series(self) -> pd.Series | None:
        """Known gold values as a Series task -> value (None without truth)."""
        if self.truth is None:
            return None
        known = np.isfinite(self.truth)
        return pd.Series(self.truth[known], index=self.tasks[known], name="truth")

    def encode_gold(self, gold: Mapping[Hashable, Any] | pd.Series | None) -> np.ndarray:
        """Gold values per task code (NaN where unknown); tasks not in the table are ignored.

        ``gold`` is a Series or mapping keyed by task id (``fit(gold=...)``, ``from_frame``
        and ``with_truth`` read it here); an array or list names no task and is refused
        (:func:`~crowdlearn.core.gold.keyed_gold`).  Raises ``ValueError`` naming the first
        task whose gold is not a finite number, or a task given two different values
        (:func:`~crowdlearn.core.gold.refuse_contradicting_gold`; rows repeating one value,
        ``2`` and ``2.0``, are one gold).
        """
        out = np.full(self.n_tasks, np.nan)
        if gold is None:
            return out
        g = keyed_gold(gold, value="number", dtype=object)  # an array names no task: refused
        g = strip_text(g, index=True)  # ids as the answers'; a value of blanks is unknown
        g = g[g.notna().to_numpy()]
        values, bad = to_numbers(g)
        if bad.any():
            first = int(np.argmax(bad))
            raise ValueError(f"gold value {show_value(g.iloc[first])} of task {show_value(g.index[first])} "
                             "is not a finite number")
        refuse_contradicting_gold(g.index, values, shown=g.to_numpy())  # shown as given
        pos = positions_by_value(self.tasks, g.index, "the answers' tasks")  # 17 is "17"
        ok = pos >= 0
        out[pos[ok]] = values[ok]
        return out

    # ----------------------------------------------------------- constructors
    @classmethod
    def from_codes(cls, task, worker, value, *, n_tasks=None, n_workers=None, tasks=None,
                   workers=None, truth=None, features=None) -> "ContinuousAnswers":
        """Build from integer codes in any order (a stable sort by task is applied)."""
        task, worker = np.asarray(task), np.asarray(worker)
        value = np.asarray(value, dtype=np.float64)
        if n_tasks is None:
            n_tasks = len(tasks) if tasks is not None else int(task.max(initial=-1)) + 1
        if n_workers is None:
            n_workers = len(workers) if workers is not None else int(worker.max(initial=-1)) + 1
        if task.size and np.all(task[1:] >= task[:-1]):
            task, worker, value = task.copy(), worker.copy(), value.copy()
        else:
            order = np.argsort(task, kind="stable")
            task, worker, value = task[order], worker[order], value[order]
        return cls(task, worker, value,
                   tasks=pd.Index(tasks if tasks is not None else np.arange(n_tasks)),
                   workers=pd.Index(workers if workers is not None else np.arange(n_workers)),
                   truth=truth, features=features)

    @classmethod
    def from_frame(cls, df: pd.DataFrame, task: str = "task", worker: str = "worker",
                   label: str = "label", *, truth: Mapping[Hashable, Any] | pd.Series | None = None,
                   features: np.ndarray | pd.DataFrame | None = None,
                   all_tasks: Iterable[Hashable] | None = None,
                   first_line: int | None = None) -> "ContinuousAnswers":
        """Build from a long DataFrame with one row per answer.

        Parameters
        ----------
        df : DataFrame
            One row per crowd answer.
        task, worker, label : str
            Column names; ids may be any hashable values, the label column holds numbers (or
            text spelling numbers).
        truth : mapping or Series task -> number, optional
            Gold values (a subset of tasks is fine; NaN = unknown; gold of tasks not in the
            table is ignored), keyed by task id: an array or list is refused.
        features : array or DataFrame, optional
            Item features: an array with one row per task in ``self.tasks`` order, or a
            DataFrame aligned by task id on its index.
        all_tasks : iterable, optional
            Tasks to include even without answers (they get the global prior).
        first_line : int, optional
            The file line of the frame's first row (2 below a header): errors then name file
            lines instead of 0-based row positions.
        """
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"from_frame expects a pandas DataFrame, got {type(df).__name__}")
        cols = {"task": task, "worker": worker, "label": label}
        if len(set(cols.values())) < 3:
            raise ValueError(f"each role needs its own column; got {cols}")
        for col in cols.values():
            count = int(np.sum(df.columns == col))
            if count > 1:
                raise ValueError(f"column {col!r} appears {count} times in the table")
        missing = [c for c in cols.values() if c not in df.columns]
        if missing:
            raise ValueError(f"missing column(s) {missing}; the table has columns {list(df.columns)}"
                             + column_hint(missing, df.columns))
        if len(df) == 0 and all_tasks is None:
            raise ValueError("no crowd answers: the table is empty")
        # " t1" is the task "t1"; an empty (or blank) answer is missing, said as the class-label
        # reader says it, not shown as the nan it reads as; to_numbers parses the rest
        df = strip_frame(df, (task, worker, label))
        for col in (task, worker, label):
            bad = df[col].isna().to_numpy()
            if bad.any():
                raise ValueError(f"missing value in column '{col}' at {row_list(bad, first_line)}")
        values, bad = to_numbers(df[label])
        if bad.any():
            first = show_value(df[label].iloc[int(np.argmax(bad))])
            raise ValueError(f"column '{label}' must hold finite numbers: {first} at "
                             f"{row_list(bad, first_line)}")
        if all_tasks is not None:
            pool = pd.concat([strip_text(pd.Series(list(all_tasks), dtype=object)),
                              df[task].astype(object)], ignore_index=True)
            _, task_index = factorize_ids(pool.drop_duplicates(), "task")
            task_codes = task_index.get_indexer(df[task])
        else:
            task_codes, task_index = factorize_ids(df[task], "task")
        worker_codes, worker_index = factorize_ids(df[worker], "worker")
        feats = None
        if features is not None:
            if isinstance(features, pd.DataFrame):
                features = features.set_axis(strip_text(features.index))  # task ids as the answers'
                lacking = task_index.difference(features.index)
                if len(lacking):
                    raise ValueError(f"features lack rows for {len(lacking)} task(s), "
                                     f"e.g. {lacking[0]!r}")
                feats = features.loc[task_index].to_numpy()
            else:
                feats = np.asarray(features)
        out = cls.from_codes(task_codes, worker_codes, values, tasks=task_index,
                             workers=worker_index, features=feats)
        if truth is not None:
            out = out.with_truth(truth)
        return out

    @classmethod
    def from_records(cls, records: Iterable[tuple[Hashable, Hashable, Any]], **kwargs: Any):
        """Build from an iterable of (task, worker, value) tuples."""
        return cls.from_frame(pd.DataFrame(list(records), columns=list(cls.ROLES)), **kwargs)

    def with_truth(self, truth: Mapping[Hashable, Any] | pd.Series | None) -> "ContinuousAnswers":
        """A copy with gold values (NaN = unknown) replacing the current truth."""
        gold = None if truth is None else self.encode_gold(keyed_gold(truth, "truth", value="number",
                                                                       dtype=object))
        return type(self)(self.task, self.worker, self.value, self.tasks, self.workers,
                          truth=gold, features=self.features)

    # ------------------------------------------------------------- exporters
    def to_frame(self) -> pd.DataFrame:
        """Long DataFrame (task, worker, label) with the user's ids, in task order."""
        return pd.DataFrame({"task": self.tasks.take(self.task),
                             "worker": self.workers.take(self.worker),
                             "label": self.value.copy()})


def as_continuous_answers(data: Any) -> ContinuousAnswers:
    """``data`` itself, or a DataFrame with the default columns read as ContinuousAnswers."""
    if isinstance(data, ContinuousAnswers):
        return data
    if isinstance(data, pd.DataFrame):
        return ContinuousAnswers.from_frame(data)
    raise TypeError("expected ContinuousAnswers or a DataFrame with columns task, worker, label; "
                    f"got {type(data).__name__}")
