"""The estimator contract (crowdlearn.core.base) and the one registry, over every method."""

import dataclasses
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError

import crowdlearn as cl
from crowdlearn import simulate
from crowdlearn.aggregation.base import SEALED, BaseAggregator, CollapseWarning, GoldCodes
from crowdlearn.cli import main
from crowdlearn.core.base import (
    KINDS,
    AnswerEstimator,
    CrowdEstimator,
    Tags,
    check_fitted,
    get_tags,
    resolve_generator,
    resolve_random_state,
    resolve_seed,
)
from crowdlearn.registry import REGISTRY, get_method, method_kinds, methods

torch = pytest.importorskip("torch")

ALL = methods()
AGGREGATORS = {n: c for n, c in ALL.items() if issubclass(c, BaseAggregator)}
#: the private class attributes the tags replaced
OLD_ATTRIBUTES = ("_uses_init", "_requires_features", "_binary_only", "_invariance_atol",
                  "_identifiable", "_confusion_tol")


@pytest.fixture(scope="module")
def crowd():
    return simulate.dawid_skene(n_tasks=150, n_workers=12, n_classes=3, labels_per_task=5, seed=3)


# ------------------------------------------------------------------------ core.base
def test_tags_are_frozen_and_checked():
    t = Tags()
    assert t.kind == "classification" and t.accepts_gold and not t.requires_features
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.kind = "learning"
    with pytest.raises(ValueError, match="unknown method kind"):
        Tags(kind="regression")


def test_get_tags_of_class_instance_and_foreign_object():
    class Est(CrowdEstimator):
        def __init__(self, init=False):
            self.init = init

        def __crowd_tags__(self):
            return dataclasses.replace(super().__crowd_tags__(), accepts_init=self.init)

    assert get_tags(Est) == Tags()
    assert get_tags(Est(init=True)).accepts_init
    assert get_tags(object()) == Tags()


def test_check_fitted_raises_sklearns_error():
    class Est(CrowdEstimator):
        def fit(self):
            return self

    est = Est()
    with pytest.raises(NotFittedError):
        check_fitted(est)
    est.coef_ = 1
    check_fitted(est)


def test_random_state_has_one_meaning():
    a, b = resolve_random_state(7), resolve_random_state(7)
    assert a.randint(10**9) == b.randint(10**9) == np.random.RandomState(7).randint(10**9)
    # None: fresh entropy every time, numpy's global generator untouched
    np.random.seed(1)
    before = np.random.get_state()[1].copy()
    draws = {resolve_random_state(None).randint(2**31) for _ in range(5)}
    assert len(draws) > 1
    np.testing.assert_array_equal(np.random.get_state()[1], before)
    rs = np.random.RandomState(0)
    assert resolve_random_state(rs) is rs
    g = np.random.default_rng(0)
    r = resolve_random_state(g)
    x = r.random_sample()
    assert g.random() != x  # the two share (and advance) one stream
    assert isinstance(resolve_generator(5), np.random.Generator)
    assert resolve_generator(5).random() == np.random.default_rng(5).random()
    assert resolve_seed(11) == 11 and resolve_seed(np.int64(11)) == 11
    assert len({resolve_seed(None) for _ in range(5)}) > 1
    for bad in (True, 1.5, "0"):
        with pytest.raises(ValueError):
            resolve_random_state(bad)


# ------------------------------------------------------------------------ every method
@pytest.mark.parametrize("name", sorted(ALL))
def test_every_method_is_a_crowd_estimator_with_declared_tags(name):
    cls = ALL[name]
    assert issubclass(cls, CrowdEstimator)
    tags = get_tags(cls)
    assert tags.kind == method_kinds()[name], "the registry's kind must be the class's kind tag"
    for attr in OLD_ATTRIBUTES:
        assert not hasattr(cls, attr), f"{name}: {attr} is a tag now"
    if tags.kind == "learning":
        assert tags.requires_features and not tags.accepts_gold
    assert cls().get_params()["random_state"] == 0, "every estimator's default seed is 0"


@pytest.mark.parametrize("name", sorted(ALL))
def test_not_fitted_is_sklearns_error(name, crowd):
    est = ALL[name]()
    if isinstance(est, AnswerEstimator):  # answer kinds: the fitted result is result_frame()
        with pytest.raises(NotFittedError):
            est.result_frame()
        return
    new = np.zeros((3, 4)) if get_tags(est).kind == "learning" else crowd
    for method in ("predict_proba", "predict"):
        with pytest.raises(NotFittedError):
            getattr(est, method)(new)


def test_not_fitted_mmlc_internals():
    from crowdlearn.mmlc.model import MMLC
    from crowdlearn.mmlc.oracle import MMLCOracle

    with pytest.raises(NotFittedError):
        MMLC().predict_proba(np.zeros((2, 3)), np.ones(4))
    with pytest.raises(NotFittedError):
        MMLCOracle().find_oracle()
    with pytest.raises(NotFittedError):
        get_method("ds")().confusion("w0")


@pytest.mark.parametrize("name", sorted(AGGREGATORS))
def test_no_subclass_redefines_a_base_helper(name):
    for klass in AGGREGATORS[name].__mro__:
        if klass is BaseAggregator:
            break
        assert not SEALED & set(vars(klass)), f"{klass.__name__} redefines a sealed name"


def test_redefining_a_base_helper_is_rejected_at_class_creation():
    with pytest.raises(TypeError, match="redefines predict_proba"):
        type("Bad", (BaseAggregator,), {"predict_proba": lambda self, labels: None})
    # a method-specific helper with any other name is fine, even one the base once used
    type("Fine", (BaseAggregator,), {"_align": lambda self: None})


@pytest.mark.parametrize("name", ["multispa", "multispa-ds", "multispa-kl"])
def test_multispa_predicts(name, crowd):
    est = get_method(name)().fit(crowd)
    np.testing.assert_allclose(est.predict_proba(crowd).to_numpy(), est.probas_.to_numpy(), atol=1e-12)
    assert (est.predict(crowd) == est.labels_).all()


# ------------------------------------------------------------------------ worker models
@pytest.mark.parametrize("name", ["group-ds", "minimax", "auto", "ds", "mv"])
def test_worker_model_scores_training_answers_exactly(name):
    from crowdlearn.datasets import load

    data = load("zencrowd_us")
    # auto stacks its candidates: with members whose predictions match their fits (bp's do
    # not, it is message passing) the mixture's must match too
    params = {"candidates": ["ds", "hds", "onecoin", "mace", "mv"]} if name == "auto" else {}
    est = get_method(name)(**params).fit(data)
    assert get_tags(est).has_worker_model and get_tags(est).predict_matches_fit
    got = est.predict_proba(data)
    np.testing.assert_allclose(got.to_numpy(), est.probas_.to_numpy(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["group-ds", "minimax", "auto"])
def test_worker_model_scores_new_tasks(name):
    data = simulate.dawid_skene(n_tasks=400, n_workers=15, n_classes=3, labels_per_task=6,
                                accuracy=(0.6, 0.85), seed=5)
    frame = data.to_frame()
    tasks = np.asarray(data.tasks)
    train = _labels_from(frame[frame["task"].isin(tasks[:300])])
    test = _labels_from(frame[frame["task"].isin(tasks[300:])])
    est = get_method(name)().fit(train)
    proba = est.predict_proba(test)
    assert list(proba.index) == list(test.tasks)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    truth = pd.Series(data.classes.take(data.truth), index=data.tasks)
    acc = float(np.mean(est.predict(test).to_numpy() == truth.reindex(test.tasks).to_numpy()))
    mv = get_method("mv")().fit(test)
    acc_mv = float(np.mean(mv.labels_.to_numpy() == truth.reindex(test.tasks).to_numpy()))
    assert acc >= acc_mv - 0.02, f"{name}: {acc:.3f} on new tasks vs majority vote {acc_mv:.3f}"


def _labels_from(frame):
    from crowdlearn.core.data import CrowdLabels

    return CrowdLabels.from_frame(frame.reset_index(drop=True))


def test_auto_tags_follow_the_chosen_estimator(crowd):
    assert get_tags(get_method("auto")).has_worker_model
    class NoModel(BaseAggregator):
        def _fit(self, data, gold, init):
            return np.ones((data.n_tasks, data.n_classes))

    assert not get_tags(get_method("auto")(candidates=["mv", NoModel()])).has_worker_model
    assert not get_tags(get_method("auto")(candidates=["ds", "kos"])).predict_matches_fit
    fitted = get_method("auto")(candidates=["ds", "mv"]).fit(crowd)
    assert get_tags(fitted).has_worker_model == get_tags(fitted.best_).has_worker_model


def test_random_state_none_leaves_the_global_generator_alone(crowd):
    np.random.seed(3)
    state = np.random.get_state()[1].copy()
    get_method("mace")(random_state=None).fit(crowd)
    np.testing.assert_array_equal(np.random.get_state()[1], state)


def test_learner_seeds():
    from crowdlearn.simulate import class_features

    data = simulate.dawid_skene(n_tasks=120, n_workers=6, n_classes=2, labels_per_task=3, seed=1)
    X, _ = class_features(data.truth, 2, n_features=4, seed=1)
    fit = lambda rs: get_method("two-stage")(epochs=3, random_state=rs).fit(X, data).predict_proba(X)  # noqa: E731
    np.testing.assert_array_equal(fit(4), fit(4))
    np.testing.assert_array_equal(fit(np.random.RandomState(4)), fit(np.random.RandomState(4)))
    assert not np.array_equal(fit(None), fit(None))


# ------------------------------------------------------------------------ registry
def test_registry_kinds_and_filters():
    kinds = method_kinds()
    assert set(kinds) == set(REGISTRY) and set(kinds.values()) <= set(KINDS)
    assert {"ds", "mv", "mmlc-owf", "mmlc-df"} <= {n for n, k in kinds.items() if k == "classification"}
    learning = methods("learning")
    assert {"ccem", "maxmig", "doctornet"} <= set(learning)
    assert set().union(*(methods(kind) for kind in KINDS)) == set(ALL)
    assert get_method("ccem", kind="learning") is learning["ccem"]
    with pytest.raises(ValueError, match="unknown classification method 'ccem'"):
        get_method("ccem", kind="classification")
    with pytest.raises(ValueError, match="unknown method"):
        get_method("nope")
    with pytest.raises(ValueError, match="unknown method kind"):
        methods("regression")


def test_learning_helpers_are_filters_over_the_registry():
    from crowdlearn import learning

    assert learning.methods() == methods("learning")
    assert learning.get_method("raykar") is get_method("raykar")
    assert learning.make_classifier("ccem", epochs=5).epochs == 5
    with pytest.raises(ValueError):
        learning.get_method("ds")


def test_import_crowdlearn_imports_no_method_module():
    code = (
        "import sys, crowdlearn, crowdlearn.registry as r\n"
        "mods = {e.path.split(':')[0] for e in r.REGISTRY.values()}\n"
        "r.method_kinds()\n"
        "bad = sorted(m for m in sys.modules if m in mods or m == 'torch' or m.startswith('torch.'))\n"
        "print(','.join(bad))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == ""


def test_dir_lists_the_lazy_names_and_every_listed_name_resolves():
    import crowdlearn

    names = dir(crowdlearn)
    for name in ("aggregation", "continuous", "detect_spammers", "DawidSkene", "CrowdLabels"):
        assert name in names
    for name in names:
        if not name.startswith("_"):
            getattr(crowdlearn, name)


# ------------------------------------------------------------------------ CLI
def test_cli_lists_every_method_with_kind_and_needs(capsys):
    assert main(["methods"]) == 0
    rows = {line.split()[0]: line.split()[1:3] for line in capsys.readouterr().out.splitlines()[1:]}
    assert set(rows) == set(REGISTRY)
    for name, (kind, needs) in rows.items():
        assert kind == method_kinds()[name]
        assert ("features" in needs) == get_tags(ALL[name]).requires_features
    assert rows["ds"][1] == "-" and rows["mmlc-owf"][1] == "features"
    assert main(["methods", "--kind", "learning"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert set(names) == set(methods("learning"))


def test_cli_aggregate_refuses_a_learner(tmp_path, capsys):
    src = tmp_path / "in.csv"
    src.write_text("task,worker,label\n1,a,0\n1,b,1\n")
    assert main(["aggregate", str(src), "--method", "ccem"]) == 2
    assert "learning method" in capsys.readouterr().err


def test_spammer_filtered_scores_with_its_base():
    data = simulate.dawid_skene(n_tasks=300, n_workers=20, n_classes=3, labels_per_task=5,
                                spammers=0.3, seed=2)
    est = get_method("spammer-filtered")().fit(data)
    assert est.n_removed_ > 0, "the simulated spammers must be flagged for this test to bite"
    np.testing.assert_allclose(est.predict_proba(data).to_numpy(), est.probas_.to_numpy(), atol=1e-12)
    # a task answered only by flagged workers gets the orphan row, as in the fit
    spammer = est.spammers_.index[est.spammers_["spammer"].to_numpy()][0]
    alone = pd.DataFrame({"task": ["new"], "worker": [spammer], "label": [data.classes[0]]})
    row = est.predict_proba(alone).to_numpy()[0]
    np.testing.assert_allclose(row, est.base_.priors_.to_numpy(), atol=1e-12)


def test_learner_fit_leaves_global_generators_alone():
    """A learner seeds the global generators for its backbone, then gives the caller's back."""
    import random

    torch = pytest.importorskip("torch")
    from crowdlearn.simulate import class_features

    data = simulate.dawid_skene(n_tasks=60, n_workers=5, n_classes=2, labels_per_task=3, seed=2)
    X, _ = class_features(data.truth, 2, n_features=3, seed=2)
    np.random.seed(123)
    random.seed(123)
    torch.manual_seed(123)
    expected = (np.random.rand(), random.random(), float(torch.rand(1)))
    np.random.seed(123)
    random.seed(123)
    torch.manual_seed(123)
    get_method("two-stage")(epochs=2).fit(X, data)
    assert (np.random.rand(), random.random(), float(torch.rand(1))) == expected


# ------------------------------------------------------------------------ no overlap
@pytest.mark.parametrize("name", sorted(AGGREGATORS))
def test_without_overlap_every_aggregator_returns_the_answers(name):
    # one answer per task: no two workers ever meet, so no worker model is identified; EM
    # used to drift (skills falling, the prior taking every task: onecoin 0.55 and mace 0.44
    # on dog at one answer per task, against majority vote's 0.68)
    cls = AGGREGATORS[name]
    if get_tags(cls()).requires_features:
        pytest.skip("needs features")
    k = 2 if get_tags(cls()).binary_only else 3
    full = simulate.dawid_skene(n_tasks=300, n_workers=20, n_classes=k, labels_per_task=5,
                                accuracy=(0.55, 0.9), seed=7)
    frame = full.to_frame().groupby("task", sort=False).head(1).reset_index(drop=True)
    with pytest.warns(UserWarning, match="two different workers"):
        est = cls().fit(frame)
    answers = frame.set_index("task")["label"]
    assert (est.labels_.reindex(answers.index) == answers).all()
    assert np.all(np.isfinite(est.probas_.to_numpy()))


def test_gold_identifies_workers_without_overlap():
    # gold answers are comparisons with the truth: the worker model is identified, no warning
    full = simulate.dawid_skene(n_tasks=300, n_workers=20, n_classes=3, labels_per_task=5,
                                accuracy=(0.55, 0.9), seed=7)
    frame = full.to_frame().groupby("task", sort=False).head(1).reset_index(drop=True)
    truth = pd.Series(full.classes.take(full.truth), index=full.tasks)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        get_method("ds")().fit(frame, gold=truth.iloc[:100])


def test_a_fit_that_collapses_onto_one_class_warns():
    # a fit whose labels put every task in the class majority vote gives to 60% of them is
    # flagged (the EM collapse of sparse binary crowds); a fit that follows the votes is not
    data = simulate.dawid_skene(n_tasks=200, n_workers=20, n_classes=2, labels_per_task=3,
                                accuracy=(0.6, 0.9), seed=3)

    class Collapsed(cl.MajorityVote):
        def _fit(self, data, gold, init):
            return np.tile([0.9, 0.1], (data.n_tasks, 1))

    with pytest.warns(CollapseWarning, match=r"100% of the answered tasks get class 0, which majority vote gives to \d+%"):
        Collapsed().fit(data)
    # tasks with gold are left out of the judgement, not the whole fit
    with pytest.warns(CollapseWarning):
        Collapsed().fit(data, gold=pd.Series([0], index=data.tasks[:1]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        cl.MajorityVote().fit(data)

    # a composite method's inner fits leave the warning to the outer one: one warning, the outer's
    class Outer(cl.MajorityVote):
        def _fit(self, data, gold, init):
            return Collapsed().fit(data).probas_.to_numpy()

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        Outer().fit(data)
    assert [str(w.message).split(":")[0] for w in seen if issubclass(w.category, CollapseWarning)] == ["Outer"]
    assert all(w.filename == __file__ for w in seen)


def _three_class_crowd():
    rows = [(f"t{t}", f"w{w}", "abc"[(t + (w == 0)) % 3]) for t in range(12) for w in range(3)]
    return pd.DataFrame(rows, columns=["task", "worker", "label"])


@pytest.mark.parametrize("gold, error, words", [
    # integer codes per task: one outside the class axis used to raise an IndexError in the E-step
    (GoldCodes(np.full(12, 7)), ValueError, "outside [-1, 2]"),
    (GoldCodes(np.zeros(5, int)), ValueError, "GoldCodes holds 5 codes for the 12 tasks"),
    # plain arrays and lists name no task: an int array of the right length used to be read
    # as class codes, and a list was keyed 0..n-1 (dropped whole here, silently before that)
    (np.zeros(12, int), ValueError, "gold must be keyed by task id"),
    (np.full(12, "a"), ValueError, "got an array of shape (12,), which names no task"),
    (["a"] * 12, ValueError, "got a list of 12 value(s), which names no task"),
    (pd.Index(["a"] * 12), ValueError, "gold must be keyed by task id"),
    ({"x1": "a", "x2": "b"}, ValueError, "gold must be keyed by task id"),
    # a frame used to fail inside pandas' Series constructor
    (pd.DataFrame({"task": ["t0"], "label": ["a"]}), TypeError, "got a DataFrame"),
])
def test_fit_refuses_gold_it_cannot_use(gold, error, words):
    with pytest.raises(error, match=words.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        cl.DawidSkene().fit(_three_class_crowd(), gold=gold)


def test_int_array_gold_of_class_values_is_refused_not_read_as_codes():
    """Classes 1..5 and task ids 0..n-1: the plain array of gold classes used to be taken as
    codes, i.e. every gold label one class too high; now it is one error pointing at the two
    forms fit reads (gold keyed by task id, or GoldCodes)."""
    data = simulate.dawid_skene(60, 8, 5, labels_per_task=3, seed=1)
    frame = data.to_frame()
    frame["task"] = data.task.astype(int)
    frame["label"] = data.label.astype(int) + 1
    values = data.truth + 1
    with pytest.raises(ValueError, match=r"gold must be keyed by task id .*GoldCodes"):
        cl.DawidSkene().fit(frame, gold=values)
    # the same values keyed by task id (a Series with an integer index) are read as classes
    ds = cl.DawidSkene().fit(frame, gold=pd.Series(values[:10], index=range(10)))
    assert list(ds.labels_.loc[range(10)]) == list(values[:10])


@pytest.mark.parametrize("name", ["ds", "mf", "spectral-ds", "glad", "ordinal-ds"])
def test_gold_codes_fit_as_the_same_gold_keyed_by_task(name):
    """GoldCodes is the gold of a Series task -> class in the table's codes: the fits agree to
    the bit, and the codes array given is left as it was."""
    data = simulate.dawid_skene(300, 15, 3, labels_per_task=3, seed=4)
    codes = np.full(data.n_tasks, -1)
    codes[:40] = data.truth[:40]
    kept = codes.copy()
    series = pd.Series(data.classes.take(codes[:40]), index=data.tasks[:40])
    a = get_method(name)().fit(data, gold=series)
    b = get_method(name)().fit(data, gold=GoldCodes(codes))
    pd.testing.assert_frame_equal(a.probas_, b.probas_, check_exact=True)
    np.testing.assert_array_equal(codes, kept)


def test_gold_codes_needs_integer_codes():
    with pytest.raises(TypeError, match="1-D array of integer class codes, got 1-D float64"):
        GoldCodes(np.array([0.0, 1.0]))
    with pytest.raises(TypeError, match="got 2-D"):
        GoldCodes(np.zeros((2, 2), int))
    # no codes at all (every task -1) is no gold, as an empty Series is
    data = _three_class_crowd()
    pd.testing.assert_frame_equal(cl.DawidSkene().fit(data, gold=GoldCodes(np.full(12, -1))).probas_,
                                  cl.DawidSkene().fit(data).probas_, check_exact=True)


def test_fit_gold_partly_unknown_and_empty_still_fit():
    df = _three_class_crowd()
    ds = cl.DawidSkene().fit(df, gold={"t0": "c", "elsewhere": "a"})  # unknown tasks: ignored
    assert ds.labels_["t0"] == "c"
    assert len(cl.DawidSkene().fit(df, gold={}).labels_) == 12  # empty gold: no gold


def test_fit_init_frame_missing_rows_or_columns_named():
    df = _three_class_crowd()
    tasks = [f"t{t}" for t in range(12)]
    partial = pd.DataFrame(1.0, index=tasks[:2], columns=list("abc"))
    with pytest.raises(ValueError, match=r"init has no row for task '.*' \(10 task"):
        cl.DawidSkene().fit(df, init=partial)
    with pytest.raises(ValueError, match="init has no column for class 'c'"):
        cl.DawidSkene().fit(df, init=pd.DataFrame(1.0, index=tasks, columns=list("ab")))
    # rows in another order are matched by task id
    init = pd.DataFrame(np.eye(3)[np.arange(12) % 3], index=tasks, columns=list("abc"))
    a = cl.DawidSkene().fit(df, init=init.iloc[::-1]).probas_
    b = cl.DawidSkene().fit(df, init=init.sort_index().to_numpy()).probas_  # the answers' task order
    pd.testing.assert_frame_equal(a, b)
