"""Inspection of the MMLC worker spectral space (projection vectors and the oracle).

matplotlib is imported only inside the plotting functions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..core.data import CrowdLabels

__all__ = ["worker_space", "plot_worker_space", "plot_density_sweep"]


def _parts(fitted) -> tuple[Any, np.ndarray | None]:
    """(MMLC model, oracle or None) from an MMLCOracle, MMLCFill or MMLC."""
    model = getattr(fitted, "model_", fitted)
    if not hasattr(model, "worker_projections_"):
        raise ValueError("pass a fitted MMLC, MMLCOracle or MMLCFill")
    return model, getattr(fitted, "oracle_", None)


def worker_space(fitted, data: CrowdLabels | None = None) -> pd.DataFrame:
    """Workers' projection vectors (+ the oracle as row ``"<oracle>"``) as one table.

    Extra columns: ``n_labels`` per worker and, when ``data`` has gold, ``accuracy`` = the
    share of the worker's own answers that match gold.
    """
    model, oracle = _parts(fitted)
    table = model.worker_projections_.copy()
    table.index = table.index.astype(object)
    table["n_labels"] = model.labels_per_worker_
    if data is not None and data.truth is not None and np.any(data.truth >= 0):
        table["accuracy"] = _worker_accuracy(data).reindex(table.index).to_numpy()
    if oracle is not None:
        row = pd.DataFrame([list(oracle) + [np.nan] * (table.shape[1] - len(oracle))],
                           index=["<oracle>"], columns=table.columns)
        table = pd.concat([table, row])
    return table


def _worker_accuracy(data: CrowdLabels) -> pd.Series:
    known = data.truth[data.task] >= 0
    hit = (data.label == data.truth[data.task]) & known
    n = np.bincount(data.worker, weights=known, minlength=data.n_workers)
    acc = np.bincount(data.worker, weights=hit, minlength=data.n_workers) / np.where(n > 0, n, np.nan)
    return pd.Series(acc, index=data.workers.astype(object))


def plot_worker_space(fitted, data: CrowdLabels | None = None, ax=None):
    """2-D PCA of the worker vectors, coloured by accuracy against gold, oracle as a star."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - optional extra
        raise ImportError("plot_worker_space needs matplotlib: pip install matplotlib") from exc
    model, oracle = _parts(fitted)
    V = model.worker_projections_.to_numpy()
    pts = V if oracle is None else np.vstack([V, oracle])
    mean = pts[:-1].mean(0) if oracle is not None else pts.mean(0)
    # PCA by SVD of the centred workers (the oracle is projected, not fitted)
    _, _, vt = np.linalg.svd(V - mean, full_matrices=False)
    comps = vt[:2] if vt.shape[0] >= 2 else np.vstack([vt, np.zeros_like(vt)])
    xy = (pts - mean) @ comps.T
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4))
    colour = None
    if data is not None and data.truth is not None and np.any(data.truth >= 0):
        colour = _worker_accuracy(data).reindex(model.workers_.astype(object)).to_numpy()
    sc = ax.scatter(xy[: len(V), 0], xy[: len(V), 1], c=colour, cmap="viridis", s=30)
    if colour is not None:
        ax.figure.colorbar(sc, ax=ax, label="worker accuracy vs gold")
    if oracle is not None:
        ax.scatter(xy[-1, 0], xy[-1, 1], marker="*", s=250, c="red", label="oracle")
        ax.legend()
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    ax.set_title("MMLC worker spectral space")
    return ax


def plot_density_sweep(table: pd.DataFrame, ax=None, label: str | None = None):
    """Accuracy against filled density from :func:`~crowdlearn.mmlc.fill.sweep_density`."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover
        raise ImportError("plot_density_sweep needs matplotlib: pip install matplotlib") from exc
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4))
    filled = table[table["b"].notna()]
    ax.plot(filled["density"], filled["accuracy"], "o-", label=label or "filled")
    raw = table[table["b"].isna()]
    if len(raw):
        ax.axhline(float(raw["accuracy"].iloc[0]), ls="--", c="grey", label="unfilled")
    ax.set_xlabel("density (answers / tasks x workers)")
    ax.set_ylabel("accuracy")
    ax.legend()
    return ax
