"""Estimators of the oracle worker's projection from the workers' projection vectors.

MMLC (Han et al., "Mixture of Experts based Multi-task Supervised Learning from Crowds",
AAAI 2025, arXiv:2407.13268) assumes an omniscient *oracle* worker whose projection vector
o in the worker spectral space R^E is the centre of the real workers' vectors v_1..v_W.
This module estimates that centre.  Pure numpy; no torch.

Estimators (``method``)
-----------------------
``"kde"``
    Per-coordinate 1-D Gaussian-KDE mode evaluated on an evenly spaced grid from the minimum
    to the maximum of the coordinate (the procedure of the original code)::

        o_e = argmax_{t in grid} sum_w a_w exp(-(t - v_we)^2 / (2 h_e^2))

``"kde-multivariate"``
    Mode of the product-Gaussian KDE in R^E found by mean-shift started from every sample
    point; the converged point with the highest density wins.
``"mean"`` / ``"median"``
    Coordinate-wise (weighted) mean / median.
``"weighted-kde"``, ``"weighted-kde-multivariate"``, ``"weighted-mean"``, ``"weighted-median"``
    The same with worker weights a_w = number of labels of worker w (a worker seen more often
    has a better-estimated vector).

Bandwidth
---------
``"scott"`` (default) ``h_e = s_e n_eff^{-1/(d+4)}`` and ``"silverman"``
``h_e = 0.9 min(s_e, IQR_e / 1.34) n_eff^{-1/5}`` (for d = 1; the multivariate form
``(4 / (d + 2))^{1/(d+4)} s_e n_eff^{-1/(d+4)}``), with ``s_e`` the (weighted) standard deviation
of coordinate e and ``n_eff = (sum a)^2 / sum a^2`` the Kish effective sample size; or a float
used for every coordinate.  None of these rules looks at the truth.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ESTIMATORS", "estimate_oracle", "kde_mode_1d", "kde_mode_multivariate", "bandwidths"]

ESTIMATORS = (
    "kde",
    "kde-multivariate",
    "mean",
    "median",
    "weighted-kde",
    "weighted-kde-multivariate",
    "weighted-mean",
    "weighted-median",
)


def _check(points: np.ndarray, weights: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim == 1:
        pts = pts[:, None]
    if pts.ndim != 2 or pts.shape[0] == 0:
        raise ValueError(f"points must be a non-empty (n_workers, n_dims) array, got shape {pts.shape}")
    if not np.all(np.isfinite(pts)):
        raise ValueError("points hold NaN or infinite values")
    if weights is None:
        w = np.ones(pts.shape[0])
    else:
        w = np.asarray(weights, dtype=np.float64).ravel()
        if w.shape[0] != pts.shape[0]:
            raise ValueError(f"weights must have one entry per point ({pts.shape[0]}), got {w.shape[0]}")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError("weights must be finite, non-negative and not all zero")
    return pts, w / w.sum()


def _weighted_quantile(x: np.ndarray, w: np.ndarray, q: float) -> float:
    order = np.argsort(x, kind="stable")
    xs, ws = x[order], w[order]
    cdf = np.cumsum(ws) - 0.5 * ws  # midpoint rule: unweighted case gives the usual median
    return float(np.interp(q * ws.sum(), cdf, xs))


def bandwidths(points: np.ndarray, weights: np.ndarray | None = None, rule="scott", multivariate=False) -> np.ndarray:
    """Per-coordinate kernel bandwidths by Scott's or Silverman's rule (or a fixed float)."""
    pts, w = _check(points, weights)
    n, d = pts.shape
    if not isinstance(rule, str):
        h = float(rule)
        if not np.isfinite(h) or h <= 0:
            raise ValueError(f"bandwidth must be a positive number, 'scott' or 'silverman', got {rule!r}")
        return np.full(d, h)
    n_eff = 1.0 / np.sum(w**2)
    mean = w @ pts
    sd = np.sqrt(np.maximum(w @ (pts - mean) ** 2, 0.0))
    dim = d if multivariate else 1
    if rule == "scott":
        h = sd * n_eff ** (-1.0 / (dim + 4))
    elif rule == "silverman":
        if multivariate:
            h = (4.0 / (dim + 2)) ** (1.0 / (dim + 4)) * sd * n_eff ** (-1.0 / (dim + 4))
        else:
            iqr = np.array(
                [_weighted_quantile(pts[:, e], w, 0.75) - _weighted_quantile(pts[:, e], w, 0.25) for e in range(d)]
            )
            spread = np.where(iqr > 0, np.minimum(sd, iqr / 1.34), sd)
            h = 0.9 * spread * n_eff ** (-0.2)
    else:
        raise ValueError(f"bandwidth must be 'scott', 'silverman' or a positive float, got {rule!r}")
    # a constant coordinate has sd 0: any positive width returns that constant as the mode
    return np.where(h > 0, h, 1.0)


def kde_mode_1d(x: np.ndarray, weights: np.ndarray | None = None, bandwidth="scott", grid_size: int | None = None) -> float:
    """Mode of a weighted 1-D Gaussian KDE on an even grid over [min(x), max(x)].

    ``grid_size`` defaults to ``max(len(x), 256)`` (the original code used ``len(x)``, which is
    coarse for a few dozen workers).  Densities are compared in log space (log-sum-exp).
    """
    pts, w = _check(np.asarray(x, dtype=np.float64).ravel(), weights)
    x = pts[:, 0]
    h = bandwidths(pts, w, bandwidth)[0]
    lo, hi = x.min(), x.max()
    if hi - lo <= 0:
        return float(lo)
    m = int(grid_size) if grid_size is not None else max(len(x), 256)
    if m < 2:
        raise ValueError(f"grid_size must be at least 2, got {grid_size}")
    grid = np.linspace(lo, hi, m)
    logk = -0.5 * ((grid[:, None] - x[None, :]) / h) ** 2 + np.log(np.maximum(w, 1e-300))[None, :]
    top = logk.max(axis=1, keepdims=True)
    logd = top[:, 0] + np.log(np.exp(logk - top).sum(axis=1))
    return float(grid[int(np.argmax(logd))])


def _log_density(at: np.ndarray, pts: np.ndarray, logw: np.ndarray, h: np.ndarray) -> np.ndarray:
    z = ((at[:, None, :] - pts[None, :, :]) / h) ** 2
    logk = -0.5 * z.sum(-1) + logw[None, :]
    top = logk.max(axis=1, keepdims=True)
    return top[:, 0] + np.log(np.exp(logk - top).sum(axis=1))


def kde_mode_multivariate(
    points: np.ndarray, weights: np.ndarray | None = None, bandwidth="scott", max_iter: int = 500, tol: float = 1e-9
) -> np.ndarray:
    """Mode of a weighted product-Gaussian KDE by mean-shift from every sample point.

    Mean-shift (Comaniciu & Meer 2002) update with a diagonal bandwidth ``H = diag(h^2)``::

        y <- sum_w a_w K((y - v_w)/h) v_w / sum_w a_w K((y - v_w)/h)

    converges to a local mode from each start; the local mode with the largest density is
    returned (ties: the first start in input order, so the result is deterministic).
    """
    pts, w = _check(points, weights)
    h = bandwidths(pts, w, bandwidth, multivariate=True)
    logw = np.log(np.maximum(w, 1e-300))
    y = pts.copy()
    for _ in range(max_iter):
        z = ((y[:, None, :] - pts[None, :, :]) / h) ** 2
        logk = -0.5 * z.sum(-1) + logw[None, :]
        logk -= logk.max(axis=1, keepdims=True)
        k = np.exp(logk)
        y_new = (k @ pts) / k.sum(axis=1, keepdims=True)
        shift = np.max(np.abs(y_new - y) / h)
        y = y_new
        if shift < tol:
            break
    dens = _log_density(y, pts, logw, h)
    return y[int(np.argmax(dens))]


def estimate_oracle(
    points: np.ndarray,
    method: str = "kde",
    *,
    weights: np.ndarray | None = None,
    bandwidth="scott",
    grid_size: int | None = None,
) -> np.ndarray:
    """The oracle projection vector (length E) from the workers' vectors (W x E).

    ``weights`` (labels per worker) are used only by the ``"weighted-..."`` methods.
    """
    if method not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}; got {method!r}")
    weighted = method.startswith("weighted-")
    base = method[len("weighted-"):] if weighted else method
    pts, w = _check(points, weights)  # validates weights even where they are unused
    if not weighted:
        w = np.full(pts.shape[0], 1.0 / pts.shape[0])
    if base == "mean":
        return w @ pts
    if base == "median":
        return np.array([_weighted_quantile(pts[:, e], w, 0.5) for e in range(pts.shape[1])])
    if base == "kde":
        return np.array(
            [kde_mode_1d(pts[:, e], w, bandwidth, grid_size) for e in range(pts.shape[1])]
        )
    return kde_mode_multivariate(pts, w, bandwidth)
