"""The shared conformance suite over every registered method, of every kind.

The registry (``crowdlearn.methods()``) is the only list: a newly registered method is
checked without editing this file; its tags choose the data and the applicable checks.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import crowdlearn
from crowdlearn.aggregation.majority_vote import MajorityVote
from crowdlearn.core.base import CrowdEstimator, check_fitted
from crowdlearn.testing import checks, parametrize_with_checks

# constructor arguments that shorten training where a method's defaults train a network for
# long (kind "learning" gets crowdlearn.testing.checks.QUICK_PARAMS already); a method not
# listed here is tested with its defaults
_SMALL_MMLC = dict(n_experts=4, expert_hidden=(16,), expert_out=8, tower_hidden=(8,), epochs=15,
                   batch_size=64, lr=1e-2)
QUICK: dict[str, dict] = {
    "mmlc-owf": dict(model=_SMALL_MMLC),
    "mmlc-df": dict(model=_SMALL_MMLC),
    # the similarity toy crowd (testing.similarity.toy) has 3 clusters, too few answers for
    # a sure eigen-gap estimate of K; that estimate is tested in tests/test_similarity.py
    "symnmf": dict(n_clusters=3),
    "similarity-spectral": dict(n_clusters=3),
    "crowd-clustering": dict(n_clusters=3, epochs=20),
}

# checks that fail today for a known reason, to be removed once the fix is merged:
# {(registry name, check name): reason}
KNOWN_FAILURES: dict[tuple[str, str], str] = {}


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny torch nets are many times slower when intra-op threads oversubscribe the cores."""
    try:
        import torch
    except ImportError:
        yield
        return
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@parametrize_with_checks([cls(**QUICK.get(name, {})) for name, cls in crowdlearn.methods().items()])
def test_conformance(estimator, check, request):
    reason = KNOWN_FAILURES.get((checks.registered_name(estimator), check.__name__))
    if reason is not None:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=False))
    check(estimator)


# ------------------------------------------------------------------- the suite catches bugs
# Broken variants of majority vote, each violating one property; the check of that property
# must fail with a message naming the method.


class _Vote(CrowdEstimator):
    """Majority vote behind a plain CrowdEstimator face, so that variants may break any part."""

    def __init__(self, random_state=0):
        self.random_state = random_state

    def __crowd_tags__(self):
        return dataclasses.replace(super().__crowd_tags__(), has_worker_model=True)

    def fit(self, labels, *, gold=None, init=None):
        self.vote_ = MajorityVote(random_state=self.random_state).fit(labels, gold=gold)
        for name in ("probas_", "labels_", "history_", "n_iter_", "converged_"):
            setattr(self, name, getattr(self.vote_, name))
        return self

    def predict_proba(self, labels):
        check_fitted(self)
        return self.vote_.predict_proba(labels)

    def predict(self, labels):
        return self.predict_proba(labels).idxmax(axis=1)


class _PredictRaises(_Vote):
    def predict_proba(self, labels):
        check_fitted(self)
        raise TypeError("no worker model here")


class _FitReturnsNone(_Vote):
    def fit(self, labels, **kwargs):
        super().fit(labels, **kwargs)


class _FitChangesParams(_Vote):
    def fit(self, labels, **kwargs):
        super().fit(labels, **kwargs)
        self.random_state = 1
        return self


class _NotFittedRuntimeError(_Vote):
    def predict_proba(self, labels):
        if not hasattr(self, "probas_"):
            raise RuntimeError("call fit first")
        return super().predict_proba(labels)


class _Noisy(_Vote):
    def fit(self, labels, **kwargs):
        super().fit(labels, **kwargs)
        self.probas_ = self.probas_ * 0.9 + 0.1 * pd.DataFrame(
            np.random.default_rng().dirichlet(np.ones(self.probas_.shape[1]), len(self.probas_)),
            index=self.probas_.index, columns=self.probas_.columns)
        return self


class _IgnoresGold(_Vote):
    def fit(self, labels, *, gold=None, init=None):
        return super().fit(labels)


class _DropsEmptyTasks(_Vote):
    def fit(self, labels, **kwargs):
        super().fit(labels, **kwargs)
        answered = labels.labels_per_task() > 0
        self.probas_ = self.probas_[answered]
        self.labels_ = self.labels_[answered]
        return self


class _OrderDependent(_Vote):
    def fit(self, labels, **kwargs):
        super().fit(labels, **kwargs)
        self.probas_ = self.probas_.copy()
        self.probas_.iloc[0] = np.eye(self.probas_.shape[1])[-1]  # the first task is special
        return self


class _RowOrderDependent(_Vote):
    def fit(self, labels, **kwargs):
        super().fit(labels, **kwargs)
        first = labels.label[labels.task_ptr[:-1]]  # the first answer of each task as stored
        self.probas_ = pd.DataFrame(np.eye(labels.n_classes)[first], index=labels.tasks,
                                    columns=labels.classes)
        self.labels_ = self.probas_.idxmax(axis=1).rename("label")
        return self


class _NaN(_Vote):
    def fit(self, labels, **kwargs):
        super().fit(labels, **kwargs)
        self.probas_ = self.probas_.copy()
        self.probas_.iloc[3, 0] = np.nan
        return self


class _Inverted(_Vote):
    def fit(self, labels, **kwargs):
        super().fit(labels, **kwargs)
        self.probas_ = (1 - self.probas_).div((1 - self.probas_).sum(axis=1), axis=0)
        self.labels_ = self.probas_.idxmax(axis=1).rename("label")
        return self


@pytest.mark.parametrize("broken, check, message", [
    (_PredictRaises, checks.check_predict_proba_matches_probas, "raised TypeError"),
    (_FitReturnsNone, checks.check_fit_returns_self_and_idempotent, "fit must return self"),
    (_FitChangesParams, checks.check_clone_and_params, "fit changed its hyper-parameters"),
    (_NotFittedRuntimeError, checks.check_not_fitted, "expected sklearn.exceptions.NotFittedError"),
    (_Noisy, checks.check_deterministic, "two fits"),
    (_Noisy, checks.check_fit_returns_self_and_idempotent, "not idempotent"),
    (_IgnoresGold, checks.check_gold_clamps, "gold tasks not clamped"),
    (_DropsEmptyTasks, checks.check_zero_answer_tasks, "task without answers is missing"),
    (_OrderDependent, checks.check_relabel_invariance, "renamed/reordered"),
    (_RowOrderDependent, checks.check_row_order_invariance, "rows of the answers are shuffled"),
    (_NaN, checks.check_outputs_well_formed, "NaN or inf"),
    (_Inverted, checks.check_better_than_chance, "accuracy"),
], ids=lambda v: getattr(v, "__name__", None) if not isinstance(v, str) else "")
def test_checks_catch_broken_estimators(broken, check, message):
    with pytest.raises(AssertionError, match=message) as err:
        check(broken())
    assert broken.__name__ in str(err.value)


def test_check_ids_and_selection_follow_tags():
    from crowdlearn.testing import estimator_checks

    names = {c.__name__ for c in estimator_checks("ds")}
    assert {"check_gold_clamps", "check_predict_proba_matches_probas", "check_degenerate_inputs"} <= names
    assert "check_perfect_annotators" not in names
    mark = parametrize_with_checks(["ds", MajorityVote()])
    ids = mark.kwargs["ids"]
    assert "ds-check_gold_clamps" in ids and "mv-check_not_fitted" in ids
