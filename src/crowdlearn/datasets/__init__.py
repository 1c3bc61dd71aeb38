"""Small real datasets shipped inside the package, and a loader for dataset folders.

Bundled (Apache-2.0, see each folder's SOURCE.md):

* ``zencrowd_us`` — ZenCrowd entity linking, US workers: 2040 binary tasks, 74 workers,
  12190 answers, gold for every task.
* ``sentiment_polarity`` — movie-review sentiment (Rodrigues et al.): binary, gold for every
  task.
"""

from __future__ import annotations

from pathlib import Path

from ..core.io import folder_kind, load_folder, read_table

__all__ = ["load", "available", "load_folder", "folder_kind", "DATA_DIR"]

DATA_DIR = Path(__file__).parent / "data"


def available() -> list[str]:
    """Names of the bundled datasets."""
    return sorted(p.name for p in DATA_DIR.iterdir() if (p / "labels.csv.gz").exists())


def load(name: str, kind: str | None = None, with_features: bool = False):
    """Load a bundled dataset, or any folder in the common format, as its kind's answer table.

    The kind is ``kind``, else :func:`~crowdlearn.core.io.folder_kind` (the folder's
    SOURCE.md, else its files).  Class labels (and ordinal ones) give ``CrowdLabels``;
    continuous answers (``labels.csv``) a ``ContinuousAnswers``; comparisons
    (``pairs.csv``, gold groups or ranks with 1 = best, within its ``query`` column when
    present) a ``Comparisons``.  Gold, when present, is attached as ``truth``.
    """
    folder = DATA_DIR / name
    if not folder.is_dir():
        if not Path(name).is_dir():
            raise ValueError(f"unknown dataset {name!r}; bundled datasets: {', '.join(available())}")
        folder = Path(name)
    kind = kind or folder_kind(folder)
    if kind in ("classification", "ordinal", "learning"):
        return load_folder(folder, with_features=with_features)
    return _load_answers(folder, kind)


def _load_answers(path: Path, kind: str):
    """A folder of another answer kind than class labels, read by its kind's table."""
    from ..registry import answer_type_of

    table = answer_type_of(kind)
    if kind == "pairwise":
        from ..pairwise.data import read_truth

        answers = read_table(path / "pairs.csv", columns=table.ROLES, fmt="csv")
        group = "query" if "query" in answers.columns else None
        truth = None
        if (path / "truth.csv").exists():
            # the shared format's pairwise gold is a group or rank per item: 1 = best
            truth = read_truth(path / "truth.csv", item="task", value="truth", group=group,
                               lower_is_better=True)
        return table.from_frame(answers, group=group, truth=truth, first_line=2)
    truth = None
    if (path / "truth.csv").exists():
        truth = read_table(path / "truth.csv", columns=("task", "truth"), fmt="csv").set_index("task")["truth"]
    return table.from_csv(path / "labels.csv", truth=truth)



