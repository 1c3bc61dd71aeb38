"""Small real datasets shipped inside the package, and a loader for dataset folders.

Bundled (Apache-2.0, see each folder's SOURCE.md):

* ``zencrowd_us`` — ZenCrowd entity linking, US workers: 2040 binary tasks, 74 workers,
  12190 answers, gold for every task.
* ``sentiment_polarity`` — movie-review sentiment (Rodrigues et al.): binary, gold for every
  task.
"""

from __future__ import annotations

import builtins
import os
import re
from pathlib import Path

import pandas as pd

from ..core.io import GOLD_COLUMNS, folder_kind, load_folder, read_table
from ..core.tables import naming_file

__all__ = ["load", "locate", "list", "list_datasets", "available", "shared_root", "load_folder", "folder_kind",
           "DATA_DIR"]

DATA_DIR = Path(__file__).parent / "data"

#: answers files that make a folder a dataset in the shared format
_ANSWER_FILES = ("labels.csv", "labels.csv.gz", "pairs.csv", "similarity.csv")


def available() -> builtins.list[str]:
    """Names of the bundled datasets."""
    return sorted(p.name for p in DATA_DIR.iterdir() if (p / "labels.csv.gz").exists())


def shared_root(root: str | Path | None = None) -> Path | None:
    """The folder of shared-format datasets: ``root``, else ``$CROWDLEARN_SHARED_DATA``, else
    ``../shared/data`` from the current directory (a checkout beside ``shared``); None when
    none of them exists."""
    if root is not None:
        if not Path(root).is_dir():
            raise ValueError(f"{root}: no such folder of datasets")
        return Path(root)
    for candidate in (os.environ.get("CROWDLEARN_SHARED_DATA"), Path("..") / "shared" / "data"):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


def _is_dataset(folder: Path) -> bool:
    return folder.is_dir() and any((folder / f).exists() for f in _ANSWER_FILES)


def _first_int(pattern: str, text: str) -> float:
    m = re.search(pattern, text, re.I | re.M)
    return float(m.group(1).replace(",", "")) if m else float("nan")


def describe(folder: str | Path) -> dict:
    """One row of :func:`list_datasets` for a dataset folder, read from its ``SOURCE.md``.

    ``description`` is the SOURCE.md title after the name; the counts are its "Counts"
    lines (answers or comparisons, tasks with an answer or items, workers, classes seen,
    gold tasks); ``features`` is the width of ``features.npy`` (0 without one).  Missing
    lines give NaN: nothing is computed from the answers, so listing stays instant.
    """
    folder = Path(folder)
    src = folder / "SOURCE.md"
    text = src.read_text(encoding="utf-8", errors="replace") if src.exists() else ""
    title = next((line[1:].strip() for line in text.splitlines() if line.startswith("# ")), "")
    if ":" in title:
        title = title.split(":", 1)[1].strip()
    features = 0
    if (folder / "features.npy").exists():
        import numpy as np

        shape = np.load(folder / "features.npy", mmap_mode="r").shape
        features = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    kind = folder_kind(folder)  # once: it reads SOURCE.md and may warn about its kind line
    return {
        "name": folder.name,
        "kind": kind,
        "answers": _first_int(r"^- (?:crowd answers|comparisons)[^:]*:\s*([\d,]+)", text),
        "tasks": _first_int(r"^- tasks with at least one answer:\s*([\d,]+)", text)
        if "tasks with at least one answer" in text else _first_int(r"items[^:]*:\s*([\d,]+)", text),
        "workers": _first_int(r"^- workers:\s*([\d,]+)", text),
        "classes": _first_int(r"^- label values seen in answers \((\d+)\)", text)
        if kind in ("classification", "ordinal") else float("nan"),
        "gold": _first_int(r"^- (?:tasks with ground truth|.*rows of truth\.csv)[^:]*:\s*([\d,]+)", text),
        "features": features,
        "description": title,
    }


def list_datasets(root: str | Path | None = None, bundled: bool = True) -> pd.DataFrame:
    """The datasets :func:`load` can open: the bundled ones and the folders under ``root``.

    Parameters
    ----------
    root : path, optional
        A folder of dataset folders in the shared format (default :func:`shared_root`:
        ``$CROWDLEARN_SHARED_DATA`` or ``../shared/data``; skipped when absent).
    bundled : bool
        Include the datasets shipped in the package.

    Returns
    -------
    DataFrame indexed by ``name``
        ``kind``, ``answers``, ``tasks``, ``workers``, ``classes``, ``gold`` (counts),
        ``features`` (width, 0 when none), ``description`` (one line), ``source``
        (``bundled`` or the folder).  A bundled name shadows a folder of the same name, as in
        :func:`load`.
    """
    rows = []
    if bundled:
        rows += [{**describe(DATA_DIR / n), "source": "bundled"} for n in available()]
    base = shared_root(root)
    if base is not None:
        seen = {r["name"] for r in rows}
        for folder in sorted(p for p in base.iterdir() if _is_dataset(p)):
            if folder.name not in seen:
                rows.append({**describe(folder), "source": str(folder)})
    columns = ["name", "kind", "answers", "tasks", "workers", "classes", "gold", "features",
               "description", "source"]
    out = pd.DataFrame(rows, columns=columns).set_index("name")
    for col in ("answers", "tasks", "workers", "classes", "gold"):
        out[col] = out[col].astype("Int64")  # counts: NaN when SOURCE.md does not say
    return out


#: ``crowdlearn.datasets.list()``, as the issue names it (the builtin stays reachable as
#: ``builtins.list`` in this module)
list = list_datasets  # noqa: A001


def locate(name: str | Path, root: str | Path | None = None) -> Path:
    """The folder :func:`load` reads for ``name``.

    Parameters
    ----------
    name : str or path-like
        A bundled dataset, a folder under ``root``, or a folder's path, looked up in that order.
    root : path-like, optional
        The folder of shared datasets (default :func:`shared_root`).

    Returns
    -------
    Path
        The dataset's folder, for reading its other files (``truth.csv``) beside the answers.

    Raises
    ------
    ValueError
        ``name`` is a file, or neither a dataset nor a folder (the error lists the known ones).
    """
    folder = DATA_DIR / name
    if folder.is_dir():
        return folder
    base = shared_root(root)
    if base is not None and _is_dataset(base / name):
        return base / name
    if Path(name).is_dir():
        return Path(name)
    if Path(name).exists():
        raise ValueError(f"{name}: not a folder; a dataset is a folder holding labels.csv "
                         "(pairs.csv for comparisons) and optionally truth.csv")
    known = ", ".join(list_datasets(root).index) if base is not None else ", ".join(available())
    what = "no such folder, nor a known dataset" if os.sep in str(name) else "unknown dataset"
    raise ValueError(f"{what} {name!r}; known datasets: {known}")


def load(name: str, kind: str | None = None, with_features: bool = False, root: str | Path | None = None):
    """Load a bundled dataset, or any folder in the common format, as its kind's answer table.

    ``name`` is a bundled dataset, a folder under ``root`` (default :func:`shared_root`), or a
    folder's path.  The kind is ``kind``, else :func:`~crowdlearn.core.io.folder_kind` (the
    folder's SOURCE.md, else its files).  Class labels (and ordinal ones) give ``CrowdLabels``;
    continuous answers (``labels.csv``) a ``ContinuousAnswers``; similarity answers
    (``similarity.csv``, else ``labels.csv``) a ``SimilarityAnswers``; comparisons
    (``pairs.csv``, else ``labels.csv``; gold ``task,truth`` groups or ranks with 1 = best,
    or a ``score`` column with higher = better; grouped by its ``group`` column, as
    ``fit(frame)`` and ``crowdlearn aggregate`` group them, else by a ``query`` column, the
    shared data's) a ``Comparisons``.  The gold's unit column may be ``task`` or ``item``.  Gold, when present, is attached as ``truth``; item features
    (``features.npy`` in the order of ``tasks.csv``) as ``features`` with
    ``with_features=True`` (class labels; tasks that have features but no answer are then
    kept, for learning).
    """
    folder = locate(name, root)
    kind = kind or folder_kind(folder)
    if kind in ("classification", "ordinal", "learning"):
        return load_folder(folder, with_features=with_features)
    return _load_answers(folder, kind)


def _folder_truth(path: Path, kind: str, group: str | None = None):
    """The gold of a folder's ``truth.csv`` (None without one), for the answer tables.

    Its unit column is ``task`` (the shared format) or ``item`` (what ``crowdlearn simulate
    --truth-out`` writes for comparisons and similarity answers, which are about items).
    Comparisons' gold is a ``score`` column, higher = better (the planted scores ``simulate``
    writes), or, as in the shared data, ``task,truth``: groups or ranks, 1 = best (negated so
    that higher is better).  ``item,truth`` is refused for comparisons rather than guessed:
    ``aggregate --gold`` reads it as scores and ``simulate`` wrote scores under that header
    before, so taking it for ranks would reverse them silently.  A file without a unit or a
    value column is an error naming the columns it has.
    """
    file = path / "truth.csv"
    if not file.exists():
        return None
    columns = builtins.list(read_table(file, fmt="csv").columns)  # (list is list_datasets here)
    unit = next((c for c in ("task", "item") if c in columns), None)
    values = ("score", "truth") if kind == "pairwise" else GOLD_COLUMNS
    value = next((c for c in values if c in columns), None)
    if unit is None or value is None:
        raise ValueError(f"{file}: expected a task (or item) column and a {' or '.join(values)} "
                         f"column; the file has columns {columns}")
    if kind == "pairwise":
        from ..pairwise.data import read_truth, truth_columns

        unit, value, lower = truth_columns(columns, file)
        if lower is None:
            raise ValueError(f"{file}: comparisons' gold '{unit},{value}' could be scores or ranks; "
                             "name the column score (higher = better), or give groups or ranks "
                             "(1 = best) as task,truth like the shared data")
        return read_truth(file, item=unit, value=value, group=group, lower_is_better=lower)
    return read_table(file, columns=(unit, value), fmt="csv").set_index(unit)[value]


def _load_answers(path: Path, kind: str):
    """A folder of another answer kind than class labels, read by its kind's table: answers
    in ``pairs.csv`` (comparisons) or ``similarity.csv`` (similarity), else ``labels.csv``;
    gold in ``truth.csv`` (:func:`_folder_truth`)."""
    from ..registry import answer_type_of

    table = answer_type_of(kind)
    # comparisons and similarity answers are told by their file (folder_kind); labels.csv
    # otherwise, as ``--kind`` may say what a folder holds
    answers = path / {"pairwise": "pairs.csv", "similarity": "similarity.csv"}.get(kind, "labels.csv")
    if not answers.exists():
        answers = path / "labels.csv"
    if not answers.exists():
        what = {"pairwise": "pairs.csv (nor labels.csv)",
                "similarity": "similarity.csv (nor labels.csv)"}.get(kind, "labels.csv")
        raise FileNotFoundError(f"{path}: no {what} in this folder")
    if kind == "pairwise":
        from ..pairwise.data import default_group

        frame = read_table(answers, columns=table.ROLES, fmt="csv")
        # a group column as everywhere (default_group), else the shared data's query column
        group = default_group(frame.columns) or ("query" if "query" in frame.columns else None)
        truth = _folder_truth(path, kind, group)
        with naming_file(answers, path / "truth.csv"):
            return table.from_frame(frame, group=group, truth=truth, first_line=2)
    truth = _folder_truth(path, kind)
    with naming_file(answers, path / "truth.csv"):
        return table.from_csv(answers, truth=truth)



