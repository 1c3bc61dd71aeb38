"""AutoAggregator (``auto``): choosing a method per dataset from withheld answers, without gold."""

import numpy as np
import pandas as pd
import pytest

import crowdlearn as cl
from crowdlearn import simulate
from crowdlearn.aggregation.auto import (
    AutoAggregator,
    _predictive_score,
    _predictive_score_hard,
    _fold_scores,
    _folds,
    stacking_weights,
    heldout_scores,
)
from crowdlearn.benchmarking import gold_accuracy
from conftest import load_shared


def test_hard_scoring_equals_dense_scoring_of_one_hot_posteriors():
    data = simulate.dawid_skene(300, 12, 4, labels_per_task=4, seed=2)
    mask = _folds(data, 5, np.random.default_rng(0))[0]
    train, test = data._select_keep_ids(~mask), data._select_keep_ids(mask)
    pred = np.random.default_rng(1).integers(0, 4, data.n_tasks)
    dense = _predictive_score(train, np.eye(4)[pred], test, smoothing=0.7)
    sparse = _predictive_score_hard(train, pred, test, smoothing=0.7)
    np.testing.assert_allclose(sparse, dense, rtol=1e-12)


def test_folds_keep_every_task_and_worker_and_withhold_each_answer_at_most_once():
    data = simulate.dawid_skene(200, 8, 3, labels_per_task=2, seed=0)
    folds = _folds(data, 4, np.random.default_rng(3))
    assert len(folds) == 4 and all(m.any() for m in folds)
    for mask in folds:
        assert np.all(np.bincount(data.task[~mask], minlength=data.n_tasks) >= 1)
        assert np.all(np.bincount(data.worker[~mask], minlength=data.n_workers) >= 1)
    times = np.sum(folds, axis=0)
    assert times.max() == 1
    # with two answers per task, one of them can be withheld in each task: about half of all
    assert times.mean() > 0.4


def test_stacking_weights_recover_a_planted_mixture():
    # answers drawn from 0.7 * p1 + 0.3 * p2: the weights that maximise the held-out
    # likelihood of the mixture are close to (0.7, 0.3, 0)
    rng = np.random.default_rng(0)
    n = 20000
    p = rng.uniform(0.05, 1.0, size=(n, 3))
    comp = rng.choice(2, size=n, p=[0.7, 0.3])
    # the realised answer has probability p[i, comp] under its component and a small one otherwise
    pred = np.where(np.arange(3)[None, :] == comp[:, None], p, 0.02)
    pred[:, 2] = 0.05
    w = stacking_weights(pred)
    assert w.sum() == pytest.approx(1.0) and np.all(w >= 0)
    assert w[0] > w[1] > w[2] and abs(w[0] - 0.7) < 0.1 and w[2] < 0.05


def test_scores_prefer_the_true_model_over_noise():
    # a crowd from the Dawid-Skene model: DS posteriors predict withheld answers, random ones do not
    data = simulate.dawid_skene(800, 15, 3, labels_per_task=5, accuracy=(0.55, 0.9), seed=4)
    table = heldout_scores(data, ["ds", "mv"], n_folds=2)
    assert list(table.index) == ["ds", "mv"] and np.isfinite(table["score"]).all()
    assert table.loc["ds", "z"] == 0.0  # the reference against itself

    class Noise(cl.MajorityVote):
        def _fit(self, data, gold, init):
            return np.random.default_rng(0).dirichlet(np.ones(data.n_classes), data.n_tasks)

    noisy = heldout_scores(data, ["ds", Noise()], n_folds=2)
    assert noisy.loc["Noise", "z"] < -5


def test_a_failing_candidate_is_reported_not_fatal():
    class Broken(cl.MajorityVote):
        def _fit(self, data, gold, init):
            raise RuntimeError("boom")

    data = simulate.dawid_skene(300, 10, 3, labels_per_task=4, seed=1)
    est = AutoAggregator(candidates=["ds", Broken()], n_folds=2).fit(data)
    assert est.chosen_ == "ds"
    assert est.scores_.loc["Broken", "score"] == -np.inf and "boom" in est.scores_.loc["Broken", "error"]


def test_one_answer_per_task_falls_back_to_the_first_candidate():
    df = pd.DataFrame({"task": range(20), "worker": [0, 1] * 10, "label": [0, 1, 1, 0] * 5})
    est = AutoAggregator(candidates=["mv", "ds"]).fit(df)
    assert est.chosen_ == "mv" and "no answer could be withheld" in est.reason_
    assert len(est.labels_) == 20


def test_deterministic_and_delegates_the_worker_model():
    data = simulate.dawid_skene(400, 12, 3, labels_per_task=4, seed=7)
    a = AutoAggregator(candidates=["ds", "onecoin", "mv"], n_folds=2).fit(data)
    b = AutoAggregator(candidates=["ds", "onecoin", "mv"], n_folds=2).fit(data)
    pd.testing.assert_frame_equal(a.scores_.drop(columns="seconds"), b.scores_.drop(columns="seconds"))
    pd.testing.assert_frame_equal(a.probas_, b.probas_)
    assert a.chosen_ in a.reason_
    if a.chosen_ == "ds":
        assert a.confusions_.shape == (12, 3, 3)


@pytest.mark.parametrize(
    "name, min_gain",
    [
        # very sparse, 15 classes: DS's diagonal prior keeps it from over-fitting its
        # confusions; auto may keep ds or move to a vote-like method, but must not lose
        ("imagenet15n", 0.0),
        ("bluebirds", 0.0),  # full confusions win: auto must keep ds
        ("zencrowd_us", 0.0),
    ],
)
def test_never_much_worse_than_ds_on_real_data(name, min_gain):
    data = load_shared(name)
    ds = gold_accuracy(cl.DawidSkene().fit(data).labels_, data)
    auto = AutoAggregator().fit(data)
    acc = gold_accuracy(auto.labels_, data)
    assert acc >= ds + min_gain - 0.005, (auto.chosen_, auto.reason_, acc, ds)


def test_many_classes_use_the_linear_candidates():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"task": rng.integers(0, 100, 1500), "worker": rng.integers(0, 6, 1500),
                       "label": rng.integers(0, 80, 1500)})
    est = AutoAggregator(n_folds=2).fit(df)
    assert list(est.scores_.index) == ["mv", "wawa", "zbs", "glad"]
    assert est.probas_.shape == (100, 80)


def test_stack_averages_candidates_and_reports_weights():
    data = simulate.dawid_skene(600, 15, 3, labels_per_task=4, accuracy=(0.55, 0.9), seed=5)
    est = AutoAggregator(candidates=["ds", "mv", "onecoin"], n_folds=3, combine="stack").fit(data)
    w = est.weights_
    assert w.sum() == pytest.approx(1.0) and (w >= 0).all()
    assert est.chosen_ == w.idxmax() and "stacked" in est.reason_
    np.testing.assert_allclose(est.probas_.sum(axis=1), 1.0)
    assert est.scores_["weight"].sum() == pytest.approx(1.0)
    # the mixture is never far below its best member on planted data
    acc = gold_accuracy(est.labels_, data)
    ds = gold_accuracy(cl.DawidSkene().fit(data).labels_, data)
    assert acc >= ds - 0.02


def test_bad_combine_and_folds_are_refused():
    data = simulate.dawid_skene(100, 6, 2, labels_per_task=3, seed=0)
    with pytest.raises(ValueError, match="combine"):
        AutoAggregator(combine="vote").fit(data)
    with pytest.raises(ValueError, match="n_folds"):
        AutoAggregator(n_folds=1).fit(data)


def test_large_inputs_choose_on_a_task_subsample_but_fit_every_answer():
    data = simulate.dawid_skene(3000, 20, 3, labels_per_task=3, seed=1)
    est = AutoAggregator(candidates=["ds", "mv"], n_folds=2, max_answers=2000).fit(data)
    assert len(est.labels_) == data.n_tasks
    assert est.best_.probas_.shape[0] == data.n_tasks


def test_folds_are_fitted_until_max_withheld_answers_are_scored():
    data = simulate.dawid_skene(1000, 20, 3, labels_per_task=5, seed=2)
    scored = {}
    # five folds of about 1,000 withheld answers each: 1,500 scored answers take two folds,
    # 2,500 three; never fewer than two (cross-fitting needs another fold); None: every fold
    for cap, folds in ((1, 2), (1500, 2), (2500, 3), (None, 5)):
        table = heldout_scores(data, ["ds", "mv"], n_folds=5, max_withheld=cap)
        assert table.attrs["folds"] == folds
        assert np.isfinite(table["score"]).all()
        scored[cap] = len(table.attrs["per_answer"]["ds"])
    assert scored[1] == scored[1500] < 2500 <= scored[2500] < scored[None] <= data.n_labels
    est = AutoAggregator(candidates=["ds", "mv"], combine="select", max_withheld=1500).fit(data)
    assert est.scores_.attrs["folds"] == 2 and len(est.labels_) == data.n_tasks
    assert "2 of the 5 folds" in est.reason_
    stacked = AutoAggregator(candidates=["ds", "mv"], max_withheld=1500).fit(data)
    assert f"{scored[1500]} withheld answers of 2 of the 5 folds" in stacked.reason_
    with pytest.raises(ValueError, match="max_withheld"):
        AutoAggregator(max_withheld=0).fit(data)


def test_crossfit_scores_count_each_worker_on_answers_the_fit_did_not_see():
    # brute force: fold f's answer (w, a) on task j scores log Pi_w[pred_f(j), a], Pi_w counted on
    # the other folds' withheld answers of w, each paired with the label of its own fold's fit,
    # with k * smoothing pseudo-counts toward the crowd's pooled confusion of those pairs, whose
    # rows have k * smoothing pseudo-counts toward the pairs' answer marginal
    data = simulate.dawid_skene(150, 6, 3, labels_per_task=4, seed=5)
    folds = _folds(data, 3, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    fitted = [(data._select_keep_ids(~m), data._select_keep_ids(m), rng.integers(0, 3, data.n_tasks))
              for m in folds]
    got = _fold_scores(fitted, True, True, smoothing=0.5)
    k, s = 3, 0.5
    for f, (_, test, pred) in enumerate(fitted):
        pairs = [(w, p[t], a) for g, (_, te, p) in enumerate(fitted) if g != f
                 for t, w, a in zip(te.task, te.worker, te.label)]
        answered = np.bincount([a for _, _, a in pairs], minlength=k)
        marginal = (1 + answered) / (k + len(pairs))
        pooled = np.tile(k * s * marginal, (k, 1))
        own = np.zeros((data.n_workers, k, k))
        for w, c, a in pairs:
            pooled[c, a] += 1
            own[w, c, a] += 1
        pooled /= pooled.sum(axis=1, keepdims=True)
        conf = (own + k * s * pooled) / (own.sum(axis=2, keepdims=True) + k * s)
        want = np.log(conf[test.worker, pred[test.task], test.label])
        np.testing.assert_allclose(got[f], want, rtol=1e-12)
    # and soft scoring of one-hot posteriors is the same rule
    soft = _fold_scores([(tr, te, np.eye(3)[p]) for tr, te, p in fitted], False, True, smoothing=0.5)
    for a, b in zip(got, soft):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_informative_labels_beat_the_null_model_and_a_crowd_without_signal_falls_back():
    # workers of accuracy 0.55-0.85: the labels of ds predict withheld answers better than
    # each worker's answer rate alone, by many standard errors
    data = simulate.dawid_skene(600, 15, 2, labels_per_task=5, accuracy=(0.55, 0.85), seed=0)
    table = heldout_scores(data, ["ds", "mv"])
    assert table.loc["ds", "z_null"] > 5 and table.loc["mv", "z_null"] > 5
    # workers who answer at random: no method's labels say anything about the answers, and
    # auto returns its fallback (by default the first candidate, its reference) and says why
    noise = simulate.dawid_skene(300, 20, 2, labels_per_task=3, accuracy=0.5, seed=0)
    est = AutoAggregator(candidates=["onecoin", "ds", "mv"]).fit(noise)
    assert est.chosen_ == "onecoin" and list(est.weights_) == [1.0, 0.0, 0.0]
    assert "fallback" in est.reason_ and "answer rate" in est.reason_
    assert not est.scores_["eligible"].any() and np.all(est.scores_["z_null"] <= est.min_z)
    named = AutoAggregator(candidates=["onecoin", "ds", "mv"], fallback="mv").fit(noise)
    assert named.chosen_ == "mv"
    # estimators as candidates: the fallback is found by its registered class
    est = AutoAggregator(candidates=[cl.DawidSkene(), cl.MajorityVote()], fallback="mv").fit(noise)
    assert est.chosen_ == "MajorityVote"
    with pytest.raises(ValueError, match="fallback 'MV' is not one of the candidates"):
        AutoAggregator(candidates=["ds", "mv"], fallback="MV").fit(noise)


def test_seeds_of_every_accepted_kind_draw_the_folds():
    data = simulate.dawid_skene(200, 10, 3, labels_per_task=3, seed=1)
    for seed in (0, None, np.random.default_rng(0), np.random.RandomState(0)):
        est = AutoAggregator(candidates=["ds", "mv"], random_state=seed).fit(data)
        assert np.isfinite(est.scores_["score"]).all()
    a = AutoAggregator(candidates=["ds", "mv"], random_state=3).fit(data).scores_
    b = AutoAggregator(candidates=["ds", "mv"], random_state=3).fit(data).scores_
    pd.testing.assert_frame_equal(a.drop(columns="seconds"), b.drop(columns="seconds"))


def test_a_single_fold_that_withholds_answers_scores_in_sample():
    # only one of the folds can withhold anything: there are no other folds' answers to count
    # the confusions on, and the training answers serve
    df = pd.DataFrame({"task": ["t1", "t1", "t2", "t3", "t4", "t5"], "worker": list("abab" "ab"),
                       "label": [0, 0, 1, 1, 0, 0]})
    table = heldout_scores(df, ["ds", "mv"], n_folds=5, random_state=2)
    assert table.attrs["folds"] == 1 and table.attrs["crossfit"] is False


def test_a_candidate_no_better_than_the_null_is_left_out_of_the_stack_and_named():
    data = simulate.dawid_skene(600, 15, 2, labels_per_task=5, accuracy=(0.55, 0.85), seed=0)

    class Constant(cl.MajorityVote):  # every task the first class: the null model itself
        def _fit(self, data, gold, init):
            return np.tile(np.eye(data.n_classes)[0], (data.n_tasks, 1))

    est = AutoAggregator(candidates=["ds", Constant(), "mv"]).fit(data)
    assert est.weights_["Constant"] == 0.0 and not est.scores_.loc["Constant", "eligible"]
    assert "left out" in est.reason_ and "Constant" in est.reason_
