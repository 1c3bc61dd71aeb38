"""What the answer tables of every kind share: reading files by column role.

Each answer kind has its own immutable table (``ContinuousAnswers``, ``MultiLabelAnswers``,
``Comparisons``, ``SimilarityAnswers``; class labels are :class:`~crowdlearn.core.data.CrowdLabels`),
built from a DataFrame by its ``from_frame(df, <role>=<column>, ..., first_line=...)``.  The
file readers are the same for all of them and live here, once: the columns of the table's
``ROLES`` (and of the ``OPTIONAL_ROLES`` given) must be present, ids are read as text, and
errors name file lines -- a header line above CSV and TSV rows, none above JSON Lines records,
row positions for Parquet, which has no lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

__all__ = ["AnswerTable", "check_codes", "freeze"]

def check_codes(*columns: tuple) -> None:
    """Raise ``ValueError`` unless every ``(codes, size, name)`` has codes in ``[0, size)``."""
    for codes, size, name in columns:
        if len(codes) and (codes.min() < 0 or codes.max() >= size):
            raise ValueError(f"{name} codes must lie in [0, {size})")


def freeze(*arrays) -> None:
    """Make the given arrays read-only (``None`` entries are skipped): tables are immutable."""
    for arr in arrays:
        if arr is not None:
            arr.flags.writeable = False


class AnswerTable:
    """Mixin of the answer tables: :meth:`from_csv` and :meth:`from_parquet` by column role.

    A subclass names its required column roles, in ``from_frame``'s positional order, in
    ``ROLES`` (e.g. ``("worker", "left", "right", "label")``) and the optional ones that
    ``from_frame`` takes by keyword in ``OPTIONAL_ROLES`` (e.g. ``("group",)``).
    """

    __slots__ = ()  # the tables keep their own __slots__

    ROLES: ClassVar[tuple[str, ...]] = ()
    OPTIONAL_ROLES: ClassVar[tuple[str, ...]] = ()

    @property
    def n_workers(self) -> int:
        return len(self.workers)

    @classmethod
    def from_csv(cls, path: str | Path, *columns: str, **kwargs: Any):
        """Read a CSV, TSV or JSON Lines file (format from the extension), one row per answer.

        ``columns`` (positional, in ``ROLES`` order) or ``<role>=<column>`` keywords name the
        columns; other keywords go to ``from_frame``.
        """
        return cls._read_file(path, None, columns, kwargs)

    @classmethod
    def from_parquet(cls, path: str | Path, *columns: str, **kwargs: Any):
        """Read a Parquet file (needs pyarrow); arguments as :meth:`from_csv`."""
        return cls._read_file(path, "parquet", columns, kwargs)

    @classmethod
    def _read_file(cls, path, fmt: str | None, columns: tuple, kwargs: dict):
        from .tables import first_record_line, read_table

        if len(columns) > len(cls.ROLES):
            raise TypeError(f"{cls.__name__} has {len(cls.ROLES)} column roles {cls.ROLES}, "
                            f"got {len(columns)} column names")
        names = dict(zip(cls.ROLES, columns))
        for role in cls.ROLES:
            if role in kwargs:
                if role in names:
                    raise TypeError(f"column of role {role!r} given twice")
                names[role] = kwargs.pop(role)
        required = [names.get(role, role) for role in cls.ROLES]
        optional = [kwargs[role] for role in cls.OPTIONAL_ROLES if kwargs.get(role) is not None]
        df = read_table(path, columns=(*required, *optional), fmt=fmt)
        kwargs.setdefault("first_line", first_record_line(path, fmt))
        return cls.from_frame(df, *required, **kwargs)
