"""Conformance suite every truth-inference method must pass (``check_aggregator``).

Modelled on scikit-learn's ``check_estimator``: each check is a small function that raises
``AssertionError`` with a message naming the method and the property that failed.

>>> from crowdlearn.testing import check_aggregator
>>> check_aggregator("ds")          # doctest: +SKIP
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pandas as pd
from sklearn.base import clone

from .core.data import CrowdLabels
from .registry import get_method

__all__ = ["check_aggregator", "CHECKS", "toy_crowd"]


def toy_crowd(
    n_tasks: int = 120,
    n_workers: int = 12,
    n_classes: int = 3,
    per_task: int = 4,
    seed: int = 0,
) -> CrowdLabels:
    """A small Dawid-Skene crowd (workers 65-90% accurate) with gold attached."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, n_classes, n_tasks)
    acc = rng.uniform(0.65, 0.9, n_workers)
    task = np.repeat(np.arange(n_tasks), per_task)
    worker = np.concatenate([rng.choice(n_workers, per_task, replace=False) for _ in range(n_tasks)])
    right = rng.random(len(task)) < acc[worker]
    wrong = (truth[task] + rng.integers(1, max(n_classes, 2), len(task))) % n_classes
    label = np.where(right, truth[task], wrong)
    df = pd.DataFrame(
        {"task": [f"t{t}" for t in task], "worker": [f"w{w}" for w in worker], "label": [f"c{c}" for c in label]}
    )
    gold = pd.Series([f"c{c}" for c in truth], index=[f"t{t}" for t in range(n_tasks)])
    return CrowdLabels.from_frame(df, classes=[f"c{c}" for c in range(n_classes)], truth=gold)


def _fresh(est_or_name):
    if isinstance(est_or_name, str):
        return get_method(est_or_name)()
    return clone(est_or_name)


def _resolving(check: Callable) -> Callable:
    """Let a check take a registry name or an estimator; it always sees a fresh instance."""

    @functools.wraps(check)
    def wrapper(est_or_name) -> None:
        check(_fresh(est_or_name))

    return wrapper


def _name(est) -> str:
    return type(est).__name__


def _n_classes_ok(est, k: int) -> bool:
    return not (getattr(est, "_binary_only", False) and k != 2)


def check_outputs_well_formed(est) -> None:
    """Every task appears once; posteriors are finite, non-negative and sum to 1."""
    data = toy_crowd(n_classes=2 if getattr(est, "_binary_only", False) else 3)
    est = _fresh(est).fit(data)
    p = est.probas_
    assert list(p.index) == list(data.tasks), f"{_name(est)}: probas_ index != tasks"
    assert list(p.columns) == list(data.classes), f"{_name(est)}: probas_ columns != classes"
    arr = p.to_numpy()
    assert np.all(np.isfinite(arr)), f"{_name(est)}: non-finite posteriors"
    assert np.all(arr >= -1e-12), f"{_name(est)}: negative posteriors"
    np.testing.assert_allclose(arr.sum(axis=1), 1.0, atol=1e-8, err_msg=f"{_name(est)}: rows must sum to 1")
    assert est.labels_.index.equals(data.tasks), f"{_name(est)}: labels_ index != tasks"
    assert set(est.labels_.unique()) <= set(data.classes), f"{_name(est)}: unknown class in labels_"
    assert isinstance(est.history_, list) and isinstance(est.n_iter_, int)
    assert isinstance(est.converged_, (bool, np.bool_))


def check_better_than_chance(est) -> None:
    """On an easy crowd the method is far above chance (catches inverted orientations)."""
    k = 2 if getattr(est, "_binary_only", False) else 3
    data = toy_crowd(n_classes=k, seed=1)
    est = _fresh(est).fit(data)
    truth = data.classes.take(data.truth)
    acc = float(np.mean(est.labels_.to_numpy() == truth.to_numpy()))
    assert acc > 0.8, f"{_name(est)}: accuracy {acc:.3f} on an easy crowd"


def check_deterministic(est) -> None:
    """Same input and seed give identical output; refitting the same object too."""
    data = toy_crowd()
    if getattr(est, "_binary_only", False):
        data = toy_crowd(n_classes=2)
    a = _fresh(est).fit(data)
    b = _fresh(est).fit(data)
    pd.testing.assert_frame_equal(a.probas_, b.probas_, check_exact=True)
    pd.testing.assert_series_equal(a.labels_, b.labels_)
    a.fit(data)  # idempotent refit
    pd.testing.assert_frame_equal(a.probas_, b.probas_, check_exact=True)


def check_relabel_invariance(est) -> None:
    """Renaming and reordering tasks, workers and classes permutes the output accordingly."""
    k = 2 if getattr(est, "_binary_only", False) else 3
    data = toy_crowd(n_classes=k, seed=2)
    df = data.to_frame()
    rng = np.random.default_rng(5)
    df2 = df.iloc[rng.permutation(len(df))].copy()
    t_names = {t: f"task-{i:04d}" for i, t in enumerate(rng.permutation(np.asarray(data.tasks)))}
    w_names = {w: f"ω{i}" for i, w in enumerate(rng.permutation(np.asarray(data.workers)))}
    c_names = {c: f"k{k - i}" for i, c in enumerate(data.classes)}  # reverses the class order
    df2["task"] = df2["task"].map(t_names)
    df2["worker"] = df2["worker"].map(w_names)
    df2["label"] = df2["label"].map(c_names)
    data2 = CrowdLabels.from_frame(df2)
    a = _fresh(est).fit(data)
    b = _fresh(est).fit(data2)
    pa = a.probas_.rename(index=t_names, columns=c_names)
    pb = b.probas_.reindex(index=pa.index, columns=pa.columns)
    tol = getattr(est, "_invariance_atol", 1e-6)
    if tol is None:  # randomised method: ask only for the same quality
        la = a.labels_.rename(index=t_names).map(c_names)
        agree = float(np.mean(la.to_numpy() == b.labels_.reindex(la.index).to_numpy()))
        assert agree > 0.9, f"{_name(est)}: relabelled data changes {1 - agree:.1%} of labels"
        return
    np.testing.assert_allclose(
        pb.to_numpy(), pa.to_numpy(), atol=tol,
        err_msg=f"{_name(est)}: posteriors change when ids are renamed/reordered",
    )


def check_degenerate_inputs(est) -> None:
    """One worker; one class used; tasks with a single answer; unanimous workers."""
    binary = getattr(est, "_binary_only", False)
    # a single worker answering everything
    one = CrowdLabels.from_records([(f"t{i}", "w", i % 2) for i in range(6)])
    e = _fresh(est).fit(one)
    np.testing.assert_allclose(e.probas_.sum(axis=1), 1.0, atol=1e-8)
    assert list(e.labels_) == [i % 2 for i in range(6)], f"{_name(est)}: lone worker not followed"
    # every answer the same class, with a second class declared
    same = CrowdLabels.from_records(
        [(f"t{i}", f"w{j}", "a") for i in range(5) for j in range(3)], classes=["a", "b"]
    )
    e = _fresh(est).fit(same)
    assert (e.labels_ == "a").all(), f"{_name(est)}: unanimous answers not followed"
    assert np.all(np.isfinite(e.probas_.to_numpy()))
    # only one class at all
    if not binary:
        single = CrowdLabels.from_records([(f"t{i}", f"w{i % 2}", "x") for i in range(4)])
        e = _fresh(est).fit(single)
        assert (e.labels_ == "x").all() and np.allclose(e.probas_.to_numpy(), 1.0)
    # a single task, a single answer
    tiny = CrowdLabels.from_records([("t", "w", "y")], classes=["n", "y"])
    e = _fresh(est).fit(tiny)
    assert e.labels_.loc["t"] == "y", f"{_name(est)}: single answer not followed"


def check_gold_clamps(est) -> None:
    """Gold labels given to fit are the labels of their tasks."""
    k = 2 if getattr(est, "_binary_only", False) else 3
    data = toy_crowd(n_classes=k, seed=3)
    gold_tasks = data.tasks[:10]
    wrong = pd.Series(
        data.classes.take((data.truth[:10] + 1) % k), index=gold_tasks
    )  # deliberately not the truth: clamping must still win
    e = _fresh(est).fit(data, gold=wrong)
    pd.testing.assert_series_equal(
        e.labels_.loc[gold_tasks], wrong.rename("label"), check_names=False, check_index_type=False
    )


def check_clone_and_params(est) -> None:
    """``clone`` round-trips; ``get_params`` keys are constructor arguments; fit returns self."""
    e = _fresh(est)
    params = e.get_params()
    c = clone(e)
    assert c.get_params() == params
    assert e.fit(toy_crowd(n_classes=2 if getattr(e, "_binary_only", False) else 3)) is e
    assert clone(e).get_params() == params, f"{_name(e)}: fit changed hyper-parameters"


def check_input_not_mutated(est) -> None:
    data = toy_crowd()
    if getattr(est, "_binary_only", False):
        data = toy_crowd(n_classes=2)
    before = (data.task.copy(), data.worker.copy(), data.label.copy())
    _fresh(est).fit(data)
    for x, y in zip(before, (data.task, data.worker, data.label)):
        np.testing.assert_array_equal(x, y)


CHECKS: list[Callable] = [
    _resolving(check)
    for check in (
        check_outputs_well_formed,
        check_better_than_chance,
        check_deterministic,
        check_relabel_invariance,
        check_degenerate_inputs,
        check_gold_clamps,
        check_clone_and_params,
        check_input_not_mutated,
    )
]


def check_aggregator(est_or_name) -> None:
    """Run every conformance check on an estimator instance or registered name."""
    for check in CHECKS:
        check(est_or_name)
