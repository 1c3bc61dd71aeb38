"""Conformance checks of the answer kinds beyond class labels (continuous, multi-label,
pairwise, similarity).

Every such method is an :class:`~crowdlearn.core.base.AnswerEstimator`: ``fit(answers)``
returns ``self`` and ``result_frame()`` is the fitted result, one row per unit.  The checks
here are the contract checks of :mod:`crowdlearn.testing.checks` written against that
interface; what differs between kinds -- the toy data, which ids must appear in the result,
how good a result is -- comes from the kind's :class:`KindSpec`, looked up in
:data:`KIND_SPECS` (``kind -> "module:attribute"``, imported on first use, as the registry
does).  A kind adds one line there and one ``KindSpec`` in its own testing module.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from ..core.base import get_tags
from ..registry import load_path
from .checks import describe, params_contract

__all__ = ["KindSpec", "KIND_SPECS", "kind_spec", "kind_checks", "check_result_clone_and_params",
           "check_result_not_fitted",
           "check_result_idempotent", "check_result_deterministic", "check_result_pickle",
           "check_result_input_not_mutated", "check_result_well_formed",
           "check_result_quality"]


@dataclass(frozen=True)
class KindSpec:
    """What the generic checks need to know about one answer kind.

    Attributes
    ----------
    toy : callable ``(seed: int) -> answers``
        A small seeded answer table with planted truth, drawn from :mod:`crowdlearn.simulate`
        (a few hundred answers: the checks fit many times).
    units : callable ``answers -> pandas.Index``
        The ids every result must list once, in this order (tasks, or items).
    quality : callable ``(fitted estimator, answers) -> float``
        Agreement of the fitted result with the planted truth (higher is better).
    floor : float
        ``quality`` every method of the kind must exceed on ``toy(1)``.
    extra : tuple of callables ``estimator -> None``
        Kind-specific checks (invariances, degenerate inputs), run after the generic ones.
    """

    toy: Callable[[int], Any]
    units: Callable[[Any], pd.Index]
    quality: Callable[[Any, Any], float]
    floor: float
    extra: tuple[Callable[[Any], None], ...] = field(default_factory=tuple)


#: kind -> "module:attribute" of its KindSpec (imported lazily)
KIND_SPECS: dict[str, str] = {
    "continuous": "crowdlearn.testing.continuous:SPEC",
    "multilabel": "crowdlearn.testing.multilabel:SPEC",
    "pairwise": "crowdlearn.testing.pairwise:SPEC",
    "similarity": "crowdlearn.testing.similarity:SPEC",
}


def kind_spec(kind: str) -> KindSpec:
    """The :class:`KindSpec` of ``kind``; KeyError for a kind without one."""
    return load_path(KIND_SPECS[kind])


def _spec(est: Any) -> KindSpec:
    return kind_spec(get_tags(est).kind)


def _frame(est: Any) -> pd.DataFrame:
    return est.result_frame()


def _arrays(obj: Any) -> dict[str, np.ndarray]:
    """Copies of every numpy array and pandas Index an answer table holds (slots or dict)."""
    names = list(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        names.extend(getattr(cls, "__slots__", ()))
    out = {}
    for name in dict.fromkeys(names):
        value = getattr(obj, name, None)
        if isinstance(value, np.ndarray):
            out[name] = value.copy()
        elif isinstance(value, pd.Index):
            out[name] = value.to_numpy().copy()
    return out


# ------------------------------------------------------------------------------ checks
def check_result_clone_and_params(est: Any) -> None:
    """``get_params`` holds the constructor arguments, ``clone`` round-trips them, ``fit`` (on
    the kind's toy answers) does not change them, the default ``random_state`` is 0."""
    params_contract(est, _spec(est).toy(0))


def check_result_not_fitted(est: Any) -> None:
    """``result_frame`` before ``fit`` raises sklearn's ``NotFittedError``."""
    who = describe(est)
    try:
        clone(est).result_frame()
    except NotFittedError:
        return
    except Exception as exc:
        raise AssertionError(f"{who}: result_frame before fit raised {type(exc).__name__}, "
                             "expected NotFittedError") from exc
    raise AssertionError(f"{who}: result_frame before fit did not raise NotFittedError")


def check_result_well_formed(est: Any) -> None:
    """The result is a DataFrame with every unit (task or item) of the input once, in order,
    as its first column, and no NaN or inf anywhere; the fit reports ``n_iter_`` (int >= 0),
    ``converged_`` (bool) and ``history_`` as every method does."""
    who, spec = describe(est), _spec(est)
    data = spec.toy(0)
    est = clone(est).fit(data)
    frame = _frame(est)
    assert isinstance(frame, pd.DataFrame), f"{who}: result_frame must be a DataFrame"
    units = spec.units(data)
    first = frame.iloc[:, 0]
    assert list(first) == list(units), f"{who}: the result's first column is not the input's units in order"
    numeric = frame.select_dtypes("number").to_numpy(float)
    assert np.all(np.isfinite(numeric)), f"{who}: NaN or inf in the result"
    assert not frame.isna().any().any(), f"{who}: missing values in the result"
    for name, types in (("n_iter_", (int, np.integer)), ("converged_", (bool, np.bool_)),
                        ("history_", (list, dict))):
        value = getattr(est, name, None)
        assert isinstance(value, types), f"{who}: {name} is {value!r}, not a {types[0].__name__}"
    assert est.n_iter_ >= 0, f"{who}: n_iter_ = {est.n_iter_}"


def check_result_idempotent(est: Any) -> None:
    """``fit`` returns ``self``; refitting on the same data, also after a fit on other data,
    gives the same result (no state leaks between fits)."""
    who, spec = describe(est), _spec(est)
    data = spec.toy(0)
    est = clone(est)
    assert est.fit(data) is est, f"{who}: fit must return self"
    first = _frame(est)
    est.fit(spec.toy(4))
    est.fit(data)
    pd.testing.assert_frame_equal(_frame(est), first, obj=f"{who}: result after a refit")


def check_result_deterministic(est: Any) -> None:
    """Two fits with the same data and seed give identical results (also for another seed)."""
    who, spec = describe(est), _spec(est)
    data = spec.toy(0)
    seeds = [None] + ([7] if "random_state" in est.get_params(deep=False) else [])
    for seed in seeds:
        a, b = clone(est), clone(est)
        if seed is not None:
            a.set_params(random_state=seed)
            b.set_params(random_state=seed)
        pd.testing.assert_frame_equal(_frame(a.fit(data)), _frame(b.fit(data)),
                                      obj=f"{who}: two fits with random_state={seed!r}")


def check_result_pickle(est: Any) -> None:
    """A pickled fitted estimator unpickles to one with the same result."""
    who, spec = describe(est), _spec(est)
    est = clone(est).fit(spec.toy(0))
    back = pickle.loads(pickle.dumps(est))
    pd.testing.assert_frame_equal(_frame(back), _frame(est), obj=f"{who}: result after pickling")


def check_result_input_not_mutated(est: Any) -> None:
    """``fit`` leaves every array and index of the answer table untouched."""
    who, spec = describe(est), _spec(est)
    data = spec.toy(0)
    before = _arrays(data)
    clone(est).fit(data)
    after = _arrays(data)
    for name, old in before.items():
        new = after.get(name)
        same = new is not None and old.shape == new.shape and (
            np.array_equal(old, new, equal_nan=old.dtype.kind == "f") if old.dtype.kind in "fc"
            else np.array_equal(old, new))
        assert same, f"{who}: fit changed the input's {name}"


def check_result_quality(est: Any) -> None:
    """On an easy toy crowd the result agrees with the planted truth above the kind's floor."""
    who, spec = describe(est), _spec(est)
    data = spec.toy(1)
    score = float(spec.quality(clone(est).fit(data), data))
    assert score > spec.floor, f"{who}: quality {score:.3f} <= {spec.floor} on an easy crowd"


_GENERIC = (
    check_result_clone_and_params,
    check_result_not_fitted,
    check_result_well_formed,
    check_result_idempotent,
    check_result_deterministic,
    check_result_pickle,
    check_result_input_not_mutated,
    check_result_quality,
)


def kind_checks(est: Any):
    """The checks of an answer-kind estimator: the generic ones, then its kind's extras."""
    yield from _GENERIC
    yield from _spec(est).extra
