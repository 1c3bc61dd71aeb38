"""Progress of long fits: a tqdm bar on a terminal, and a callback hook for notebooks.

Every iterative fit (the EM-style aggregators' iterations, the learners' epochs, MMLC) opens
one :class:`Progress` and calls :meth:`Progress.step` once per iteration.  Two outputs:

* a bar on stderr, drawn by tqdm (an optional dependency, imported only when a bar is drawn):
  ``verbose=True`` asks for it, ``verbose=None`` (the default) draws it only when stderr is a
  terminal and the fit lasts more than :data:`AUTO_DELAY` seconds, ``verbose=False`` never.
  Never in CI (the ``CI`` environment variable, set by every CI service) or without tqdm;
* ``callback(record)``, called once per iteration with a :class:`StepRecord` (``iteration``
  from 1, ``objective`` as the fit logs it, ``elapsed`` seconds, ``total`` iterations planned
  or None, ``name`` of the estimator), whatever the terminal.

A fit's own ``verbose=`` / ``callback=`` win; when they are None, the values of the innermost
:func:`settings` block apply, which reaches fits made inside other code (``auto`` choosing a
method, MMLC inside ``mmlc-owf``, the command line).

>>> from crowdlearn.core import progress
>>> seen = []
>>> with progress.settings(callback=seen.append):      # doctest: +SKIP
...     DawidSkene().fit(labels)
>>> [r.iteration for r in seen][:3]                     # doctest: +SKIP
[1, 2, 3]
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

__all__ = ["Progress", "StepRecord", "settings", "start", "bar_wanted", "AUTO_DELAY"]

#: with ``verbose=None`` a bar appears only once a fit has run this many seconds, so the many
#: sub-second fits of a script or of ``auto`` draw nothing
AUTO_DELAY = 1.0


@dataclass(frozen=True)
class StepRecord:
    """What a callback receives after each iteration."""

    iteration: int
    objective: float
    elapsed: float
    total: int | None
    name: str


_SETTINGS: contextvars.ContextVar[tuple[bool | None, Callable | None]] = contextvars.ContextVar(
    "crowdlearn_progress", default=(None, None)
)


@contextlib.contextmanager
def settings(verbose: bool | None = None, callback: Callable[[StepRecord], Any] | None = None) -> Iterator[None]:
    """Default ``verbose`` / ``callback`` of every fit inside the block (nested blocks inherit
    what they do not set)."""
    outer_verbose, outer_callback = _SETTINGS.get()
    token = _SETTINGS.set((outer_verbose if verbose is None else verbose,
                           outer_callback if callback is None else callback))
    try:
        yield
    finally:
        _SETTINGS.reset(token)


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stream
        return False


def bar_wanted(verbose: bool | None) -> bool:
    """Whether a bar may be drawn: asked for (True) or a terminal (None); never in CI."""
    if verbose is False or _in_ci():
        return False
    return bool(verbose) or _stderr_is_tty()


def _make_bar(total: int | None, desc: str, unit: str, delay: float):
    try:
        from tqdm import tqdm
    except ImportError:  # an optional dependency: no bar, same results
        return None
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, delay=delay, leave=False,
                dynamic_ncols=True)


class Progress:
    """One fit's progress: a bar (maybe) and a callback (maybe); cheap when neither is on.

    Parameters
    ----------
    total : int or None
        Iterations planned (``max_iter``, epochs); None when unknown.
    name : str
        Shown before the bar and passed to the callback.
    verbose, callback
        As in the module docstring; None falls back to :func:`settings`.
    unit : str
        ``"it"`` (iterations) or ``"epoch"``.
    """

    def __init__(self, total: int | None, name: str, verbose: bool | None = None,
                 callback: Callable[[StepRecord], Any] | None = None, unit: str = "it"):
        ctx_verbose, ctx_callback = _SETTINGS.get()
        verbose = ctx_verbose if verbose is None else verbose
        self.callback = ctx_callback if callback is None else callback
        self.total = None if total is None else int(total)
        self.name = name
        self.iteration = 0
        self._t0 = time.perf_counter()
        self._bar = None
        # the bar is made at the first step: a fit without iterations draws nothing
        self._bar_args = (self.total, name, unit, 0.0 if verbose else AUTO_DELAY) if bar_wanted(verbose) else None

    @property
    def active(self) -> bool:
        return self._bar_args is not None or self.callback is not None

    def step(self, objective: float = float("nan")) -> None:
        """One iteration done, with the objective (or change) the fit logged for it."""
        self.iteration += 1
        if self._bar is None and self._bar_args is not None:
            self._bar = _make_bar(*self._bar_args)
            if self._bar is None:  # no tqdm
                self._bar_args = None
        if self._bar is not None:
            self._bar.update(1)
            if objective == objective:  # not NaN
                self._bar.set_postfix_str(f"objective {objective:.6g}", refresh=False)
        if self.callback is not None:
            self.callback(StepRecord(self.iteration, float(objective),
                                     time.perf_counter() - self._t0, self.total, self.name))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self._bar_args = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def start(total: int | None, name: str, verbose: bool | None = None,
          callback: Callable[[StepRecord], Any] | None = None, unit: str = "it") -> Progress:
    """A :class:`Progress` for one fit (use it as a context manager so the bar is closed)."""
    return Progress(total, name, verbose=verbose, callback=callback, unit=unit)
