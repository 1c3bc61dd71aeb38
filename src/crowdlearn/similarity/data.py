"""The similarity answer table: :class:`SimilarityAnswers`, one row per "are these two alike".

Each answer is a worker looking at two items, ``item_a`` and ``item_b``, and saying whether
they belong together (``same`` = 1) or not (``same`` = 0): the input of crowdclustering.
The table stores integer codes (``worker``, ``item_a``, ``item_b``: ``int32``; ``same``:
``int8``) with the ids in pandas Indexes, like :class:`crowdlearn.core.data.CrowdLabels`;
the arrays are read-only.  An item gets one code whichever side it appears on.  Memory is
O(L + n_items); nothing of size items x items is ever allocated.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..core.answer_table import AnswerTable, check_codes, freeze
from ..core.gold import keyed_gold, refuse_contradicting_gold
from ..core.ids import factorize_ids, positions_by_value, row_list, strip_frame, strip_text
from ..core.tables import column_hint

__all__ = ["SimilarityAnswers", "as_similarity_answers", "SAME_VALUES", "DIFFERENT_VALUES"]

#: values read as "same" / "different" (text compared after stripping blanks and lower-casing)
SAME_VALUES = ("1", "1.0", "true", "yes", "y", "t", "same")
DIFFERENT_VALUES = ("0", "0.0", "false", "no", "n", "f", "different")


def _parse_same(values: pd.Series) -> np.ndarray:
    """0/1 codes of a ``same`` column; -1 where the value is neither."""
    raw = values.to_numpy()
    out = np.full(len(raw), -1, dtype=np.int8)
    if pd.api.types.is_bool_dtype(values.dtype):
        return raw.astype(np.int8)
    if pd.api.types.is_numeric_dtype(values.dtype):
        num = raw.astype(float)
        out[num == 1] = 1
        out[num == 0] = 0
        return out
    text = pd.Series(raw, dtype=object).map(
        lambda v: str(int(v)) if isinstance(v, (bool, np.bool_)) else str(v)).str.strip().str.lower()
    out[text.isin(SAME_VALUES).to_numpy()] = 1
    out[text.isin(DIFFERENT_VALUES).to_numpy()] = 0
    return out


class SimilarityAnswers(AnswerTable):
    """Same/different answers on item pairs as an immutable, integer-coded table.

    Parameters
    ----------
    worker, item_a, item_b : array of int
        Codes of length L; ``item_a != item_b`` on every row.
    same : array of int
        1 = the worker put the two items in the same group, 0 = in different groups.
    workers, items : pandas.Index
        The ids behind the codes.  An item that is never compared may be listed (every method
        then gives it the prior cluster, see :class:`~crowdlearn.similarity.base.SimilarityEstimator`).
    truth : array of int, optional
        Gold cluster code per item (``0 .. n_truth_clusters - 1``), ``-1`` where unknown.
        Cluster codes only name a partition: any relabelling of them is the same truth.
    features : array, shape (n_items, n_features), optional
        Item features aligned with ``items`` (for the end-to-end learner).

    Notes
    -----
    ``same`` may be written 1/0, true/false, yes/no (any case) or as booleans; anything else
    is refused with a ``ValueError`` naming the rows, as is an item compared with itself.
    The order of the two items in a row carries no information: every method treats
    ``(a, b)`` and ``(b, a)`` alike.

    Text ids lose surrounding whitespace, as class labels' do
    (:func:`~crowdlearn.core.ids.strip_text`): ``" i1"`` and ``"i1"`` are one item, on every
    path (answers, gold ids and cluster names, ``all_items``, feature rows), so gold still
    matches; a value of blanks is a missing value.
    """

    ROLES = ("worker", "item_a", "item_b", "same")

    __slots__ = ("worker", "item_a", "item_b", "same", "workers", "items", "truth",
                 "features", "_cache")

    def __init__(
        self,
        worker: np.ndarray,
        item_a: np.ndarray,
        item_b: np.ndarray,
        same: np.ndarray,
        workers: pd.Index,
        items: pd.Index,
        truth: np.ndarray | None = None,
        features: np.ndarray | None = None,
    ) -> None:
        worker = np.ascontiguousarray(worker, dtype=np.int32)
        item_a = np.ascontiguousarray(item_a, dtype=np.int32)
        item_b = np.ascontiguousarray(item_b, dtype=np.int32)
        same = np.ascontiguousarray(same, dtype=np.int8)
        if not (len(worker) == len(item_a) == len(item_b) == len(same)):
            raise ValueError("worker, item_a, item_b and same arrays must have the same length")
        n, m = len(items), len(workers)
        check_codes((worker, m, "worker"), (item_a, n, "item_a"),
                    (item_b, n, "item_b"), (same, 2, "same"))
        if np.any(item_a == item_b):
            raise ValueError(f"an item compared with itself (item_a == item_b) at "
                             f"{row_list(item_a == item_b)}")
        self.worker, self.item_a, self.item_b, self.same = worker, item_a, item_b, same
        self.workers = pd.Index(workers, name="worker")
        self.items = pd.Index(items, name="item")
        if truth is not None:
            truth = np.array(truth, dtype=np.int32)
            if truth.shape != (n,):
                raise ValueError(f"truth must have one entry per item ({n}), got {truth.shape}")
            if np.any(truth < -1):
                raise ValueError("truth codes must be >= -1 (-1 = unknown)")
            truth.flags.writeable = False
        self.truth = truth
        if features is not None:
            features = np.array(features, dtype=np.float64)
            if features.ndim != 2 or features.shape[0] != n:
                raise ValueError(f"features must have one row per item: expected {n} rows, "
                                 f"got shape {features.shape}")
            features.flags.writeable = False
        self.features = features
        self._cache: dict[str, Any] = {}
        freeze(self.worker, self.item_a, self.item_b, self.same)

    # ------------------------------------------------------------------ sizes
    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def n_answers(self) -> int:
        return len(self.same)

    def __len__(self) -> int:
        return self.n_answers

    def __repr__(self) -> str:
        extra = ""
        if self.truth is not None:
            extra += f", gold={int((self.truth >= 0).sum())}"
        if self.features is not None:
            extra += f", features={self.features.shape[1]}"
        return (f"SimilarityAnswers(answers={self.n_answers}, items={self.n_items}, "
                f"workers={self.n_workers}, same={int(self.same.sum())}{extra})")

    # ---------------------------------------------------------- derived data
    def answers_per_item(self) -> np.ndarray:
        n = self.n_items
        return np.bincount(self.item_a, minlength=n) + np.bincount(self.item_b, minlength=n)

    def answers_per_worker(self) -> np.ndarray:
        return np.bincount(self.worker, minlength=self.n_workers)

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The distinct unordered pairs: ``(lo, hi, pair code per answer)`` with ``lo < hi``.

        ``(a, b)`` and ``(b, a)`` are one pair; cached (methods aggregate answers per pair
        with ``np.bincount`` over the code).
        """
        got = self._cache.get("pairs")
        if got is None:
            lo = np.minimum(self.item_a, self.item_b).astype(np.int64)
            hi = np.maximum(self.item_a, self.item_b).astype(np.int64)
            key = lo * self.n_items + hi
            uniq, code = np.unique(key, return_inverse=True)
            plo, phi = uniq // self.n_items, uniq % self.n_items
            for arr in (plo, phi, code):
                arr.flags.writeable = False
            got = self._cache["pairs"] = (plo, phi, code)
        return got

    def truth_series(self) -> pd.Series | None:
        """Known gold cluster codes by item, or None without truth."""
        if self.truth is None:
            return None
        known = self.truth >= 0
        return pd.Series(self.truth[known], index=self.items[known], name="truth")

    # ----------------------------------------------------------- constructors
    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        worker: str = "worker",
        item_a: str = "item_a",
        item_b: str = "item_b",
        same: str = "same",
        *,
        truth: Mapping[Hashable, Hashable] | pd.Series | None = None,
        features: np.ndarray | pd.DataFrame | None = None,
        all_items: Iterable[Hashable] | None = None,
        first_line: int | None = None,
    ) -> "SimilarityAnswers":
        """Build from a DataFrame with one row per answer.

        Parameters
        ----------
        df : DataFrame
        worker, item_a, item_b, same : str
            Column names; ``same`` holds 1/0, true/false or yes/no.
        truth : mapping or Series item -> cluster, optional
            Gold cluster per item (any hashable cluster names; coded 0.. in sorted order).
            Items outside the table are ignored; missing ones are unknown (-1).  Keyed by
            item id: an array or list names no item and is refused.
        features : array or DataFrame, optional
            Item features: an array with one row per item in ``items`` order, or a DataFrame
            aligned on its index by item id.
        all_items : iterable, optional
            Items to list even if never compared; they get the prior cluster.
        first_line : int, optional
            For a frame read from a file: the file line of its first row; errors then name
            file lines (header = line 1) instead of 0-based row positions.
        """
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"from_frame expects a pandas DataFrame, got {type(df).__name__}")
        roles = {"worker": worker, "item_a": item_a, "item_b": item_b, "same": same}
        cols = list(roles.values())
        if len(set(cols)) != len(cols):
            raise ValueError(f"each role needs its own column; got {roles}")
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise ValueError(f"missing column(s) {missing}; the table has columns {list(df.columns)}"
                             + column_hint(missing, df.columns))
        for col in cols:
            if int(np.sum(df.columns == col)) > 1:
                raise ValueError(f"column {col!r} appears more than once in the table")
        if len(df) == 0 and all_items is None:
            raise ValueError("no similarity answers: the table is empty")
        # " i1" is the item "i1"; a blank is missing ("same" is read stripped anyway)
        df = strip_frame(df, cols)
        for col in cols:
            bad = df[col].isna().to_numpy()
            if bad.any():
                raise ValueError(f"missing value in column '{col}' at {row_list(bad, first_line)}")

        same_codes = _parse_same(df[same])
        bad = same_codes < 0
        if bad.any():
            first = df[same].to_numpy()[bad][0]
            first = first.item() if isinstance(first, np.generic) else first
            raise ValueError(f"same must be 1/0, true/false or yes/no; got {first!r} at "
                             f"{row_list(bad, first_line)}")

        a_vals = df[item_a].reset_index(drop=True)
        b_vals = df[item_b].reset_index(drop=True)
        pool = pd.concat([a_vals, b_vals], ignore_index=True)
        if all_items is not None:
            pool = pd.concat([pool, strip_text(pd.Series(list(all_items), dtype=object))],
                             ignore_index=True)
        codes, items = factorize_ids(pool, "item")
        n_rows = len(df)
        a_codes, b_codes = codes[:n_rows], codes[n_rows:2 * n_rows]
        selfpair = a_codes == b_codes
        if selfpair.any():
            raise ValueError(f"an item compared with itself (item_a == item_b) at "
                             f"{row_list(selfpair, first_line)}")
        worker_codes, workers = factorize_ids(df[worker], "worker")

        truth_codes = None
        if truth is not None:
            truth_s = keyed_gold(truth, "truth", key="item", value="cluster", dtype=object)
            truth_s = strip_text(truth_s, index=True)  # item ids and cluster names as written
            truth_s = truth_s[truth_s.notna().to_numpy()]
            cluster_codes, _ = factorize_ids(truth_s, "cluster")
            refuse_contradicting_gold(truth_s.index, cluster_codes, shown=truth_s.to_numpy(), unit="item")
            truth_codes = np.full(len(items), -1, dtype=np.int32)
            pos = positions_by_value(items, truth_s.index, "the answers' items")  # 17 is "17"
            ok = pos >= 0
            truth_codes[pos[ok]] = cluster_codes[ok]

        feats = None
        if features is not None:
            if isinstance(features, pd.DataFrame):
                features = features.set_axis(strip_text(features.index))  # item ids as the answers'
                lacking = items.difference(features.index)
                if len(lacking):
                    raise ValueError(f"features lack rows for {len(lacking)} item(s), "
                                     f"e.g. {lacking[0]!r}")
                feats = features.loc[items].to_numpy(dtype=float)
            else:
                feats = np.asarray(features, dtype=float)
        return cls(worker_codes, a_codes, b_codes, same_codes, workers, items,
                   truth=truth_codes, features=feats)

    @classmethod
    def from_codes(cls, worker, item_a, item_b, same, *, n_items=None, n_workers=None,
                   truth=None, features=None) -> "SimilarityAnswers":
        """Build from integer codes; ids are ``0..n-1``."""
        item_a, item_b, worker = np.asarray(item_a), np.asarray(item_b), np.asarray(worker)
        n = n_items if n_items is not None else int(max(item_a.max(initial=-1),
                                                        item_b.max(initial=-1))) + 1
        m = n_workers if n_workers is not None else int(worker.max(initial=-1)) + 1
        return cls(worker, item_a, item_b, same, pd.RangeIndex(m), pd.RangeIndex(n),
                   truth=truth, features=features)

    # ------------------------------------------------------------- exporters
    def to_frame(self) -> pd.DataFrame:
        """One row per answer: ``worker, item_a, item_b, same`` (1/0) with the user's ids."""
        return pd.DataFrame({
            "worker": self.workers.take(self.worker),
            "item_a": self.items.take(self.item_a),
            "item_b": self.items.take(self.item_b),
            "same": self.same.astype(np.int64),
        })


def as_similarity_answers(answers: Any) -> SimilarityAnswers:
    """A :class:`SimilarityAnswers` from itself or from a DataFrame with the default columns."""
    if isinstance(answers, SimilarityAnswers):
        return answers
    if isinstance(answers, pd.DataFrame):
        return SimilarityAnswers.from_frame(answers)
    raise TypeError(f"expected SimilarityAnswers or a DataFrame, got {type(answers).__name__}")
