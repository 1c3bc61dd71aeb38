"""The conformance suite every registered crowdlearn method must pass.

In the spirit of scikit-learn's ``check_estimator``: small check functions, each raising
``AssertionError`` that names the method and the property that failed, chosen for each
estimator by its tags (:func:`crowdlearn.core.base.get_tags`).

>>> from crowdlearn.testing import check_estimator
>>> check_estimator("ds")          # doctest: +SKIP

Modules: :mod:`~crowdlearn.testing.data` (seeded toy crowds from :mod:`crowdlearn.simulate`),
:mod:`~crowdlearn.testing.checks` (the contract checks of every method),
:mod:`~crowdlearn.testing.learning` (what end-to-end learners learn) and
:mod:`~crowdlearn.testing.estimator_checks` (selection by tags, ``check_estimator``,
``parametrize_with_checks``).
"""

from .checks import (
    check_better_than_chance,
    check_clone_and_params,
    check_degenerate_inputs,
    check_deterministic,
    check_fit_returns_self_and_idempotent,
    check_gold_clamps,
    check_input_not_mutated,
    check_not_fitted,
    check_outputs_well_formed,
    check_pickle_round_trip,
    check_predict_proba_matches_probas,
    check_relabel_invariance,
    check_row_order_invariance,
    check_zero_answer_tasks,
)
from .data import toy_crowd
from .estimator_checks import check_estimator, estimator_checks, parametrize_with_checks
from .learning import check_perfect_annotators, check_recovers_confusions

#: the suite's entry points, then every check function it re-exports (listed once, above)
__all__ = ["check_estimator", "estimator_checks", "parametrize_with_checks", "toy_crowd"] + sorted(
    name for name in dict(globals()) if name.startswith("check_") and name != "check_estimator"
)
