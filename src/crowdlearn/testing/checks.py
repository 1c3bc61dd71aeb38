"""The conformance checks every registered method must pass, whatever its kind.

Each check takes an estimator (a configured instance; it is cloned, never fitted in place),
fits it on a small seeded crowd chosen by the estimator's tags
(:func:`crowdlearn.core.base.get_tags`: K = 2 for ``binary_only``, item features for
``requires_features`` and for learners) and raises ``AssertionError`` naming the method and the
property that failed.  The properties are those of the estimator contract: scikit-learn's
parameter rules, reproducibility, outputs keyed by the user's ids, invariance to how ids are
named and ordered, gold clamping, and sane behaviour on degenerate crowds.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from ..core.base import get_tags
from ..core.data import CrowdLabels
from .data import class_features, renamed, toy_crowd

__all__ = [
    "QUICK_PARAMS",
    "SETTLED_PARAMS",
    "check_better_than_chance",
    "check_clone_and_params",
    "check_degenerate_inputs",
    "check_deterministic",
    "check_fit_returns_self_and_idempotent",
    "check_gold_clamps",
    "check_input_not_mutated",
    "check_not_fitted",
    "check_outputs_well_formed",
    "check_pickle_round_trip",
    "check_predict_proba_matches_probas",
    "check_relabel_invariance",
    "check_row_order_invariance",
    "check_zero_answer_tasks",
    "configure",
    "crowd_for",
    "params_contract",
    "describe",
    "registered_name",
]

#: training budget of learners in the contract checks (they test the contract, not accuracy);
#: applied only to the parameters an estimator has
QUICK_PARAMS: dict[str, Any] = {"epochs": 3, "max_iter": 2, "patience": 3}

#: training budget of learners where a check compares the *quality* of two fits (a network
#: trained for 3 epochs is too far from any optimum for its accuracy to mean anything)
SETTLED_PARAMS: dict[str, Any] = {"epochs": 20, "max_iter": 5, "patience": 20}


# ----------------------------------------------------------------------------- helpers
def registered_name(est: Any) -> str | None:
    """The registry name of ``est``'s class (an instance or a class), None if unregistered.

    Reads the registry table only, so no method module (and no torch) is imported.
    """
    from ..registry import REGISTRY

    cls = est if isinstance(est, type) else type(est)
    path = f"{cls.__module__}:{cls.__qualname__}"
    for name, entry in REGISTRY.items():
        if entry.path == path:
            return name
    return None


def describe(est: Any) -> str:
    """``"ds (DawidSkene)"``: the registry name (when registered) and the class name."""
    cls = est if isinstance(est, type) else type(est)
    name = registered_name(cls)
    return cls.__name__ if name is None else f"{name} ({cls.__name__})"


def configure(est: Any, **overrides: Any):
    """A clone of ``est``; learners also get :data:`QUICK_PARAMS` (and ``overrides``) where
    they have those parameters, so that a contract check trains for a fraction of a second."""
    est = clone(est)
    params = est.get_params(deep=False)
    quick = {**QUICK_PARAMS, **overrides} if get_tags(est).kind == "learning" else overrides
    est.set_params(**{k: v for k, v in quick.items() if k in params})
    return est


def _uses_features(est: Any) -> bool:
    tags = get_tags(est)
    return tags.requires_features or tags.kind == "learning"


def crowd_for(est: Any, seed: int = 0, **kwargs: Any) -> CrowdLabels:
    """The toy crowd of :func:`~crowdlearn.testing.data.toy_crowd` suited to ``est``'s tags."""
    kwargs.setdefault("n_classes", 2 if get_tags(est).binary_only else 3)
    return toy_crowd(seed=seed, features=_uses_features(est), **kwargs)


def _probas(est: Any) -> np.ndarray:
    return np.asarray(est.probas_, dtype=float)


def _accuracy(labels: pd.Series, data: CrowdLabels) -> float:
    truth = data.classes.take(data.truth)
    return float(np.mean(labels.reindex(data.tasks).to_numpy() == truth.to_numpy()))


def _new_input(est: Any, data: CrowdLabels):
    """What ``predict_proba`` of ``est`` scores: the features for learners, answers otherwise."""
    return data.features if get_tags(est).kind == "learning" else data


def _same_params(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for key in a:
        x, y = a[key], b[key]
        if x is y:
            continue
        try:
            equal = bool(np.all(x == y)) if isinstance(x, np.ndarray) else bool(x == y)
        except Exception:  # objects without a usable ==: compare their repr
            equal = False
        if not equal and repr(x) != repr(y):
            return False
    return True


# ------------------------------------------------------------------------------ checks
def check_fit_returns_self_and_idempotent(est: Any) -> None:
    """``fit`` returns ``self``; fitting the same object again on the same data, also after a
    fit on another crowd in between, gives the same outputs (no state leaks between fits)."""
    who, est = describe(est), configure(est)
    data = crowd_for(est)
    assert est.fit(data) is est, f"{who}: fit must return self"
    first = est.probas_.copy()
    for between in (None, crowd_for(est, seed=4, n_tasks=60)):
        if between is not None:
            est.fit(between)
        est.fit(data)
        assert est.probas_.index.equals(first.index), f"{who}: refit changes the task index"
        after = "" if between is None else " after a fit on another crowd"
        assert np.array_equal(_probas(est), first.to_numpy(float)), (
            f"{who}: refitting on the same data{after} gives different probas_ (fit is not idempotent)"
        )


def check_clone_and_params(est: Any) -> None:
    """``get_params`` holds the constructor arguments; ``clone`` round-trips them; ``fit``
    does not change them; the default ``random_state`` is 0 (reproducible by default)."""
    params_contract(est, crowd_for(est))


def params_contract(est: Any, data: Any) -> None:
    """:func:`check_clone_and_params` with the data ``fit`` is given (any answer kind)."""
    who, est = describe(est), configure(est)
    params = est.get_params(deep=False)
    init_args = set(type(est)._get_param_names())
    assert set(params) == init_args, f"{who}: get_params keys {sorted(params)} != __init__ args"
    assert _same_params(clone(est).get_params(deep=False), params), f"{who}: clone changes parameters"
    default = type(est)().get_params(deep=False)
    if "random_state" in default:
        assert default["random_state"] == 0, (
            f"{who}: default random_state is {default['random_state']!r}, the contract says 0"
        )
    est.fit(data)
    assert _same_params(est.get_params(deep=False), params), f"{who}: fit changed its hyper-parameters"


def check_pickle_round_trip(est: Any) -> None:
    """A pickled fitted estimator unpickles to one with the same outputs and predictions."""
    who, est = describe(est), configure(est)
    data = crowd_for(est)
    est.fit(data)
    back = pickle.loads(pickle.dumps(est))
    pd.testing.assert_frame_equal(back.probas_, est.probas_, check_exact=True,
                                  obj=f"{who}: probas_ after pickling")
    pd.testing.assert_series_equal(back.labels_, est.labels_, obj=f"{who}: labels_ after pickling")
    tags = get_tags(est)
    if tags.kind == "learning" or tags.has_worker_model:
        new = _new_input(est, data)
        np.testing.assert_array_equal(
            np.asarray(back.predict_proba(new)), np.asarray(est.predict_proba(new)),
            err_msg=f"{who}: predict_proba changes after pickling",
        )


def check_not_fitted(est: Any) -> None:
    """``predict`` and ``predict_proba`` before ``fit`` raise sklearn's ``NotFittedError``."""
    who, est = describe(est), configure(est)
    new = _new_input(est, crowd_for(est))
    for method in ("predict_proba", "predict"):
        if not hasattr(est, method):
            continue
        try:
            getattr(est, method)(new)
        except NotFittedError:
            continue
        except Exception as exc:
            raise AssertionError(
                f"{who}: {method} before fit raised {type(exc).__name__}({exc}), expected "
                "sklearn.exceptions.NotFittedError"
            ) from exc
        raise AssertionError(f"{who}: {method} before fit did not raise NotFittedError")


def check_outputs_well_formed(est: Any) -> None:
    """Every task once, in order; posteriors finite (no NaN or inf), non-negative, rows sum to
    1; labels are known classes; ``classes_`` is the Index of the input classes (one type for
    every kind); the run record (``history_`` ...) is present."""
    who, est = describe(est), configure(est)
    data = crowd_for(est)
    est.fit(data)
    p = est.probas_
    assert isinstance(p, pd.DataFrame), f"{who}: probas_ must be a DataFrame"
    assert list(p.index) == list(data.tasks), f"{who}: probas_ index != the input tasks"
    assert list(p.columns) == list(data.classes), f"{who}: probas_ columns != the classes"
    arr = p.to_numpy(float)
    assert np.all(np.isfinite(arr)), f"{who}: NaN or inf in probas_"
    assert np.all(arr >= -1e-12), f"{who}: negative posteriors"
    np.testing.assert_allclose(arr.sum(axis=1), 1.0, atol=1e-6, err_msg=f"{who}: probas_ rows must sum to 1")
    assert isinstance(est.labels_, pd.Series), f"{who}: labels_ must be a Series"
    assert list(est.labels_.index) == list(data.tasks), f"{who}: labels_ index != the input tasks"
    assert set(est.labels_.unique()) <= set(data.classes), f"{who}: unknown class in labels_"
    assert isinstance(est.classes_, pd.Index) and list(est.classes_) == list(data.classes), (
        f"{who}: classes_ must be the Index of the input classes")
    assert isinstance(est.history_, list), f"{who}: history_ must be a list"
    if all(isinstance(h, (int, float, np.number)) for h in est.history_):  # learners log dicts
        assert np.all(np.isfinite(np.asarray(est.history_, dtype=float))), f"{who}: NaN or inf in history_"
    if get_tags(est).kind == "learning":
        q = np.asarray(est.predict_proba(data.features), dtype=float)
        assert q.shape == (data.n_tasks, data.n_classes), f"{who}: predict_proba shape {q.shape}"
        assert np.all(np.isfinite(q)), f"{who}: NaN or inf in predict_proba"
        np.testing.assert_allclose(q.sum(1), 1.0, atol=1e-6, err_msg=f"{who}: predict_proba rows must sum to 1")
        assert set(np.unique(est.predict(data.features))) <= set(data.classes), (
            f"{who}: predict returns unknown classes")
    else:
        assert isinstance(est.n_iter_, (int, np.integer)), f"{who}: n_iter_ must be an int"
        assert isinstance(est.converged_, (bool, np.bool_)), f"{who}: converged_ must be a bool"


def check_zero_answer_tasks(est: Any) -> None:
    """A task present in the crowd with no answer still gets a row (finite, sums to 1) in
    ``probas_`` and a label in ``labels_``."""
    who, est = describe(est), configure(est)
    base = crowd_for(est)
    lonely = "lonely-task"
    data = CrowdLabels.from_frame(
        base.to_frame(), classes=base.classes, all_tasks=[lonely, *base.tasks],
        features=None if base.features is None else pd.DataFrame(
            np.vstack([base.features, base.features.mean(0)]), index=[*base.tasks, lonely]),
    )
    assert lonely in data.tasks and data.labels_per_task()[data.tasks.get_loc(lonely)] == 0
    est.fit(data)
    assert lonely in est.probas_.index, f"{who}: a task without answers is missing from probas_"
    assert lonely in est.labels_.index, f"{who}: a task without answers is missing from labels_"
    row = est.probas_.loc[lonely].to_numpy(float)
    assert np.all(np.isfinite(row)) and abs(row.sum() - 1) < 1e-6, (
        f"{who}: the posterior of a task without answers is {row}")
    assert list(est.probas_.index) == list(data.tasks), f"{who}: probas_ index != the input tasks"


def check_deterministic(est: Any) -> None:
    """Two fits with the same data and seed give identical outputs (also for another seed)."""
    who, est = describe(est), configure(est)
    data = crowd_for(est)
    seeds = [None] + ([7] if "random_state" in est.get_params(deep=False) else [])
    for seed in seeds:
        make = (lambda: clone(est)) if seed is None else (lambda: clone(est).set_params(random_state=seed))
        a, b = make().fit(data), make().fit(data)
        assert np.array_equal(_probas(a), _probas(b)), (
            f"{who}: two fits with random_state={a.get_params().get('random_state')!r} differ")
        pd.testing.assert_series_equal(a.labels_, b.labels_, obj=f"{who}: labels_ of two seeded fits")
        if get_tags(est).kind == "learning":
            assert np.array_equal(a.predict_proba(data.features), b.predict_proba(data.features)), (
                f"{who}: predict_proba differs between two seeded fits")


def check_input_not_mutated(est: Any) -> None:
    """``fit`` leaves the answers, truth, features and the gold it was given untouched."""
    who, est = describe(est), configure(est)
    data = crowd_for(est)
    fields = ("task", "worker", "label", "truth", "features", "task_ptr")
    before = {f: None if getattr(data, f) is None else np.array(getattr(data, f), copy=True) for f in fields}
    ids = (data.tasks.copy(), data.workers.copy(), data.classes.copy())
    kwargs = {}
    gold = None
    if get_tags(est).accepts_gold:
        gold = pd.Series(data.classes.take(data.truth[:5]), index=data.tasks[:5])
        kwargs["gold"] = gold
        gold_before = gold.copy()
    est.fit(data, **kwargs)
    for f in fields:
        now = getattr(data, f)
        if before[f] is None:
            assert now is None, f"{who}: fit attached {f} to its input"
        else:
            assert np.array_equal(before[f], now), f"{who}: fit mutated the input's {f}"
    for old, new in zip(ids, (data.tasks, data.workers, data.classes)):
        assert old.equals(new), f"{who}: fit changed the input's ids"
    if gold is not None:
        pd.testing.assert_series_equal(gold, gold_before, obj=f"{who}: the gold given to fit")


def check_predict_proba_matches_probas(est: Any) -> None:
    """With a worker model (tag ``has_worker_model``), ``predict_proba`` scores the training
    answers: a tasks x classes frame of distributions that reproduces ``probas_`` of a fit
    without gold (to 1e-6) when the tag ``predict_matches_fit`` says so, and otherwise at
    least agrees with ``labels_`` on 90% of the tasks."""
    who, est = describe(est), configure(est)
    tags = get_tags(est)
    data = crowd_for(est)
    est.fit(data)
    try:
        got = est.predict_proba(data)
    except Exception as exc:
        raise AssertionError(
            f"{who}: declares has_worker_model but predict_proba(training answers) raised "
            f"{type(exc).__name__}: {exc}") from exc
    assert isinstance(got, pd.DataFrame), f"{who}: predict_proba must return a DataFrame"
    assert list(got.index) == list(data.tasks) and list(got.columns) == list(data.classes), (
        f"{who}: predict_proba must be a tasks x classes frame")
    q = got.to_numpy(float)
    assert np.all(np.isfinite(q)) and np.allclose(q.sum(1), 1, atol=1e-6), (
        f"{who}: predict_proba rows must be finite and sum to 1")
    if getattr(tags, "predict_matches_fit", True):
        np.testing.assert_allclose(q, _probas(est), atol=1e-6,
                                   err_msg=f"{who}: predict_proba(training answers) != probas_")
    else:
        agree = float(np.mean(q.argmax(1) == _probas(est).argmax(1)))
        assert agree >= 0.9, f"{who}: predict_proba and probas_ agree on {agree:.1%} of the tasks"


def check_relabel_invariance(est: Any) -> None:
    """Shuffling the answers and renaming tasks, workers and classes (reversing the class
    order) permutes the output accordingly: posteriors within the tag ``invariance_atol``;
    for ``stochastic`` methods the accuracy against the truth within 0.1 (learners trained
    with :data:`SETTLED_PARAMS`)."""
    tags = get_tags(est)
    who, est = describe(est), configure(est, **(SETTLED_PARAMS if tags.kind == "learning" else {}))
    data = crowd_for(est, seed=2)
    data2, task_map, class_map = renamed(data)
    a = clone(est).fit(data)
    b = clone(est).fit(data2)
    assert set(b.probas_.index) == set(task_map.values()), f"{who}: renamed tasks missing from probas_"
    if tags.stochastic:
        acc_a = _accuracy(a.labels_, data)
        acc_b = _accuracy(b.labels_, data2)
        assert abs(acc_a - acc_b) <= 0.1, (
            f"{who}: accuracy {acc_a:.3f} on the crowd but {acc_b:.3f} once ids are renamed/reordered")
        return
    pa = a.probas_.rename(index=task_map, columns=class_map)
    pb = b.probas_.reindex(index=pa.index, columns=pa.columns)
    np.testing.assert_allclose(
        pb.to_numpy(float), pa.to_numpy(float), atol=tags.invariance_atol,
        err_msg=f"{who}: posteriors change when ids are renamed/reordered "
                f"(tolerance invariance_atol={tags.invariance_atol})",
    )


def check_row_order_invariance(est: Any) -> None:
    """Shuffling the rows of the answer table, with the same ids and the same seed, changes
    nothing: posteriors within the tag ``invariance_atol`` and the same labels, for
    ``stochastic`` methods too (their draws follow the answers, not the rows of a file).  The
    crowd holds repeated (task, worker) answers, half of them contradicting the first."""
    who, est = describe(est), configure(est)
    data = crowd_for(est, seed=6)
    frame = data.to_frame()
    rng = np.random.default_rng(6)
    again = frame.iloc[np.sort(rng.choice(len(frame), 12, replace=False))].copy()
    codes = data.classes.get_indexer(again["label"].iloc[:6])
    again.iloc[:6, again.columns.get_loc("label")] = data.classes.take((codes + 1) % data.n_classes)
    frame = pd.concat([frame, again], ignore_index=True)
    truth = data.truth_series()
    features = None if data.features is None else pd.DataFrame(data.features, index=data.tasks)

    def fit(rows: pd.DataFrame):
        return clone(est).fit(CrowdLabels.from_frame(rows, truth=truth, features=features))

    a = fit(frame)
    b = fit(frame.iloc[rng.permutation(len(frame))].reset_index(drop=True))
    pb = b.probas_.reindex(index=a.probas_.index, columns=a.probas_.columns)
    np.testing.assert_allclose(
        pb.to_numpy(float), _probas(a), atol=get_tags(est).invariance_atol,
        err_msg=f"{who}: posteriors change when the rows of the answers are shuffled "
                f"(tolerance invariance_atol={get_tags(est).invariance_atol})",
    )
    changed = a.labels_ != b.labels_.reindex(a.labels_.index)
    assert not changed.any(), (
        f"{who}: labels change when the rows of the answers are shuffled, e.g. task "
        f"{a.labels_.index[changed.to_numpy()][0]!r}")


def check_gold_clamps(est: Any) -> None:
    """Gold labels given to ``fit`` are the labels of their tasks, even when they contradict
    the crowd (here: deliberately wrong gold on ten tasks)."""
    who, est = describe(est), configure(est)
    data = crowd_for(est, seed=3)
    k = data.n_classes
    tasks = data.tasks[:10]
    wrong = pd.Series(data.classes.take((data.truth[:10] + 1) % k), index=tasks)
    est.fit(data, gold=wrong)
    got = est.labels_.loc[tasks]
    assert list(got) == list(wrong), f"{who}: gold tasks not clamped: {list(got)} != {list(wrong)}"
    p = est.probas_.loc[tasks, wrong.to_numpy()].to_numpy(float).diagonal()
    np.testing.assert_allclose(p, 1.0, atol=1e-9, err_msg=f"{who}: gold posteriors must be one-hot")


def check_better_than_chance(est: Any) -> None:
    """On an easy crowd the method is far above chance (catches inverted orientations)."""
    who, est = describe(est), configure(est)
    data = crowd_for(est, seed=1)
    est.fit(data)
    acc = _accuracy(est.labels_, data)
    assert acc > 0.8, f"{who}: accuracy {acc:.3f} on an easy crowd"


def _degenerate(est: Any, records: list, classes=None) -> CrowdLabels:
    data = CrowdLabels.from_records(records, classes=classes)
    if _uses_features(est):
        data = data.with_features(class_features(np.zeros(data.n_tasks, dtype=int), seed=0))
    return data


def check_degenerate_inputs(est: Any) -> None:
    """One worker answering everything; unanimous answers with a second class declared; a
    single class; a single task with a single answer: the answers are followed."""
    who, est = describe(est), configure(est)
    binary = get_tags(est).binary_only
    one = _degenerate(est, [(f"t{i}", "w", i % 2) for i in range(6)])
    e = clone(est).fit(one)
    np.testing.assert_allclose(_probas(e).sum(axis=1), 1.0, atol=1e-8, err_msg=f"{who}: one worker")
    assert list(e.labels_) == [i % 2 for i in range(6)], f"{who}: a lone worker is not followed"
    same = _degenerate(est, [(f"t{i}", f"w{j}", "a") for i in range(5) for j in range(3)], classes=["a", "b"])
    e = clone(est).fit(same)
    assert (e.labels_ == "a").all(), f"{who}: unanimous answers not followed"
    assert np.all(np.isfinite(_probas(e))), f"{who}: NaN or inf on unanimous answers"
    if not binary:
        single = _degenerate(est, [(f"t{i}", f"w{i % 2}", "x") for i in range(4)])
        e = clone(est).fit(single)
        assert (e.labels_ == "x").all() and np.allclose(_probas(e), 1.0), f"{who}: a single class"
    tiny = _degenerate(est, [("t", "w", "y")], classes=["n", "y"])
    e = clone(est).fit(tiny)
    assert e.labels_.loc["t"] == "y", f"{who}: a single answer is not followed"
