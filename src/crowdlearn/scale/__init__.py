"""Truth inference beyond one machine's memory: on a Dask cluster, or streamed from disk.

* :func:`fit_dask` — answers in a ``dask.dataframe`` (e.g. ``dd.read_parquet`` on a folder of
  files), partitioned on a cluster;
* :func:`fit_stream` — answer files larger than memory, read chunk by chunk on one machine;
* :func:`fit` — either, by ``engine="dask"`` or ``"stream"``.

Both run the same method code (:mod:`crowdlearn.scale.programs`: each EM method as rounds of
"map over partitions, sum the statistics") and give the in-memory fit's labels, with
posteriors equal to rounding.  Supported methods: :func:`supported_methods`.  Dask is the
optional extra ``crowdlearn[dask]``; nothing here is imported by ``import crowdlearn``.
"""

from __future__ import annotations

from typing import Any

from .coding import Columns
from .programs import supported_methods

__all__ = ["fit", "fit_dask", "fit_stream", "Columns", "supported_methods"]


def fit_dask(estimator, answers, **kwargs):
    """See :func:`crowdlearn.scale.dask_engine.fit_dask`."""
    from .dask_engine import fit_dask as run

    return run(estimator, answers, **kwargs)


def fit_stream(estimator, source, **kwargs):
    """See :func:`crowdlearn.scale.stream.fit_stream`."""
    from .stream import fit_stream as run

    return run(estimator, source, **kwargs)


def fit(estimator, answers: Any, engine: str = "stream", **kwargs):
    """Fit ``estimator`` with ``engine`` ("dask" or "stream"); see :func:`fit_dask` and
    :func:`fit_stream` for the options.  Returns the gathered result table, or the written
    files when ``out`` is given."""
    if engine == "dask":
        return fit_dask(estimator, answers, **kwargs)
    if engine == "stream":
        return fit_stream(estimator, answers, **kwargs)
    raise ValueError(f"engine must be 'dask' or 'stream', got {engine!r}")
