"""Run the conformance checks that apply to an estimator, as scikit-learn's
``check_estimator`` and ``parametrize_with_checks`` do for scikit-learn estimators.

Which checks apply is read from the estimator's tags (:func:`crowdlearn.core.base.get_tags`),
never from a list of method names, so a newly registered method is checked as soon as it is
registered::

    from crowdlearn.testing import check_estimator, parametrize_with_checks
    check_estimator("ds")                      # raises AssertionError on the first failure

    @parametrize_with_checks(crowdlearn.methods().values())
    def test_conformance(estimator, check):    # one test per (method, check): "ds-check_gold_clamps"
        check(estimator)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..core.base import get_tags
from ..registry import get_method
from . import checks as c
from .kinds import KIND_SPECS, kind_checks
from .learning import check_perfect_annotators, check_recovers_confusions

__all__ = ["check_estimator", "estimator_checks", "parametrize_with_checks"]

_COMMON: tuple[Callable, ...] = (
    c.check_clone_and_params,
    c.check_not_fitted,
    c.check_fit_returns_self_and_idempotent,
    c.check_outputs_well_formed,
    c.check_zero_answer_tasks,
    c.check_deterministic,
    c.check_input_not_mutated,
    c.check_pickle_round_trip,
    c.check_relabel_invariance,
)


def _instance(est_or_name: Any):
    """An estimator instance from an instance, a class or a registered name."""
    if isinstance(est_or_name, str):
        return get_method(est_or_name)()
    if isinstance(est_or_name, type):
        return est_or_name()
    return est_or_name


def estimator_checks(estimator: Any) -> Iterator[Callable]:
    """The checks that apply to ``estimator`` (an instance, class or registered name).

    Every method gets the contract checks (parameters, not-fitted error, idempotent fit,
    well-formed outputs incl. tasks without answers, determinism, input not mutated,
    pickling, invariance to renaming and reordering).  Then, by tags: ``has_worker_model``
    adds the predict_proba / probas_ agreement, ``accepts_gold`` gold clamping; truth
    inference methods (kinds ``"classification"`` and ``"ordinal"``) are checked for accuracy
    on an easy crowd, degenerate crowds and invariance to the order of the rows; learners (kind ``"learning"``) for what they learn.
    Methods of the other answer kinds (continuous, multi-label, pairwise, similarity) get the
    same contract written against ``result_frame`` (:mod:`crowdlearn.testing.kinds`) and
    their kind's own checks.
    """
    tags = get_tags(_instance(estimator))
    if tags.kind in KIND_SPECS:  # answers beyond class labels: checks of crowdlearn.testing.kinds
        yield from kind_checks(_instance(estimator))
        return
    yield from _COMMON
    if tags.has_worker_model:
        yield c.check_predict_proba_matches_probas
    if tags.accepts_gold:
        yield c.check_gold_clamps
    if tags.kind == "learning":
        yield check_perfect_annotators
        yield check_recovers_confusions
    else:
        yield c.check_better_than_chance
        yield c.check_degenerate_inputs
        yield c.check_row_order_invariance


def _check_name(check: Callable) -> str:
    while isinstance(check, functools.partial):
        check = check.func
    return getattr(check, "__name__", repr(check))


def _estimator_name(est: Any) -> str:
    if isinstance(est, str):
        return est
    cls = est if isinstance(est, type) else type(est)
    return c.registered_name(cls) or cls.__name__


def check_estimator(estimator: Any) -> None:
    """Run every applicable check on ``estimator`` (instance, class or registered name).

    Raises
    ------
    AssertionError
        From the first failing check, naming the method and the property.
    """
    est = _instance(estimator)
    for check in estimator_checks(est):
        check(est)


def parametrize_with_checks(estimators: Iterable[Any]):
    """A ``pytest.mark.parametrize("estimator, check", ...)`` over every applicable check.

    ``estimators`` are instances, classes or registered names; test ids read
    ``"<name>-<check>"``, the name being the registry name when the class is registered
    (``"ds-check_gold_clamps"``) and the class name otherwise.
    """
    import pytest  # test-time dependency only

    params, ids = [], []
    for est in estimators:
        name = _estimator_name(est)
        inst = _instance(est)
        for check in estimator_checks(inst):
            params.append((inst, check))
            ids.append(f"{name}-{_check_name(check)}")
    return pytest.mark.parametrize("estimator, check", params, ids=ids)
