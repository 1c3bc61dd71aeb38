"""Simulated crowds with planted truth and planted worker parameters.

:mod:`~crowdlearn.simulate.categorical` draws class-label crowds from worker specifications
(:class:`~crowdlearn.simulate.categorical.WorkerSpec`) and an assignment of workers to tasks
(:func:`~crowdlearn.simulate.categorical.assign_workers`); :mod:`~crowdlearn.simulate.features`
draws annotators on given item features.  The names of the first are re-exported here.
"""

from .categorical import *  # noqa: F401,F403
from .categorical import __all__ as _categorical_all
from . import features  # noqa: F401

__all__ = list(_categorical_all) + ["features"]
