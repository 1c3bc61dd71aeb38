"""Small real datasets shipped inside the package, and a loader for dataset folders.

Bundled (Apache-2.0, see each folder's SOURCE.md):

* ``zencrowd_us`` — ZenCrowd entity linking, US workers: 2040 binary tasks, 74 workers,
  12190 answers, gold for every task.
* ``sentiment_polarity`` — movie-review sentiment (Rodrigues et al.): binary, gold for every
  task.
"""

from __future__ import annotations

from pathlib import Path

from ..core.io import load_folder

__all__ = ["load", "available", "load_folder", "DATA_DIR"]

DATA_DIR = Path(__file__).parent / "data"


def available() -> list[str]:
    """Names of the bundled datasets."""
    return sorted(p.name for p in DATA_DIR.iterdir() if (p / "labels.csv.gz").exists())


def load(name: str):
    """Load a bundled dataset (or any folder in the common format) as ``CrowdLabels``.

    Gold labels, when present, are attached as ``labels.truth``.
    """
    folder = DATA_DIR / name
    if not folder.is_dir():
        if Path(name).is_dir():
            return load_folder(name)
        raise ValueError(f"unknown dataset {name!r}; bundled datasets: {', '.join(available())}")
    return load_folder(folder)
