"""Which loops the pairwise fits run: the numba ones of :mod:`.compiled` or numpy.

The choice follows the rest of crowdlearn (:func:`crowdlearn.core.kernels.resolve_backend`):
``"auto"`` takes the compiled loops from :data:`NUMBA_MIN_PAIRS` distinct pairs on when
numba is importable, and the numpy loops otherwise, so that small fits never pay numba's
import (about a second the first time in a process).  ``CROWDLEARN_DISABLE_NUMBA`` forces
numpy everywhere.
"""

from __future__ import annotations

from ..core import kernels

__all__ = ["NUMBA_MIN_PAIRS", "compiled_pairwise", "resolve_backend"]

#: below this many distinct pairs a numpy MM step takes well under a millisecond, and
#: "auto" does not import numba
NUMBA_MIN_PAIRS = 20_000


def compiled_pairwise():
    """The module :mod:`crowdlearn.pairwise.compiled`, or None when numba is unavailable."""
    return kernels.load_compiled("crowdlearn.pairwise.compiled")


def resolve_backend(backend: str, n_pairs: int) -> str:
    """``"numba"`` or ``"numpy"`` for a fit over ``n_pairs`` distinct pairs.

    Parameters
    ----------
    backend : {"auto", "numpy", "numba"}
        ``"numba"`` without numba raises ``ImportError``.
    n_pairs : int
        Distinct item pairs of the fit (the length of its loops).

    Returns
    -------
    str
    """
    return kernels.resolve_backend(backend, n_pairs, NUMBA_MIN_PAIRS, compiled_pairwise)
