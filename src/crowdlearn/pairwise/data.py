"""The pairwise answer table: :class:`Comparisons`, one row per "which of the two is better".

Each answer is a worker comparing two items, ``left`` and ``right``, and naming the winner or
calling a tie.  The table stores the answers as integer codes (``worker``, ``left``,
``right``: ``int32``; ``outcome``: ``int8``, 0 = left wins, 1 = right wins, 2 = tie) with the
ids in pandas Indexes, like :class:`crowdlearn.core.data.CrowdLabels`; the arrays are
read-only.  Memory is O(L + n_items); nothing of size items x items is ever allocated.
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
from .backend import compiled_pairwise, resolve_backend

__all__ = ["Comparisons", "as_comparisons", "default_group", "read_truth", "check_role_columns", "factorize_units",
           "split_unit_text",
           "TIE_MARKERS", "SIDE_MARKERS", "GROUP_COLUMN", "GROUP_SEP", "UNIT_LEVELS", "LEFT", "RIGHT", "TIE"]

#: outcome codes
LEFT, RIGHT, TIE = 0, 1, 2
#: labels read as a tie (compared after stripping blanks and lower-casing)
TIE_MARKERS = ("tie", "draw", "=")
#: labels naming the winning side instead of its item (compared like the tie markers)
SIDE_MARKERS = {"left": LEFT, "right": RIGHT}
#: the levels of the units of grouped comparisons: a (group, item) pair, never one text
UNIT_LEVELS = ("group", "item")
#: the column that groups comparisons when no other is named (:func:`default_group`)
GROUP_COLUMN = "group"
#: separator of the one-text spelling ``group::item`` of a grouped unit, accepted in truth
#: keys and ``all_items`` only where it occurs at exactly one place (else it is ambiguous)
GROUP_SEP = "::"
#: :meth:`Comparisons.pair_index` numbers the pairs in a dense array of ``n_items^2`` entries
#: while that is at most this many per comparison (an entry takes 16 bytes at the peak in the
#: numpy loop, 4 in the compiled one)
DENSE_PAIRS_PER_COMPARISON = 4


def _text(values: pd.Series) -> np.ndarray:
    """Ids as text, so a label ``"3"`` read from a file names the item ``3`` of a frame."""
    return values.astype(str).to_numpy()


def _stripped_keys(index: pd.Index) -> pd.Index:
    """Gold keys with their text stripped as the answers' ids are
    (:func:`~crowdlearn.core.ids.strip_text`), each level of (group, item) keys alike."""
    if isinstance(index, pd.MultiIndex):
        return pd.MultiIndex.from_arrays(
            [strip_text(pd.Index(index.get_level_values(i), dtype=object)) for i in range(index.nlevels)],
            names=index.names)
    return strip_text(index)


def default_group(columns: Iterable[Hashable]) -> str | None:
    """The group column of comparisons read by their default columns: :data:`GROUP_COLUMN`
    when the table has it, else None.

    Every role's column is named after the role unless another is given (``worker``,
    ``left``, ...), and ``group`` is a role of :class:`Comparisons`; so a column ``group``
    groups the comparisons wherever a table is read by its default columns --
    ``estimator.fit(frame)`` (:func:`as_comparisons`), ``crowdlearn aggregate`` and dataset
    folders -- and all three rank the same units.

    Parameters
    ----------
    columns : iterable
        The table's column names.

    Returns
    -------
    str or None
    """
    return GROUP_COLUMN if GROUP_COLUMN in set(columns) else None


def factorize_units(groups: Any, names: Any) -> tuple[np.ndarray, pd.MultiIndex]:
    """Codes of (group, item) pairs and the distinct pairs, as grouped comparisons' units.

    Parameters
    ----------
    groups, names : array-like of the same length
        The group and the item id of each entry.

    Returns
    -------
    codes : (n,) array of int
        The unit of each entry.
    units : pandas.MultiIndex
        Levels :data:`UNIT_LEVELS`, sorted by group and then by item.

    Notes
    -----
    The group and the item are numbered separately and combined as integers, never joined
    into one text: ``("g", "x::y")`` and ``("g::x", "y")`` are two units, whatever
    separator either id holds.
    """
    g_codes, g_ids = factorize_ids(pd.Series(groups, dtype=object), UNIT_LEVELS[0])
    i_codes, i_ids = factorize_ids(pd.Series(names, dtype=object), UNIT_LEVELS[1])
    n_names = max(len(i_ids), 1)
    codes, keys = pd.factorize(g_codes.astype(np.int64) * n_names + i_codes, sort=True)
    keys = np.asarray(keys, dtype=np.int64)
    units = pd.MultiIndex(levels=[g_ids, i_ids], codes=[keys // n_names, keys % n_names],
                          names=list(UNIT_LEVELS))
    return codes.astype(np.int64, copy=False), units


def split_unit_text(text: str) -> tuple[str, str] | None:
    """The (group, item) pair the text ``group::item`` names, or None when it names none.

    Parameters
    ----------
    text : str

    Returns
    -------
    tuple of str or None
        The two parts, stripped as ids are, when :data:`GROUP_SEP` occurs at exactly one
        place in ``text``; None when it does not occur, or could be split at two places
        (``"g::x::y"``, ``"g:::y"``: two units could be meant, so neither is guessed).
    """
    at = [i for i in range(len(text) - len(GROUP_SEP) + 1) if text.startswith(GROUP_SEP, i)]
    if len(at) != 1:
        return None
    return text[:at[0]].strip(), text[at[0] + len(GROUP_SEP):].strip()


def _unit_key(key: Any, what: str) -> tuple:
    """The (group, item) pair a key of grouped comparisons names: a pair as given (text
    parts stripped as ids are), or the text ``group::item`` (:func:`split_unit_text`); any
    other key is refused with a ``ValueError`` naming it."""
    if isinstance(key, tuple) and len(key) == 2:
        return tuple(part.strip() if isinstance(part, str) else part for part in key)
    if isinstance(key, str):
        pair = split_unit_text(key)
        if pair is not None:
            return pair
        raise ValueError(
            f"{what} {key!r} does not name one (group, item) unit: the text form 'group"
            f"{GROUP_SEP}item' needs {GROUP_SEP!r} at exactly one place; give a (group, item) "
            "pair (a tuple, or a two-level MultiIndex)")
    raise ValueError(f"{what} {key!r} names no (group, item) unit of grouped comparisons; give "
                     "a (group, item) pair (a tuple, or a two-level MultiIndex)")


def _unit_positions(units: pd.MultiIndex, keys: list) -> np.ndarray:
    """Position of each (group, item) key among ``units`` (-1 when absent); each part is
    matched as :func:`~crowdlearn.core.ids.positions_by_value` matches ids, so the group
    ``17`` of a frame read by pandas is the group ``"17"`` of a file."""
    if not keys:
        return np.empty(0, dtype=np.intp)
    parts = [positions_by_value(units.levels[k], [key[k] for key in keys], f"the {name}s")
             for k, name in enumerate(UNIT_LEVELS)]
    n_names = max(len(units.levels[1]), 1)
    flat = pd.Index(units.codes[0].astype(np.int64) * n_names + units.codes[1])
    pos = flat.get_indexer(parts[0].astype(np.int64) * n_names + parts[1])
    pos[(parts[0] < 0) | (parts[1] < 0)] = -1
    return pos


def check_role_columns(df: pd.DataFrame, roles: dict, what: str, first_line: int | None) -> None:
    """One ``ValueError`` for a table that cannot be read: a column shared by two roles,
    missing or repeated, an empty table (``what`` names its rows), or a missing value (named
    by row, :func:`crowdlearn.core.ids.row_list`)."""
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
    if len(df) == 0:
        raise ValueError(f"no {what}: the table is empty")
    for col in cols:
        bad = df[col].isna().to_numpy()
        if bad.any():
            raise ValueError(f"missing value in column '{col}' at {row_list(bad, first_line)}")


class Comparisons(AnswerTable):
    """Pairwise comparisons as an immutable, integer-coded table.

    Parameters
    ----------
    worker, left, right : array of int
        Codes of length L; ``left != right`` on every row.
    outcome : array of int
        0 = ``left`` wins, 1 = ``right`` wins, 2 = tie.
    workers, items : pandas.Index
        The ids behind the codes.  An item that is never compared may be listed (it gets the
        prior in every fit).  For grouped comparisons (see :meth:`from_frame`) ``items`` is
        a two-level MultiIndex of (group, item) pairs (:data:`UNIT_LEVELS`), each listed once.
    truth : array of float, optional
        Gold score per item, higher = better; ``NaN`` where unknown.

    Attributes
    ----------
    item_group, item_name : array or None
        For grouped comparisons, the group and the item id of every unit (the two levels of
        ``items``); None otherwise.

    Notes
    -----
    Labels: a label equal to the row's left id means "left wins", to its right id "right
    wins" (ids are compared as text, so ``3`` and ``"3"`` are the same item); otherwise, after
    stripping blanks and lower-casing, ``"left"`` and ``"right"`` name the winning side
    (:data:`SIDE_MARKERS`) and ``"tie"``, ``"draw"`` and ``"="`` (:data:`TIE_MARKERS`) mean a
    tie.  The side ids are checked first, so an item called ``tie`` or ``left`` can still win.
    Anything else is refused with a ``ValueError`` naming the rows.

    Text ids and labels lose surrounding whitespace, as class labels' do
    (:func:`~crowdlearn.core.ids.strip_text`): ``" a"`` and ``"a"`` are one item (so the
    label ``"a "`` names the item ``a``), on every path (workers, items, labels and the tie
    markers, groups, gold, ``all_items``), so gold still matches; a value of blanks is a
    missing value.

    Groups: when comparisons are made within a context -- a query in a similarity judgment,
    a prompt for model responses -- the same item can rank differently in each context, so
    the unit is the (group, item) pair.  Units are kept as pairs -- ``items`` is a
    MultiIndex, and so is the index of every fitted score -- never joined into one text, so
    ids holding any separator cannot make two units one.  Items of different groups are
    never compared with each other (each group is its own comparison graph, and ranks are
    given within groups).
    """

    ROLES = ("worker", "left", "right", "label")
    OPTIONAL_ROLES = ("group",)

    __slots__ = ("worker", "left", "right", "outcome", "workers", "items", "truth", "_cache")

    def __init__(
        self,
        worker: np.ndarray,
        left: np.ndarray,
        right: np.ndarray,
        outcome: np.ndarray,
        workers: pd.Index,
        items: pd.Index,
        truth: np.ndarray | None = None,
    ) -> None:
        worker = np.ascontiguousarray(worker, dtype=np.int32)
        left = np.ascontiguousarray(left, dtype=np.int32)
        right = np.ascontiguousarray(right, dtype=np.int32)
        outcome = np.ascontiguousarray(outcome, dtype=np.int8)
        if not (len(worker) == len(left) == len(right) == len(outcome)):
            raise ValueError("worker, left, right and outcome arrays must have the same length")
        n, m = len(items), len(workers)
        check_codes((worker, m, "worker"), (left, n, "left"), (right, n, "right"),
                    (outcome, 3, "outcome"))
        if np.any(left == right):
            raise ValueError(f"self-comparisons (left == right) at {row_list(left == right)}")
        self.worker, self.left, self.right, self.outcome = worker, left, right, outcome
        self.workers = pd.Index(workers, name="worker")
        if isinstance(items, pd.MultiIndex):  # grouped: (group, item) units
            if items.nlevels != len(UNIT_LEVELS):
                raise ValueError(f"grouped items must be (group, item) pairs, a MultiIndex of two "
                                 f"levels; got {items.nlevels}")
            items = items.set_names(list(UNIT_LEVELS))
            if not items.is_unique:
                raise ValueError(f"the unit {items[items.duplicated()][0]!r} is listed more than once")
            self.items = items
        else:
            self.items = pd.Index(items, name="item")
        if truth is not None:
            truth = np.array(truth, dtype=np.float64)
            if truth.shape != (n,):
                raise ValueError(f"truth must have one entry per item ({n}), got {truth.shape}")
            truth.flags.writeable = False
        self.truth = truth
        self._cache: dict[str, Any] = {}
        freeze(self.worker, self.left, self.right, self.outcome)

    # ------------------------------------------------------------------ sizes
    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def n_comparisons(self) -> int:
        return len(self.left)

    @property
    def grouped(self) -> bool:
        return isinstance(self.items, pd.MultiIndex)

    def _level(self, k: int) -> np.ndarray | None:
        """Level ``k`` of grouped units as a read-only object array (cached); None ungrouped."""
        if not self.grouped:
            return None
        got = self._cache.get(("level", k))
        if got is None:
            got = np.asarray(self.items.get_level_values(k), dtype=object)
            got.flags.writeable = False
            self._cache[("level", k)] = got
        return got

    @property
    def item_group(self) -> np.ndarray | None:
        """The group of every unit of grouped comparisons (None when ungrouped)."""
        return self._level(0)

    @property
    def item_name(self) -> np.ndarray | None:
        """The item id, as given, of every unit of grouped comparisons (None when ungrouped)."""
        return self._level(1)

    def __len__(self) -> int:
        return self.n_comparisons

    def __repr__(self) -> str:
        counts = np.bincount(self.outcome, minlength=3)
        extra = f", groups={len(pd.unique(self.item_group))}" if self.grouped else ""
        if self.truth is not None:
            extra += f", gold={int(np.isfinite(self.truth).sum())}"
        return (f"Comparisons(comparisons={self.n_comparisons}, items={self.n_items}, "
                f"workers={self.n_workers}, ties={int(counts[TIE])}{extra})")

    # ---------------------------------------------------------- derived data
    def comparisons_per_item(self) -> np.ndarray:
        return (np.bincount(self.left, minlength=self.n_items)
                + np.bincount(self.right, minlength=self.n_items))

    def comparisons_per_worker(self) -> np.ndarray:
        return np.bincount(self.worker, minlength=self.n_workers)

    def pair_index(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The comparisons' distinct unordered item pairs, cached on the table.

        Returns
        -------
        codes : (L,) int64
            Per comparison, the index of its pair in ``a`` and ``b``.
        swap : (L,) bool
            Whether the comparison's left item is the pair's ``b`` (the larger item code).
        a, b : (n_pairs,) int64
            The pairs' item codes, ``a < b``, sorted by ``a`` and then ``b``.

        Notes
        -----
        A pair is the code ``a * n_items + b``.  When ``n_items^2`` is at most
        :data:`DENSE_PAIRS_PER_COMPARISON` times the number of comparisons (and for any table
        up to ``2^20`` possible pairs), the codes are marked in a dense array of that size
        and numbered by a cumulative sum (in one compiled loop,
        :func:`crowdlearn.pairwise.compiled.dense_pair_codes`, when the
        :mod:`~crowdlearn.pairwise.backend` is numba): sequential passes, several times
        faster than the hash factorisation used above that size, whose memory stays O(L).
        """
        got = self._cache.get("pairs")
        if got is None:
            n = max(self.n_items, 1)
            swap = self.left > self.right
            if n * n > max(DENSE_PAIRS_PER_COMPARISON * self.n_comparisons, 1 << 20):
                low = np.minimum(self.left, self.right).astype(np.int64)
                codes, uniques = pd.factorize(low * n + np.maximum(self.left, self.right),
                                              sort=True)
                uniques = np.asarray(uniques, dtype=np.int64)
                got = (codes.astype(np.int64, copy=False), swap, uniques // n, uniques % n)
            elif resolve_backend("auto", self.n_comparisons) == "numba":
                codes, a, b = compiled_pairwise().dense_pair_codes(self.left, self.right, n)
                got = (codes, swap, a, b)
            else:
                low = np.minimum(self.left, self.right).astype(np.int64)
                key = low * n + np.maximum(self.left, self.right)
                present = np.bincount(key, minlength=n * n) > 0
                uniques = np.flatnonzero(present)
                number = np.cumsum(present, dtype=np.int64)
                got = (number[key] - 1, swap, uniques // n, uniques % n)
            freeze(*got)
            self._cache["pairs"] = got
        return got

    def components(self) -> tuple[int, np.ndarray]:
        """Connected components of the comparison graph (items = nodes, compared pairs =
        edges): ``(count, label per item)``.  An item never compared is its own component.

        Built on the distinct pairs of :meth:`pair_index` (which the fits need anyway): a
        compiled union-find over them when the :mod:`~crowdlearn.pairwise.backend` is numba
        (a few times faster than scipy), else scipy's ``connected_components`` on them as a
        CSR matrix -- sorted and free of duplicates, they are one as they stand, so scipy does
        not sort the L comparisons.  Labels are numbered alike by both.
        """
        got = self._cache.get("components")
        if got is None:
            n = self.n_items
            _, _, a, b = self.pair_index()
            if resolve_backend("auto", len(a)) == "numba":
                count, labels = compiled_pairwise().union_find_components(a, b, n)
            else:
                import scipy.sparse as sp
                from scipy.sparse.csgraph import connected_components

                indptr = np.zeros(n + 1, dtype=np.int64)
                np.cumsum(np.bincount(a, minlength=n), out=indptr[1:])
                graph = sp.csr_matrix((np.ones(len(a), dtype=np.int8), b, indptr), shape=(n, n))
                count, labels = connected_components(graph, directed=False)
            labels.flags.writeable = False
            got = self._cache["components"] = (int(count), labels)
        return got

    def truth_series(self) -> pd.Series | None:
        """Known gold scores by item (higher = better), or None without truth."""
        if self.truth is None:
            return None
        known = np.isfinite(self.truth)
        return pd.Series(self.truth[known], index=self.items[known], name="truth")

    def group_codes(self) -> np.ndarray:
        """The group of every item as an int code (all zeros when ungrouped)."""
        if not self.grouped:
            return np.zeros(self.n_items, dtype=np.int64)
        return np.asarray(self.items.codes[0], dtype=np.int64)

    # ----------------------------------------------------------- constructors
    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        worker: str = "worker",
        left: str = "left",
        right: str = "right",
        label: str = "label",
        group: str | None = None,
        *,
        truth: Mapping[Hashable, float] | pd.Series | None = None,
        all_items: Iterable[Hashable] | None = None,
        first_line: int | None = None,
    ) -> "Comparisons":
        """Build from a DataFrame with one row per comparison.

        Parameters
        ----------
        df : DataFrame
        worker, left, right, label : str
            Column names (see the class Notes for what a label may be).
        group : str, optional
            Column of the context the two items are compared in (e.g. ``"query"``).  Units
            are then (group, item) pairs: ``items`` is a MultiIndex (:data:`UNIT_LEVELS`),
            ids read as text.
        truth : mapping or Series item -> score, optional
            Gold score per item, higher = better (pass ``-rank`` or ``-group`` for truth
            where lower is better).  With ``group``, keys are ``(group, item)`` tuples (a
            two-level MultiIndex), or the text ``"group::item"`` when ``::``
            (:data:`GROUP_SEP`) occurs at exactly one place in it; any other key is refused.
            Items outside the table are ignored; missing ones are unknown (NaN).  Keyed by
            item id: an array or list names no item and is refused.
        all_items : iterable, optional
            Items to list even if never compared; they get the prior.  With ``group``, units
            named as the keys of ``truth`` are.
        first_line : int, optional
            For a frame read from a file: the file line of its first row; errors then name
            file lines (header = line 1) instead of 0-based row positions.
        """
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"from_frame expects a pandas DataFrame, got {type(df).__name__}")
        roles = {"worker": worker, "left": left, "right": right, "label": label}
        if group is not None:
            roles["group"] = group
        # " a" is the item "a", and the label "a " names it; a blank is missing
        df = strip_frame(df, roles.values())
        check_role_columns(df, roles, "comparisons", first_line)

        numeric = all(pd.api.types.is_integer_dtype(df[c].dtype) for c in (left, right, label))
        if numeric:  # integer ids: compare the numbers (no text copies of a large table)
            left_t, right_t, label_t = (df[c].to_numpy() for c in (left, right, label))
        else:
            left_t, right_t, label_t = _text(df[left]), _text(df[right]), _text(df[label])
        same = left_t == right_t
        if same.any():
            raise ValueError(f"self-comparison (left == right) at {row_list(same, first_line)}")
        # left and right differ on every row, so a label matches at most one side:
        # RIGHT (1) where it is the right id, -1 where it is neither (a tie marker or an
        # error), LEFT (0) otherwise -- bool arithmetic, a tenth of masked assignments' cost
        is_left, is_right = label_t == left_t, label_t == right_t
        outcome = is_right.view(np.int8) - (~(is_left | is_right)).view(np.int8)
        undecided = outcome < 0
        if undecided.any():
            marker = np.char.lower(np.char.strip(label_t[undecided].astype(str)))
            rows = np.flatnonzero(undecided)
            outcome[rows[np.isin(marker, TIE_MARKERS)]] = TIE
            # exports that record which side won ("left"/"right") rather than the item
            for word, side in SIDE_MARKERS.items():
                outcome[rows[marker == word]] = side
        bad = outcome < 0
        if bad.any():
            first = label_t[bad][0]
            raise ValueError(
                f"label {first!r} is neither the left nor the right item, nor a side "
                f"({', '.join(repr(t) for t in SIDE_MARKERS)}), nor a tie "
                f"({', '.join(repr(t) for t in TIE_MARKERS)}) at {row_list(bad, first_line)}")

        n_rows = len(df)
        if group is not None:
            # (group, item) units numbered from the two ids apart: joined into one text,
            # ("g", "x::y") and ("g::x", "y") became the same unit
            group_t = _text(df[group])
            groups = [group_t, group_t]
            names = [_text(df[left]), _text(df[right])]
            if all_items is not None:
                extra = [_unit_key(k, "all_items entry") for k in all_items]  # text, as the rows'
                groups.append(np.array([str(g) for g, _ in extra], dtype=object))
                names.append(np.array([str(i) for _, i in extra], dtype=object))
            codes, items = factorize_units(np.concatenate(groups), np.concatenate(names))
        else:
            if numeric and left_t.dtype == right_t.dtype:
                # numpy's concatenation: a plain copy of the integers (pandas checks dtypes first)
                pool = pd.Series(np.concatenate([left_t, right_t]))
            else:
                pool = pd.concat([df[left].reset_index(drop=True), df[right].reset_index(drop=True)],
                                 ignore_index=True)
            if all_items is not None:
                pool = pd.concat([pool, strip_text(pd.Series(list(all_items), dtype=object))],
                                 ignore_index=True)
            codes, items = factorize_ids(pool, "item")
        left_codes, right_codes = codes[:n_rows], codes[n_rows:2 * n_rows]
        worker_codes, workers = factorize_ids(df[worker], "worker")

        truth_arr = None
        if truth is not None:
            if isinstance(truth, Mapping):  # (group, item) keys become a MultiIndex, as in a Series
                index, vals = pd.Index(list(truth.keys())), list(truth.values())
            else:  # an array or list names no item: refused
                truth = keyed_gold(truth, "truth", key="item", value="score")
                index, vals = truth.index, truth.to_numpy()
            keys = list(_stripped_keys(index))  # ids as the answers'
            if isinstance(getattr(truth, "index", None), pd.MultiIndex) and truth.index.nlevels != 2:
                raise ValueError("truth with a MultiIndex must have two levels (group, item)")
            if group is not None:  # each key names one (group, item) unit, or is refused
                keys = [_unit_key(k, "truth key") for k in keys]
            truth_s = pd.Series(vals, index=pd.Index(keys, tupleize_cols=False), dtype=object)
            values = pd.to_numeric(truth_s, errors="coerce").to_numpy(dtype=float)
            bad_truth = ~np.isfinite(values) & truth_s.notna().to_numpy()
            if bad_truth.any():
                raise ValueError(f"truth for item {truth_s.index[bad_truth][0]!r} is not a "
                                 f"finite number: {truth_s[bad_truth].iloc[0]!r}")
            given = np.isfinite(values)  # NaN = unknown, as an empty cell
            refuse_contradicting_gold(truth_s.index[given], values[given], shown=truth_s.to_numpy()[given],
                                      unit="item")
            truth_arr = np.full(len(items), np.nan)
            if group is not None:
                pos = _unit_positions(items, keys)
            else:
                pos = positions_by_value(items, truth_s.index, "the compared items")  # 17 is "17"
            ok = pos >= 0
            truth_arr[pos[ok]] = values[ok]
        return cls(worker_codes, left_codes, right_codes, outcome, workers, items, truth=truth_arr)

    @classmethod
    def from_codes(cls, worker, left, right, outcome, *, n_items=None, n_workers=None,
                   truth=None) -> "Comparisons":
        """Build from integer codes; ids are ``0..n-1``."""
        left, right, worker = np.asarray(left), np.asarray(right), np.asarray(worker)
        n = n_items if n_items is not None else int(max(left.max(initial=-1), right.max(initial=-1))) + 1
        m = n_workers if n_workers is not None else int(worker.max(initial=-1)) + 1
        return cls(worker, left, right, outcome, pd.RangeIndex(m), pd.RangeIndex(n), truth=truth)

    # ------------------------------------------------------------- exporters
    def to_frame(self) -> pd.DataFrame:
        """One row per comparison: ``worker, left, right, label`` (label = the winner's id or
        ``"tie"``), plus ``group`` for grouped comparisons (then ``left``/``right`` are the
        item ids of the units), so ``from_frame(to_frame(), group="group")`` rebuilds the
        table."""
        if self.grouped:
            names = self.item_name
            left, right = names[self.left], names[self.right]
        else:
            left, right = self.items.take(self.left), self.items.take(self.right)
            left, right = np.asarray(left, dtype=object), np.asarray(right, dtype=object)
        label = np.where(self.outcome == LEFT, left, np.where(self.outcome == RIGHT, right, "tie"))
        frame = pd.DataFrame({"worker": self.workers.take(self.worker), "left": left,
                              "right": right, "label": label})
        if self.grouped:
            frame["group"] = self.item_group[self.left]
        return frame


def truth_columns(columns: list, path: Any = "gold") -> tuple[str, str, bool | None]:
    """How a comparisons' gold file is read, from its header: ``(item column, value column,
    lower_is_better)``; ``None`` for the last when the header does not say.

    - a ``score`` column: scores, higher = better (what ``crowdlearn simulate`` writes);
    - ``task,truth``: ranks or groups, 1 = best (the layout of the shared datasets, such as
      ``music_similarity_pairs``);
    - ``item,truth`` (or other names): could be either, so the caller decides.

    The item column is ``task`` or ``item`` when present, else the first column.
    """
    cols = [str(c) for c in columns]
    if len(cols) < 2:
        raise ValueError(f"{path}: expected an item column and a score or truth column; "
                         f"the file has columns {cols}")
    item = next((c for c in ("task", "item") if c in cols), cols[0])
    if "score" in cols:
        return item, "score", False
    value = "truth" if "truth" in cols else next(c for c in cols if c != item)
    return item, value, (True if item == "task" and value == "truth" else None)


def read_truth(path, item: str = "task", value: str = "truth", group: str | None = None, *,
               lower_is_better: bool = False) -> pd.Series:
    """Gold scores from a file (``item, value`` and optionally ``group`` columns) as the
    ``truth`` argument of :meth:`Comparisons.from_frame`: higher = better, so with
    ``lower_is_better`` (ranks, or the groups of ``music_similarity_pairs``, where group 1 is
    the most similar) the values are negated; keyed by ``(group, item)`` when grouped.  An
    item listed twice with different values is refused
    (:func:`~crowdlearn.core.gold.refuse_contradicting_gold`)."""
    from ..core.tables import read_table

    cols = (item, value) + ((group,) if group is not None else ())
    df = strip_frame(read_table(path, columns=cols), (item, group))  # ids as the answers'
    values = pd.to_numeric(df[value], errors="coerce")
    bad = values.isna().to_numpy() & df[value].notna().to_numpy()
    if bad.any():
        raise ValueError(f"{path}: non-numeric {value!r} at {row_list(bad, 2)}")
    index = (pd.MultiIndex.from_arrays([df[group], df[item]]) if group is not None
             else pd.Index(df[item]))
    given = values.notna().to_numpy()
    # checked here too, so that the error shows the file's values, not their negation
    try:
        refuse_contradicting_gold(index[given], values.to_numpy()[given], shown=df[value].to_numpy()[given],
                                  unit="item")
    except ValueError as err:  # named as the other errors of the file are
        raise ValueError(f"{path}: {err}") from None
    values = -values if lower_is_better else values
    return pd.Series(values.to_numpy(dtype=float), index=index, name="truth")


def as_comparisons(answers: Any) -> Comparisons:
    """A :class:`Comparisons` from itself or from a DataFrame with the default columns
    (``worker, left, right, label`` and, when present, ``group``: :func:`default_group`)."""
    if isinstance(answers, Comparisons):
        return answers
    if isinstance(answers, pd.DataFrame):
        return Comparisons.from_frame(answers, group=default_group(answers.columns))
    raise TypeError(f"expected Comparisons or a DataFrame, got {type(answers).__name__}")
