"""Crowd-label I/O: dataset folders, plus the table readers and writers of :mod:`.tables`.

Every reader error is a ``ValueError`` (or ``FileNotFoundError``) with the file name and what
is wrong, so the CLI can print one line instead of a traceback.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .data import CrowdLabels
from .tables import detect_format, naming_file, read_table, write_table

__all__ = ["read_table", "write_table", "detect_format", "load_folder", "read_features", "folder_kind"]

#: SOURCE.md's ``kind:`` words -> the registry's answer kinds
#: the first word of a SOURCE.md ``- kind:`` line -> answer kind (the shared folders write
#: classification, numeric and pairwise; the other words are the usual names of the same kinds)
_SOURCE_KINDS = {
    **dict.fromkeys(("classification", "categorical", "class", "binary", "multiclass"), "classification"),
    **dict.fromkeys(("numeric", "continuous", "regression", "real", "real-valued", "score", "scores",
                     "rating", "ratings"), "continuous"),
    **dict.fromkeys(("ordinal", "graded", "ordered", "likert"), "ordinal"),
    **dict.fromkeys(("multilabel", "multi-label", "multi_label", "tags", "tagging"), "multilabel"),
    **dict.fromkeys(("pairwise", "comparisons", "comparison", "preference", "preferences", "ranking"),
                    "pairwise"),
    **dict.fromkeys(("similarity", "clustering", "crowdclustering"), "similarity"),
}


def folder_kind(path: str | Path) -> str:
    """The answer kind of a dataset folder in the shared format.

    Read from the ``- kind: ...`` line of its ``SOURCE.md`` when there is one (``numeric`` is
    the continuous kind; the usual other names of each kind are understood too), else from its
    files: ``pairs.csv`` holds comparisons, ``similarity.csv`` similarity answers, anything
    else class labels.  A kind line whose word is none of these warns, naming it, before the
    files decide: scoring a continuous set as classes would give accuracy 0 without a word.
    """
    path = Path(path)
    src = path / "SOURCE.md"
    if src.exists():
        for line in src.read_text(encoding="utf-8", errors="replace").splitlines():
            text = line.strip().lstrip("-* ").lower()
            if text.startswith("kind:"):
                words = text[5:].replace("(", " ").replace(",", " ").replace(";", " ").split()
                if words and words[0] in _SOURCE_KINDS:
                    return _SOURCE_KINDS[words[0]]
                if words:
                    warnings.warn(
                        f"{src}: kind {words[0]!r} is not one crowdlearn knows "
                        f"({', '.join(sorted(set(_SOURCE_KINDS.values())))}); the kind is taken "
                        "from the folder's files (pass --kind to say it)", stacklevel=2)
                break
    if (path / "pairs.csv").exists():
        return "pairwise"
    if (path / "similarity.csv").exists():
        return "similarity"
    return "classification"


#: the gold value column of a truth file, in order of preference (``truth`` in the shared
#: format; ``aggregate --gold`` reads the same names)
GOLD_COLUMNS = ("truth", "gold", "label")


def gold_column(columns, file: str | Path) -> str:
    """The first of :data:`GOLD_COLUMNS` among ``columns``, or one error naming ``file`` and
    the columns it has."""
    found = next((c for c in GOLD_COLUMNS if c in columns), None)
    if found is None:
        raise ValueError(f"{file}: expected a gold column named {', '.join(GOLD_COLUMNS)} beside the task "
                         f"column; the file has columns {list(columns)}")
    return found


def read_features(path: str | Path) -> pd.DataFrame | None:
    """A folder's item features: ``features.npy`` rows keyed by the task ids of ``tasks.csv``.

    None when the folder lacks either file.  ``tasks.csv``'s ``task`` column (else its first)
    gives the row order; a task listed twice keeps its first row.
    """
    path = Path(path)
    if not ((path / "features.npy").exists() and (path / "tasks.csv").exists()):
        return None
    order = read_table(path / "tasks.csv", fmt="csv")
    col = "task" if "task" in order.columns else order.columns[0]
    values = np.load(path / "features.npy")
    if len(values) != len(order):
        raise ValueError(f"{path}: features.npy has {len(values)} rows but tasks.csv lists "
                         f"{len(order)} tasks; row i of features.npy is the task on line i+2 of tasks.csv")
    features = pd.DataFrame(values.reshape(len(values), -1), index=order[col].to_numpy())
    return features[~features.index.duplicated()]


def load_folder(path: str | Path, with_features: bool = False):
    """Load a dataset folder in the common format into its kind's answer table.

    The folder holds ``labels.csv`` (task,worker,label), optional ``truth.csv``
    (task,truth), and optional ``features.npy`` with ``tasks.csv`` giving its row order.
    Class labels only; :func:`crowdlearn.datasets.load` reads a folder of any answer kind.
    """
    path = Path(path)
    labels_file = path / "labels.csv"
    if not labels_file.exists():
        gz = path / "labels.csv.gz"
        if not gz.exists():
            raise FileNotFoundError(f"{path}: no labels.csv in this folder")
        labels_file = gz
    df = read_table(labels_file, columns=("task", "worker", "label"), fmt="csv")
    truth = truth_file = None
    for name in ("truth.csv", "truth.csv.gz"):
        if (path / name).exists():
            truth_file = path / name
            t = read_table(truth_file, columns=("task",), fmt="csv")
            truth = t.set_index("task")[gold_column(t.columns, truth_file)]
            break
    features = read_features(path) if with_features else None
    with naming_file(labels_file, truth_file):  # errors name labels.csv and its lines
        if features is not None:
            # tasks with features but no answers stay (end-to-end learning can use them)
            labels = CrowdLabels.from_frame(df, truth=truth, all_tasks=features.index, first_line=2)
            return labels.with_features(features)
        return CrowdLabels.from_frame(df, truth=truth, first_line=2)
