"""The multi-label answer table: each answer is a set of tags (possibly empty).

:class:`MultiLabelAnswers` follows :class:`~crowdlearn.core.data.CrowdLabels`: immutable
int32 task and worker codes sorted by task with CSR offsets ``task_ptr``, ids in pandas
Indexes, and the tags of answer ``i`` as a CSR row of an answers x tags indicator
(``tag_ptr``, ``tag_code``).  Memory is O(answers + tags given), nothing of size
tasks x workers or answers x tags is dense.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..core.answer_table import AnswerTable, check_codes, freeze
from ..core.classes import class_codes
from ..core.data import CrowdLabels
from ..core.gold import keyed_gold, refuse_contradicting_gold
from ..core.ids import factorize_ids, positions_by_value, row_list, strip_frame, strip_text, value_key
from ..core.tables import column_hint

__all__ = ["MultiLabelAnswers", "as_multilabel_answers", "parse_tag_sets"]

_BINARY = pd.Index([0, 1], name="class")


def _tag_list(value: Any, delimiter: str) -> list | None:
    """The tags of one answer, or None when ``value`` is not a tag collection."""
    if isinstance(value, str):
        return [t.strip() for t in value.split(delimiter) if t.strip()]
    if isinstance(value, (list, tuple, set, frozenset, np.ndarray)):
        # text tags as those of a string: " a" is the tag "a", a blank one is no tag
        return [t.strip() if isinstance(t, str) else t for t in value
                if not (isinstance(t, str) and not t.strip())]
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []  # an empty cell (CSV ",,") is the empty set
    return None


def _spelled_as(gold: list, answers: list) -> list:
    """Gold tags spelled as the answers spell the same tag.

    Gold read from a file is text ("10|2") while a frame's tags may be numbers (JSON lists,
    ``[10, 2]``); pooled as they are, ``10`` and ``"10"`` were two values of one id, an error.
    A gold tag takes the answers' spelling of the same text; a gold-only tag takes the
    answers' type when they all share one (text, or integers and the tag spells one), so the
    tags keep one type.  Gold and answers of one type are returned unchanged.
    """
    if not gold or not answers:
        return gold
    kinds = {type(t) for t in answers} | {type(t) for t in gold}
    if len(kinds) == 1:
        return gold
    spelled = {str(t): t for t in answers}
    all_text = all(isinstance(t, str) for t in answers)
    all_int = all(isinstance(t, (int, np.integer)) and not isinstance(t, (bool, np.bool_)) for t in answers)

    def respell(tag):
        if str(tag) in spelled:
            return spelled[str(tag)]
        if all_text:
            return str(tag)
        if all_int and isinstance(tag, str) and tag.lstrip("+-").isdigit():
            return int(tag)
        return tag

    return [respell(t) for t in gold]


def parse_tag_sets(values: Iterable[Any], delimiter: str = "|", what: str = "label",
                   first_line: int | None = None) -> tuple[np.ndarray, list]:
    """Per value its tags: ``(counts per value, flat list of tags)``.

    A value is a list, tuple, set or array of tags, or a string of tags separated by
    ``delimiter`` (spaces around text tags are dropped, and blank tags, in both; ``""`` and
    an empty cell are the empty set).

    Raises
    ------
    ValueError
        Naming the rows of values that are none of these (e.g. a number), or that repeat a tag.
    """
    values = list(values)
    counts = np.zeros(len(values), dtype=np.int64)
    flat: list = []
    bad = np.zeros(len(values), dtype=bool)
    repeated = np.zeros(len(values), dtype=bool)
    for i, value in enumerate(values):
        tags = _tag_list(value, delimiter)
        if tags is None:
            bad[i] = True
            continue
        # by value: "1" and "1.0" are one tag (one number, one class), as in class labels
        if len({value_key(t) for t in tags}) != len(tags):
            repeated[i] = True
            continue
        counts[i] = len(tags)
        flat.extend(tags)
    if bad.any():
        first = values[int(np.flatnonzero(bad)[0])]
        raise ValueError(f"{what} must be a list, tuple or set of tags or a {delimiter!r}-separated "
                         f"string; got {first!r} at {row_list(bad, first_line)}")
    if repeated.any():
        raise ValueError(f"{what} repeats a tag at {row_list(repeated, first_line)}")
    return counts, flat


class MultiLabelAnswers(AnswerTable):
    """Crowd answers that are sets of tags, as an immutable integer-coded table sorted by task.

    Parameters
    ----------
    task, worker : array of int, length L
        Codes, sorted by task (use :meth:`from_frame`).
    tag_ptr : array of int, length L + 1
        Answer ``i`` holds the tags ``tag_code[tag_ptr[i]:tag_ptr[i + 1]]`` (CSR rows).
    tag_code : array of int
    tasks, workers, tags : Index
        The ids behind the codes.
    truth_ptr, truth_code : arrays, optional
        The true tag set of each task in the same CSR layout (``n_tasks + 1`` offsets).
    truth_known : array of bool, optional
        Which tasks have a known truth: the "unknown" marker (an unknown truth and an empty
        true set are different things).
    delimiter : str
        Joins tags in :meth:`to_frame` and the result tables.

    Notes
    -----
    An answer with no tag is an answer ("none of these tags apply"): it is evidence against
    every tag.  Empty cells in a file are such answers.

    Text ids and tags lose surrounding whitespace, as class labels' do
    (:func:`~crowdlearn.core.ids.strip_text`): ``" t1"`` and ``"t1"`` are one task and
    ``"cat "`` the tag ``"cat"``, on every path (answers, given ``tags``, gold, ``all_tasks``),
    so gold still matches; an id of blanks is a missing value.
    """

    ROLES = ("task", "worker", "label")

    __slots__ = ("task", "worker", "tag_ptr", "tag_code", "tasks", "workers", "tags", "task_ptr",
                 "truth_ptr", "truth_code", "truth_known", "delimiter", "_cache")

    def __init__(self, task, worker, tag_ptr, tag_code, tasks, workers, tags, truth_ptr=None,
                 truth_code=None, truth_known=None, delimiter: str = "|") -> None:
        task = np.ascontiguousarray(task, dtype=np.int32)
        worker = np.ascontiguousarray(worker, dtype=np.int32)
        tag_ptr = np.ascontiguousarray(tag_ptr, dtype=np.int64)
        tag_code = np.ascontiguousarray(tag_code, dtype=np.int32)
        if len(task) != len(worker) or len(tag_ptr) != len(task) + 1:
            raise ValueError("task, worker and tag_ptr (one more entry) must describe the same answers")
        if len(task) > 1 and np.any(task[1:] < task[:-1]):
            raise ValueError("task codes must be sorted")
        n, m, t = len(tasks), len(workers), len(tags)
        check_codes((task, n, "task"), (worker, m, "worker"), (tag_code, t, "tag"))
        self.task, self.worker, self.tag_ptr, self.tag_code = task, worker, tag_ptr, tag_code
        self.tasks = pd.Index(tasks, name="task")
        self.workers = pd.Index(workers, name="worker")
        self.tags = pd.Index(tags, name="tag")
        if self.tags.has_duplicates:
            raise ValueError("tags contains duplicates")
        self.task_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(task, minlength=n), out=self.task_ptr[1:])
        if truth_known is not None:
            truth_known = np.ascontiguousarray(truth_known, dtype=bool)
            truth_ptr = np.ascontiguousarray(truth_ptr, dtype=np.int64)
            truth_code = np.ascontiguousarray(truth_code, dtype=np.int32)
            if truth_known.shape != (n,) or truth_ptr.shape != (n + 1,):
                raise ValueError(f"truth must describe every task ({n})")
        self.truth_known, self.truth_ptr, self.truth_code = truth_known, truth_ptr, truth_code
        self.delimiter = delimiter
        self._cache: dict[str, Any] = {}
        freeze(self.task, self.worker, self.tag_ptr, self.tag_code, self.task_ptr,
               self.truth_known, self.truth_ptr, self.truth_code)

    # ------------------------------------------------------------------ sizes
    @property
    def n_tasks(self) -> int:
        return len(self.tasks)

    @property
    def n_tags(self) -> int:
        return len(self.tags)

    @property
    def n_answers(self) -> int:
        return len(self.task)

    def __len__(self) -> int:
        return self.n_answers

    def __repr__(self) -> str:
        gold = "" if self.truth_known is None else f", gold={int(self.truth_known.sum())}"
        return (f"MultiLabelAnswers(answers={self.n_answers}, tasks={self.n_tasks}, "
                f"workers={self.n_workers}, tags={self.n_tags}{gold})")

    # ---------------------------------------------------------- derived data
    def indicator(self):
        """Sparse (answers x tags) CSR 0/1 matrix, built once."""
        mat = self._cache.get("indicator")
        if mat is None:
            import scipy.sparse as sp

            mat = sp.csr_matrix((np.ones(len(self.tag_code), dtype=np.int8), self.tag_code, self.tag_ptr),
                                shape=(self.n_answers, self.n_tags))
            self._cache["indicator"] = mat
        return mat

    def truth_indicator(self) -> np.ndarray | None:
        """Dense (tasks x tags) 0/1 truth, rows of unknown truth all 0 (see ``truth_known``)."""
        if self.truth_known is None:
            return None
        out = np.zeros((self.n_tasks, self.n_tags), dtype=np.int8)
        rows = np.repeat(np.arange(self.n_tasks), np.diff(self.truth_ptr))
        out[rows, self.truth_code] = 1
        return out

    def truth_series(self) -> pd.Series | None:
        """Known true tag sets as tuples (in tag order), by task."""
        if self.truth_known is None:
            return None
        ind = self.truth_indicator()
        known = np.flatnonzero(self.truth_known)
        return pd.Series([tuple(self.tags[ind[i] > 0]) for i in known], index=self.tasks[known],
                         name="truth", dtype=object)

    def tag_labels(self, tag: Hashable) -> CrowdLabels:
        """The binary crowd "does tag apply?" (classes ``[0, 1]``), every task and worker kept.

        Each answer becomes 1 when it holds ``tag`` and 0 otherwise; the truth, where known,
        follows.
        """
        pos = self.tags.get_loc(tag)
        col = self._cache.get("csc")
        if col is None:
            col = self.indicator().tocsc()
            self._cache["csc"] = col
        label = np.zeros(self.n_answers, dtype=np.int32)
        label[col.indices[col.indptr[pos]:col.indptr[pos + 1]]] = 1
        truth = None
        if self.truth_known is not None:
            truth = np.where(self.truth_known, self.truth_indicator()[:, pos], -1).astype(np.int32)
        return CrowdLabels(self.task, self.worker, label, tasks=self.tasks, workers=self.workers,
                           classes=_BINARY, truth=truth)

    # ----------------------------------------------------------- constructors
    @classmethod
    def from_frame(cls, df: pd.DataFrame, task: str = "task", worker: str = "worker",
                   label: str = "label", *, tags: Iterable[Hashable] | None = None,
                   delimiter: str = "|", truth: Mapping | pd.Series | None = None,
                   all_tasks: Iterable[Hashable] | None = None,
                   first_line: int | None = None) -> "MultiLabelAnswers":
        """Build from a long DataFrame, one row per answer.

        Parameters
        ----------
        df : DataFrame
        task, worker, label : str
            Column names.  A label is a list, tuple or set of tags, or a string of tags
            separated by ``delimiter``; ``""``, ``[]`` and an empty cell are the empty set.
        tags : iterable, optional
            The full tag set, in output order; a tag outside it is an error.  Default: the
            union of the answers' and the truth's tags in the class-label order (numbers by
            value, "2" before "10", then text; :func:`~crowdlearn.core.classes.class_codes`).
        delimiter : str, default "|"
            Tag separator of string labels (``","`` is common too).
        truth : mapping or Series task -> tag set, optional
            Known true tag sets (same formats as labels); other tasks have unknown truth.
            Keyed by task id: an array or list of tag sets names no task and is refused.
        all_tasks : iterable, optional
            Tasks to include even without answers.
        first_line : int, optional
            File line of the first row (2 below a header): errors then name file lines.
        """
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"from_frame expects a pandas DataFrame, got {type(df).__name__}")
        if not isinstance(delimiter, str) or not delimiter:
            raise ValueError(f"delimiter must be a non-empty string, got {delimiter!r}")
        cols = (task, worker, label)
        if len(set(cols)) < 3:
            raise ValueError(f"task, worker and label need three different columns, got {cols}")
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise ValueError(f"missing column(s) {missing}; the table has columns {list(df.columns)}"
                             + column_hint(missing, df.columns))
        if len(df) == 0 and all_tasks is None:
            raise ValueError("no crowd answers: the table is empty")
        # " t1" is the task "t1"; tags are stripped as they are parsed (parse_tag_sets)
        df = strip_frame(df, (task, worker))
        for col in (task, worker):
            bad = df[col].isna().to_numpy()
            if bad.any():
                raise ValueError(f"missing value in column '{col}' at {row_list(bad, first_line)}")
        counts, flat = parse_tag_sets(df[label].to_numpy(), delimiter, "label", first_line)
        truth_counts, truth_flat, truth_s = None, [], None
        if truth is not None:
            truth_s = keyed_gold(truth, "truth", value="tag set", dtype=object)
            truth_s = truth_s.set_axis(strip_text(truth_s.index))  # task ids as the answers'
            truth_counts, truth_flat = parse_tag_sets(truth_s.to_numpy(), delimiter, "truth")
            truth_flat = _spelled_as(truth_flat, flat)
        if tags is not None:
            tag_index = strip_text(pd.Index(list(tags), name="tag"))
            if tag_index.has_duplicates:
                raise ValueError("tags contains duplicates")
            codes = tag_index.get_indexer(pd.Index(flat, dtype=object)) if flat else np.zeros(0, np.int64)
            if np.any(codes < 0):
                answer_of = np.repeat(np.arange(len(df)), counts)
                bad = np.zeros(len(df), dtype=bool)
                bad[answer_of[codes < 0]] = True
                raise ValueError(f"tag {flat[int(np.flatnonzero(codes < 0)[0])]!r} is not one of the "
                                 f"given tags {list(tag_index)[:10]} ({row_list(bad, first_line)})")
        else:
            pool = pd.Series(flat + truth_flat, dtype=object)
            if len(pool):
                # the tags in the classes' order: numbers by value ("2" before "10"), then text
                pool_codes, tag_index = class_codes(pool)
                tag_index = tag_index.rename("tag")
            else:
                pool_codes, tag_index = np.zeros(0, np.int64), pd.Index([], name="tag", dtype=object)
            codes = pool_codes[:len(flat)]
        if all_tasks is not None:
            pool = pd.concat([strip_text(pd.Series(list(all_tasks), dtype=object)),
                              df[task].astype(object)], ignore_index=True)
            _, task_index = factorize_ids(pool.drop_duplicates(), "task")
            task_codes = task_index.get_indexer(df[task])
        else:
            task_codes, task_index = factorize_ids(df[task], "task")
        worker_codes, worker_index = factorize_ids(df[worker], "worker")
        # sort the answers by task, carrying their CSR rows of tags along
        order = np.argsort(task_codes, kind="stable")
        starts = np.concatenate([[0], np.cumsum(counts)])
        lengths = counts[order]
        gather = (np.repeat(starts[:-1][order] - np.concatenate([[0], np.cumsum(lengths)])[:-1], lengths)
                  + np.arange(lengths.sum()))
        tag_ptr = np.concatenate([[0], np.cumsum(lengths)])
        tag_code = np.asarray(codes, dtype=np.int64)[gather]
        # within an answer, tags in tag order (a set has no order of its own)
        tag_code = tag_code[np.lexsort((tag_code, np.repeat(np.arange(len(lengths)), lengths)))]
        truth_args = {}
        if truth_s is not None:
            pos = positions_by_value(task_index, truth_s.index, "the answers' tasks")  # 17 is "17"
            tcodes = tag_index.get_indexer(pd.Index(truth_flat, dtype=object)) if truth_flat else np.zeros(0, np.int64)
            if np.any(tcodes < 0):
                raise ValueError(f"true tag {truth_flat[int(np.flatnonzero(tcodes < 0)[0])]!r} is not one "
                                 f"of the tags {list(tag_index)[:10]}")
            tstart = np.concatenate([[0], np.cumsum(truth_counts)])
            # a task listed twice must name one tag set ("a|b" and "b|a" are one)
            refuse_contradicting_gold(truth_s.index, [tuple(sorted(set(tcodes[tstart[i]:tstart[i + 1]])))
                                                      for i in range(len(truth_s))], shown=truth_s.to_numpy())
            known = np.zeros(len(task_index), dtype=bool)
            per_task = [np.zeros(0, np.int64)] * len(task_index)
            for i, p in enumerate(pos):
                if p >= 0:  # truth of tasks nobody answered is ignored, as for class labels
                    known[p] = True
                    per_task[p] = np.sort(tcodes[tstart[i]:tstart[i + 1]])
            sizes = np.array([len(x) for x in per_task], dtype=np.int64)
            truth_args = dict(truth_known=known, truth_ptr=np.concatenate([[0], np.cumsum(sizes)]),
                              truth_code=np.concatenate(per_task) if len(per_task) else np.zeros(0, np.int64))
        return cls(task_codes[order], worker_codes[order], tag_ptr, tag_code, task_index,
                   worker_index, tag_index, delimiter=delimiter, **truth_args)

    # ------------------------------------------------------------- exporters
    def answer_tags(self) -> list[tuple]:
        """The tags of every answer, as tuples in tag order (answers in task order)."""
        sizes = np.diff(self.tag_ptr)
        tags = self.tags.take(self.tag_code) if len(self.tag_code) else []
        out, pos = [], 0
        for s in sizes:
            out.append(tuple(tags[pos:pos + s]))
            pos += s
        return out

    def to_frame(self, joined: bool = True) -> pd.DataFrame:
        """Long DataFrame (task, worker, label); labels joined by ``delimiter`` (or tuples).

        Raises ValueError when a tag contains the delimiter (use ``joined=False``).
        """
        labels = self.answer_tags()
        if joined:
            if any(self.delimiter in str(t) for t in self.tags):
                raise ValueError(f"a tag contains the delimiter {self.delimiter!r}: use joined=False")
            labels = [self.delimiter.join(str(t) for t in row) for row in labels]
        return pd.DataFrame({"task": self.tasks.take(self.task), "worker": self.workers.take(self.worker),
                             "label": pd.Series(labels, dtype=object)})


def as_multilabel_answers(data: Any) -> MultiLabelAnswers:
    """Accept a :class:`MultiLabelAnswers`, a DataFrame with task, worker, label columns, or
    a :class:`CrowdLabels` (a class-label crowd is a multi-label crowd whose every answer is
    one tag: its class)."""
    if isinstance(data, MultiLabelAnswers):
        return data
    if isinstance(data, CrowdLabels):
        truth = {}
        if data.truth is not None:
            known = data.truth >= 0
            truth = dict(truth_known=known, truth_ptr=np.concatenate([[0], np.cumsum(known)]),
                         truth_code=data.truth[known])
        return MultiLabelAnswers(data.task, data.worker, np.arange(data.n_labels + 1), data.label,
                                 tasks=data.tasks, workers=data.workers, tags=data.classes, **truth)
    if isinstance(data, pd.DataFrame):
        return MultiLabelAnswers.from_frame(data)
    raise TypeError(f"expected MultiLabelAnswers or a DataFrame with task, worker, label columns; "
                    f"got {type(data).__name__}")
