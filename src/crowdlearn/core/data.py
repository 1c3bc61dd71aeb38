"""The core data type: :class:`CrowdLabels`, an immutable integer-coded long table.

Every estimator in crowdlearn reads a ``CrowdLabels``.  It stores L crowd answers as three
``int32`` code arrays (task, worker, label) sorted by task, with CSR offsets ``task_ptr`` so
that the answers of task ``n`` are the slice ``task_ptr[n]:task_ptr[n + 1]``.  The category
maps (``tasks``, ``workers``, ``classes``) turn codes back into the user's identifiers.
Memory is O(L + N*K); nothing of size tasks x workers is ever allocated.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from .answer_table import check_codes, freeze
from .classes import class_codes, gold_as_classes, normalise_label_values
from .gold import keyed_gold, refuse_contradicting_gold
from .ids import (factorize_ids, label_number, positions_by_value, row_list, show_value, strip_frame,
                  strip_text, value_key)

__all__ = ["CrowdLabels", "as_crowd_labels"]

DuplicatePolicy = Literal["keep", "last", "first", "error"]


def _refuse_contradicting_gold(tasks: pd.Index, codes: np.ndarray, classes: pd.Index) -> None:
    """:func:`~crowdlearn.core.gold.refuse_contradicting_gold` of class codes, showing the
    classes they index."""
    codes = np.asarray(codes)
    refuse_contradicting_gold(tasks, codes, classes.take(codes))


class CrowdLabels:
    """Crowd answers as an immutable, integer-coded long table sorted by task.

    Parameters
    ----------
    task, worker, label : array of int
        Codes of length L, ``0 <= task < n_tasks`` and so on.  Must be sorted by task (the
        constructors guarantee it); use :meth:`from_codes` to build from unsorted codes.
    tasks, workers, classes : pandas.Index
        The identifiers behind the codes.
    truth : array of int, optional
        Gold class code per task, ``-1`` where unknown.
    features : array, shape (n_tasks, n_features), optional
        Item features aligned with ``tasks``.

    Notes
    -----
    Labels: one number, one class.  Files are read as text (``CrowdLabels.from_csv``, the
    ``crowdlearn`` command), so ids and labels stay as written (``007`` stays ``007``); a
    DataFrame's labels are the values it holds.  On every path, labels that spell the same
    finite number are one class: ``1``, ``1.0`` and ``1e0`` in a file are the class ``"1"``
    (the shortest spelling), and in a float column 1.0 is the class ``1`` (integral floats
    become ints).  So a file gives the same classes and the same answers whether it goes
    through the CLI, ``from_csv`` or ``pandas.read_csv`` + :meth:`from_frame`; only the class
    names' type differs (text from files, numbers from a numeric column).  Labels that are
    not all numbers, or distinct numbers, are untouched.  The classes are ordered alike on
    every path too: numbers by value (``"2"`` before ``"10"``), then other labels by text.

    Text ids and labels are stripped of leading and trailing whitespace
    (:func:`~crowdlearn.core.ids.strip_text`): ``"cat"`` and ``"cat "`` of a hand-edited file
    are one class, ``" t1"`` and ``"t1"`` one task, on every path (files, frames, given
    ``classes``, gold, feature rows), so gold still matches; a value of blanks only is a
    missing value.  Numbers and the text inside a value are untouched.

    Error messages locate rows by position in a frame (0-based, as ``df.iloc``: "row
    position 3"), and by file line for files (header = line 1: "line 5").

    Repeated (task, worker) answers are kept by default: real data has them and they carry
    information.  Every task in ``tasks`` has at least one answer unless it was added
    explicitly through ``all_tasks`` (then its slice is empty and estimators return the
    class prior for it).
    """

    __slots__ = (
        "task",
        "worker",
        "label",
        "tasks",
        "workers",
        "classes",
        "task_ptr",
        "truth",
        "features",
        "_codes_cache",
    )

    def __init__(
        self,
        task: np.ndarray,
        worker: np.ndarray,
        label: np.ndarray,
        tasks: pd.Index,
        workers: pd.Index,
        classes: pd.Index,
        truth: np.ndarray | None = None,
        features: np.ndarray | None = None,
    ) -> None:
        task = np.ascontiguousarray(task, dtype=np.int32)
        worker = np.ascontiguousarray(worker, dtype=np.int32)
        label = np.ascontiguousarray(label, dtype=np.int32)
        if not (len(task) == len(worker) == len(label)):
            raise ValueError("task, worker and label code arrays must have the same length")
        if len(task) > 1 and np.any(task[1:] < task[:-1]):
            raise ValueError("task codes must be sorted; use CrowdLabels.from_codes")
        n, m, k = len(tasks), len(workers), len(classes)
        check_codes((task, n, "task"), (worker, m, "worker"), (label, k, "label"))
        self.task, self.worker, self.label = task, worker, label
        self.tasks = pd.Index(tasks, name="task")
        self.workers = pd.Index(workers, name="worker")
        self.classes = pd.Index(classes, name="class")
        self.task_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(task, minlength=n), out=self.task_ptr[1:])
        if truth is not None:
            truth = np.ascontiguousarray(truth, dtype=np.int32)
            if truth.shape != (n,):
                raise ValueError(f"truth must have one entry per task ({n}), got {truth.shape}")
            if np.any((truth < -1) | (truth >= k)):
                raise ValueError(f"truth codes must lie in [-1, {k})")
        self.truth = truth
        if features is not None:
            features = np.asarray(features)
            if features.ndim < 2 or features.shape[0] != n:
                raise ValueError(
                    f"features must have one row per task: expected {n} rows, "
                    f"got shape {features.shape}"
                )
        self.features = features
        self._codes_cache: dict[str, Any] = {}
        freeze(self.task, self.worker, self.label, self.task_ptr)

    # ------------------------------------------------------------------ sizes
    @property
    def n_tasks(self) -> int:
        return len(self.tasks)

    @property
    def n_workers(self) -> int:
        return len(self.workers)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def n_labels(self) -> int:
        return len(self.task)

    def __len__(self) -> int:
        return self.n_labels

    def __repr__(self) -> str:
        extra = []
        if self.truth is not None:
            extra.append(f"gold={int((self.truth >= 0).sum())}")
        if self.features is not None:
            extra.append(f"features={self.features.shape[1:]}")
        tail = (", " + ", ".join(extra)) if extra else ""
        return (
            f"CrowdLabels(labels={self.n_labels}, tasks={self.n_tasks}, "
            f"workers={self.n_workers}, classes={self.n_classes}{tail})"
        )

    # ---------------------------------------------------------- derived data
    @property
    def worker_label(self) -> np.ndarray:
        """``worker * K + label`` per answer (int32 while it fits): the EM kernels' key."""
        wl = self._codes_cache.get("wl")
        if wl is None:
            k = self.n_classes
            dtype = np.int32 if self.n_workers * k < 2**31 else np.int64
            wl = self.worker.astype(dtype) * k + self.label
            wl.flags.writeable = False
            self._codes_cache["wl"] = wl
        return wl

    def labels_per_task(self) -> np.ndarray:
        return np.diff(self.task_ptr)

    def worker_order(self) -> np.ndarray:
        """Positions of the answers sorted by worker (stable: by task within a worker),
        built once and cached: loops that update per-worker rows run in this order."""
        order = self._codes_cache.get("worker_order")
        if order is None:
            order = np.argsort(self.worker, kind="stable")
            order.flags.writeable = False
            self._codes_cache["worker_order"] = order
        return order

    def canonical_order(self) -> np.ndarray:
        """Positions of the answers sorted by (task, worker, label) codes, built once and cached.

        The answers of a task are stored in the order of the rows they were read from, so
        anything drawn or chosen per answer (a random start, cross-validation folds, the
        first of repeated answers) follows this order instead, and the result does not
        depend on how the rows of a file were ordered.  Equal answers are interchangeable.
        """
        order = self._codes_cache.get("canonical_order")
        if order is None:
            order = np.lexsort((self.label, self.worker, self.task))
            order.flags.writeable = False
            self._codes_cache["canonical_order"] = order
        return order

    def labels_per_worker(self) -> np.ndarray:
        return np.bincount(self.worker, minlength=self.n_workers)

    def vote_counts(self) -> np.ndarray:
        """Dense (n_tasks, n_classes) array of answer counts per class."""
        k = self.n_classes
        flat = np.bincount(
            self.task.astype(np.int64) * k + self.label, minlength=self.n_tasks * k
        )
        return flat.reshape(self.n_tasks, k).astype(np.float64)

    def incidence(self):
        """Sparse (n_tasks, n_workers * n_classes) CSR matrix with one entry per answer.

        Built once and cached: row ``n`` holds a 1 at column ``worker * K + label`` for each
        answer of task ``n`` (repeated answers are separate entries that add up).
        """
        mat = self._codes_cache.get("incidence")
        if mat is None:
            import scipy.sparse as sp

            mat = sp.csr_matrix(
                (np.ones(self.n_labels), self.worker_label, self.task_ptr),
                shape=(self.n_tasks, self.n_workers * self.n_classes),
            )
            self._codes_cache["incidence"] = mat
        return mat

    def truth_series(self) -> pd.Series | None:
        if self.truth is None:
            return None
        known = self.truth >= 0
        return pd.Series(
            self.classes.take(self.truth[known]), index=self.tasks[known], name="truth"
        )

    # ----------------------------------------------------------- constructors
    @classmethod
    def from_codes(
        cls,
        task: np.ndarray,
        worker: np.ndarray,
        label: np.ndarray,
        *,
        n_tasks: int | None = None,
        n_workers: int | None = None,
        n_classes: int | None = None,
        tasks: Sequence[Hashable] | pd.Index | None = None,
        workers: Sequence[Hashable] | pd.Index | None = None,
        classes: Sequence[Hashable] | pd.Index | None = None,
        truth: np.ndarray | None = None,
        features: np.ndarray | None = None,
    ) -> "CrowdLabels":
        """Build from integer codes in any order (a stable sort by task is applied)."""
        task = np.asarray(task)
        worker = np.asarray(worker)
        label = np.asarray(label)
        def size(given, ids, codes):
            if given is not None:
                return given
            return len(ids) if ids is not None else int(codes.max(initial=-1)) + 1

        n_tasks = size(n_tasks, tasks, task)
        n_workers = size(n_workers, workers, worker)
        n_classes = size(n_classes, classes, label)
        if task.size and np.all(task[1:] >= task[:-1]):
            # already sorted by task (files often are): copies, not an argsort
            task, worker, label = task.copy(), worker.copy(), label.copy()
        else:
            order = np.argsort(task, kind="stable")
            task, worker, label = task[order], worker[order], label[order]
        return cls(
            task,
            worker,
            label,
            tasks=pd.Index(tasks if tasks is not None else np.arange(n_tasks)),
            workers=pd.Index(workers if workers is not None else np.arange(n_workers)),
            classes=pd.Index(classes if classes is not None else np.arange(n_classes)),
            truth=truth,
            features=features,
        )

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        task: str = "task",
        worker: str = "worker",
        label: str = "label",
        classes: Iterable[Hashable] | None = None,
        *,
        truth: Mapping[Hashable, Hashable] | pd.Series | None = None,
        features: np.ndarray | pd.DataFrame | None = None,
        duplicates: DuplicatePolicy = "keep",
        all_tasks: Iterable[Hashable] | None = None,
        first_line: int | None = None,
    ) -> "CrowdLabels":
        """Build from a long DataFrame with one row per answer.

        Parameters
        ----------
        df : DataFrame
            One row per crowd answer.
        task, worker, label : str
            Column names.  Ids may be any hashable values (str, int, tuples, unicode...);
            text ids and labels lose surrounding whitespace (see the class notes).
        classes : iterable, optional
            The full class set, in the order used for ``probas_`` columns.  Answers outside
            it raise ``ValueError``.  Default: the union of answers and truth values in the
            default class order, numbers by value then text
            (:func:`~crowdlearn.core.classes.class_codes`).
        truth : mapping or Series task -> class, optional
            Gold labels (a subset of tasks is fine), keyed by task id: an array or list
            names no task and is refused (:func:`~crowdlearn.core.gold.keyed_gold`).
        features : array or DataFrame, optional
            Item features.  An array must have one row per task in ``self.tasks`` order;
            a DataFrame is aligned on its index by task id.
        duplicates : {"keep", "last", "first", "error"}
            What to do with repeated (task, worker) answers.
        all_tasks : iterable, optional
            Tasks to include even if they have no answer (they then get the class prior).
        first_line : int, optional
            For a frame read from a file: the file line of its first row (2 below a header).
            Errors then name file lines (header = line 1) instead of row positions (0-based,
            as ``df.iloc``), the default.
        """
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"from_frame expects a pandas DataFrame, got {type(df).__name__}")
        roles = {"task": task, "worker": worker, "label": label}
        for i, (role_a, col_a) in enumerate(roles.items()):
            for role_b, col_b in list(roles.items())[i + 1:]:
                if col_a == col_b:
                    raise ValueError(
                        f"{role_a} and {role_b} cannot both be column {col_a!r}; "
                        "each role needs its own column"
                    )
        for col in (task, worker, label):
            count = int(np.sum(df.columns == col)) if col in df.columns else 0
            if count > 1:
                raise ValueError(
                    f"column {col!r} appears {count} times in the table; rename or drop "
                    "the extra one(s) so each role has exactly one column"
                )
        missing = [c for c in (task, worker, label) if c not in df.columns]
        if missing:
            from .tables import column_hint

            raise ValueError(
                f"missing column(s) {missing}; the table has columns {list(df.columns)}"
                + column_hint(missing, df.columns)
            )
        if len(df) == 0 and all_tasks is None:
            raise ValueError("no crowd answers: the table is empty")
        # "cat " (a hand-edited file) is the class "cat", " t1" the task "t1"; a blank is missing
        df = strip_frame(df, (task, worker, label))
        for col in (task, worker, label):
            bad = df[col].isna().to_numpy()
            if bad.any():
                raise ValueError(f"missing value in column '{col}' at {row_list(bad, first_line)}")
        labels_col = normalise_label_values(df[label])

        if duplicates not in ("keep", "last", "first", "error"):
            raise ValueError(f"duplicates must be keep, last, first or error; got {duplicates!r}")
        if duplicates != "keep":
            dup = df.duplicated([task, worker], keep=False if duplicates == "error" else duplicates)
            if duplicates == "error" and dup.any():
                raise ValueError(
                    f"repeated (task, worker) answers at {row_list(dup.to_numpy(), first_line)}"
                )
            keep_rows = ~dup.to_numpy()
            df = df.loc[keep_rows]
            labels_col = labels_col.loc[keep_rows]
            kept_at = np.flatnonzero(keep_rows)  # error messages name the rows as given
        else:
            kept_at = None

        truth_s = None
        if truth is not None:
            truth_s = keyed_gold(truth, "truth")
            truth_s = strip_text(truth_s, index=True)  # ids and classes as the answers'
            if truth_s.isna().any():  # (a boolean mask on a large string index is slow)
                truth_s = truth_s[truth_s.notna().to_numpy()]
            truth_s = normalise_label_values(truth_s)

        if all_tasks is not None:
            tasks_pool = pd.concat([strip_text(pd.Series(list(all_tasks))), df[task]], ignore_index=True)
            _, task_index = factorize_ids(tasks_pool.drop_duplicates(), "task")
            task_codes = task_index.get_indexer(df[task])
        else:
            task_codes, task_index = factorize_ids(df[task], "task")
        worker_codes, worker_index = factorize_ids(df[worker], "worker")

        # each gold task's position among the tasks (by value: text task ids from a file and a
        # truth Series read by pd.read_csv, 17 not "17", are the same tasks); -1: not a task
        gold_pos = None if truth_s is None else positions_by_value(task_index, truth_s.index, "the answers' tasks")

        # classes: user-given order, else the default order of observed answers and gold values
        if classes is not None:
            class_index = strip_text(pd.Index(list(classes), name="class"))
            if class_index.has_duplicates:
                raise ValueError("classes contains duplicates")
            keys = pd.Index([value_key(c) for c in class_index], dtype=object)
            if keys.has_duplicates:  # one number, one class: 1 and 1.0 are one class twice
                twice = keys.duplicated(keep=False)
                raise ValueError(f"classes spell one number twice: {', '.join(map(show_value, class_index[twice]))}")
            label_codes = class_index.get_indexer(labels_col)
            bad = label_codes < 0
            if bad.any():  # one number, one class: "1.0" is the given class "1"
                by_number = {}
                for pos, value in enumerate(class_index):
                    key = label_number(value)
                    if key is not None:
                        by_number.setdefault(key, pos)
                if by_number:
                    uniq, inv = np.unique(labels_col.to_numpy()[bad].astype(str), return_inverse=True)
                    found = np.array([by_number.get(label_number(u), -1) for u in uniq])
                    label_codes[bad] = found[inv]
                    bad = label_codes < 0
            if bad.any():
                first = labels_col.to_numpy()[bad][0]
                first = first.item() if isinstance(first, np.generic) else first  # 1, not np.int64(1)
                raise ValueError(
                    f"label {first!r} is not one of the given classes "
                    f"{list(class_index)[:10]} "
                    f"({row_list(bad if kept_at is None else np.isin(np.arange(len(dup)), kept_at[bad]), first_line)})"
                )
        else:
            pool = labels_col
            if truth_s is not None:  # gold "2" for the label 2 is that class, not a second one
                truth_s = gold_as_classes(truth_s, labels_col)
                # only the gold of tasks in the table names classes: gold for a task nobody
                # answered is not used, and must not change the classes every method fits
                pool = pd.concat([labels_col, truth_s[gold_pos >= 0]], ignore_index=True)
            pool_codes, class_index = class_codes(pool, normalised=True)
            label_codes = pool_codes[: len(labels_col)]  # the answers come first in the pool

        truth_codes = None
        if truth_s is not None:
            truth_codes = np.full(len(task_index), -1, dtype=np.int32)
            pos = gold_pos
            cls_codes = class_index.get_indexer(gold_as_classes(truth_s, class_index))
            if np.any((cls_codes < 0) & (pos >= 0)):  # gold for tasks nobody answered is not used
                first = int(np.flatnonzero((cls_codes < 0) & (pos >= 0))[0])
                bad_val, bad_task = show_value(truth_s.iloc[first]), show_value(truth_s.index[first])
                raise ValueError(f"gold label {bad_val} of task {bad_task} is not one of the "
                                 f"classes {list(class_index)[:10]}")
            ok = pos >= 0  # gold for tasks nobody answered is ignored, as it can't be used
            # by the task matched (7 and "007" are one task), not by the gold's spelling
            _refuse_contradicting_gold(task_index.take(pos[ok]), cls_codes[ok], class_index)
            truth_codes[pos[ok]] = cls_codes[ok]

        feats = None
        if features is not None:
            if isinstance(features, pd.DataFrame):
                features = features.set_axis(strip_text(features.index))  # task ids as the answers'
                missing_rows = task_index.difference(features.index)
                if len(missing_rows):
                    raise ValueError(
                        f"features lack rows for {len(missing_rows)} task(s), e.g. {missing_rows[0]!r}"
                    )
                feats = features.loc[task_index].to_numpy()
            else:
                feats = np.asarray(features)
        return cls.from_codes(
            task_codes,
            worker_codes,
            label_codes,
            tasks=task_index,
            workers=worker_index,
            classes=class_index,
            truth=truth_codes,
            features=feats,
        )

    @classmethod
    def from_records(
        cls, records: Iterable[tuple[Hashable, Hashable, Hashable]], **kwargs: Any
    ) -> "CrowdLabels":
        """Build from an iterable of (task, worker, label) tuples."""
        df = pd.DataFrame(list(records), columns=["task", "worker", "label"])
        return cls.from_frame(df, **kwargs)

    @classmethod
    def from_csv(cls, path, task="task", worker="worker", label="label", classes=None, **kwargs):
        """Read a CSV/TSV file (delimiter sniffed from the extension) with one row per answer.

        JSON Lines and Parquet files are read too (by their extension); errors name the
        file's lines, or row positions for Parquet (:func:`~crowdlearn.core.tables.first_record_line`).
        """
        from .tables import first_record_line, read_table

        df = read_table(path, columns=(task, worker, label))
        kwargs.setdefault("first_line", first_record_line(path))
        return cls.from_frame(df, task, worker, label, classes, **kwargs)

    @classmethod
    def from_parquet(cls, path, task="task", worker="worker", label="label", classes=None, **kwargs):
        """Read a Parquet file (needs pyarrow: ``pip install crowdlearn[parquet]``)."""
        from .tables import read_table

        df = read_table(path, columns=(task, worker, label), fmt="parquet")
        return cls.from_frame(df, task, worker, label, classes, **kwargs)

    @classmethod
    def from_wide(
        cls,
        wide: pd.DataFrame | np.ndarray,
        missing: Any = None,
        classes: Iterable[Hashable] | None = None,
        **kwargs: Any,
    ) -> "CrowdLabels":
        """Build from a tasks x workers table; NaN (or ``missing``) marks no answer."""
        if not isinstance(wide, pd.DataFrame):
            wide = pd.DataFrame(np.asarray(wide, dtype=object))
        wide = wide.copy()
        wide.index.name = "task"
        wide.columns.name = "worker"
        if missing is not None:
            wide = wide.mask(wide == missing)
        long = wide.stack(future_stack=True).dropna().rename("label").reset_index()
        return cls.from_frame(long, classes=classes, all_tasks=wide.index, **kwargs)

    # ------------------------------------------------------------- exporters
    def to_frame(self) -> pd.DataFrame:
        """Long DataFrame (task, worker, label) with the user's ids, in task order."""
        return pd.DataFrame(
            {
                "task": self.tasks.take(self.task),
                "worker": self.workers.take(self.worker),
                "label": self.classes.take(self.label),
            }
        )

    def to_wide(self, fill_value: Any = np.nan) -> pd.DataFrame:
        """Tasks x workers DataFrame (last answer wins for repeats).  Allocates N x M."""
        out = np.full((self.n_tasks, self.n_workers), -1, dtype=np.int64)
        out[self.task, self.worker] = self.label
        frame = pd.DataFrame(out, index=self.tasks, columns=self.workers)
        lookup = pd.Series(list(self.classes), dtype=object)
        return frame.apply(lambda col: col.map(lambda c: lookup[c] if c >= 0 else fill_value))

    # -------------------------------------------------------------- subsets
    def subset(
        self,
        tasks: Iterable[Hashable] | None = None,
        workers: Iterable[Hashable] | None = None,
        *,
        keep_classes: bool = True,
    ) -> "CrowdLabels":
        """Answers restricted to the given tasks and/or workers (ids, not codes).

        Classes are kept (so ``probas_`` columns stay comparable) unless ``keep_classes`` is
        False.  Tasks and workers left without answers are dropped.
        """
        mask = np.ones(self.n_labels, dtype=bool)
        if tasks is not None:
            sel = self.tasks.get_indexer(pd.Index(list(tasks)))
            if np.any(sel < 0):
                raise KeyError("subset: unknown task id(s)")
            keep = np.zeros(self.n_tasks, dtype=bool)
            keep[sel] = True
            mask &= keep[self.task]
        if workers is not None:
            sel = self.workers.get_indexer(pd.Index(list(workers)))
            if np.any(sel < 0):
                raise KeyError("subset: unknown worker id(s)")
            keep = np.zeros(self.n_workers, dtype=bool)
            keep[sel] = True
            mask &= keep[self.worker]
        return self._select(mask, keep_classes=keep_classes)

    def _select_keep_ids(self, mask: np.ndarray) -> "CrowdLabels":
        """The answers of ``mask`` with *all* task, worker and class ids (and codes) kept.

        Tasks or workers left without answers stay in the index; code arrays of the result
        are comparable with this object's (used by hold-out splits).
        """
        return CrowdLabels(
            self.task[mask],
            self.worker[mask],
            self.label[mask],
            tasks=self.tasks,
            workers=self.workers,
            classes=self.classes,
            truth=self.truth,
            features=self.features,
        )

    def _select(self, mask: np.ndarray, keep_classes: bool = True) -> "CrowdLabels":
        t_used = np.unique(self.task[mask])
        w_used = np.unique(self.worker[mask])
        t_map = np.full(self.n_tasks, -1, np.int64)
        t_map[t_used] = np.arange(len(t_used))
        w_map = np.full(self.n_workers, -1, np.int64)
        w_map[w_used] = np.arange(len(w_used))
        label = self.label[mask]
        classes = self.classes
        truth = None if self.truth is None else self.truth[t_used]
        if not keep_classes:
            c_used = np.unique(label)
            c_map = np.full(self.n_classes, -1, np.int64)
            c_map[c_used] = np.arange(len(c_used))
            label = c_map[label]
            classes = classes.take(c_used)
            if truth is not None:
                truth = np.where(truth >= 0, c_map[np.maximum(truth, 0)], -1)
        return CrowdLabels(
            t_map[self.task[mask]],
            w_map[self.worker[mask]],
            label,
            tasks=self.tasks.take(t_used),
            workers=self.workers.take(w_used),
            classes=classes,
            truth=truth,
            features=None if self.features is None else self.features[t_used],
        )

    def with_truth(self, truth: Mapping[Hashable, Hashable] | pd.Series | None) -> "CrowdLabels":
        """A copy sharing the answers, with gold labels attached (task id -> class).

        ``truth`` is a Series or mapping keyed by task id; an array or list is refused
        (:func:`~crowdlearn.core.gold.keyed_gold`)."""
        codes = None if truth is None else self.encode_gold(keyed_gold(truth, "truth"))
        return CrowdLabels(
            self.task, self.worker, self.label, self.tasks, self.workers, self.classes,
            truth=codes, features=self.features,
        )

    def with_features(self, features: np.ndarray | pd.DataFrame | None) -> "CrowdLabels":
        """A copy sharing the answers, with item features attached."""
        if isinstance(features, pd.DataFrame):
            features = features.set_axis(strip_text(features.index)).loc[self.tasks].to_numpy()
        return CrowdLabels(
            self.task, self.worker, self.label, self.tasks, self.workers, self.classes,
            truth=self.truth, features=features,
        )

    def encode_gold(self, gold: Mapping[Hashable, Hashable] | pd.Series) -> np.ndarray:
        """Gold labels (task id -> class) as int32 codes per task, -1 where unknown.

        ``gold`` is a Series or mapping keyed by task id; an array or list is refused
        (:func:`~crowdlearn.core.gold.keyed_gold`): it names no task."""
        gold_s = keyed_gold(gold)
        gold_s = normalise_label_values(strip_text(gold_s, index=True).dropna())
        codes = np.full(self.n_tasks, -1, dtype=np.int32)
        gold_s = gold_as_classes(gold_s, self.classes)
        pos = positions_by_value(self.tasks, gold_s.index, "the answers' tasks")
        cls_codes = self.classes.get_indexer(gold_s)
        if np.any(cls_codes < 0):
            bad = gold_s.to_numpy()[cls_codes < 0][0]
            raise ValueError(
                f"gold label {bad!r} is not one of the classes {list(self.classes)[:10]}"
            )
        _refuse_contradicting_gold(gold_s.index, cls_codes, self.classes)
        ok = pos >= 0
        codes[pos[ok]] = cls_codes[ok]
        return codes


def as_crowd_labels(data: Any) -> CrowdLabels:
    """Accept a CrowdLabels, a long DataFrame with task/worker/label columns, or records."""
    if isinstance(data, CrowdLabels):
        return data
    if isinstance(data, pd.DataFrame):
        return CrowdLabels.from_frame(data)
    if isinstance(data, (list, tuple)):
        if any(isinstance(item, CrowdLabels) for item in data):
            # simulators that also plant parameters return (answers, planted)
            raise TypeError(
                f"expected CrowdLabels, got a {type(data).__name__} holding one: the simulators that "
                f"plant worker parameters return (answers, planted); pass the answers alone"
            )
        return CrowdLabels.from_records(data)
    raise TypeError(
        f"expected CrowdLabels or a DataFrame with task, worker, label columns; "
        f"got {type(data).__name__}"
    )
