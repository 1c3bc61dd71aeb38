"""Continuous answers: the answer table, the methods' recovery of planted parameters, accuracy
on the real sets (snow_emotion, movie_reviews, snow_wordsim) and bad input."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import SHARED_DATA, skip_missing

import crowdlearn as cl
from crowdlearn.continuous.data import ContinuousAnswers
from crowdlearn.datasets import load as load_folder
from crowdlearn.continuous.gaussian_em import GaussianEM
from crowdlearn.continuous.location import Mean, Median, TrimmedMean
from crowdlearn.core.base import get_tags
from crowdlearn.diagnostics.continuous_metrics import (continuous_scores, mae, rmse, spearman,
                                                       truth_report)
from crowdlearn.simulate.continuous import continuous_crowd

#: the methods on answers alone (the end-to-end heads: tests/test_continuous_learning.py)
METHODS = sorted(name for name, cls in cl.methods(kind="continuous").items()
                 if not get_tags(cls).requires_features)


def _corr(a, b) -> float:
    return float(np.corrcoef(np.asarray(a, float), np.asarray(b, float))[0, 1])


# ------------------------------------------------------------------------ the answer table
def test_table_reads_numbers_written_as_text(tmp_path):
    (tmp_path / "a.csv").write_text("task,worker,label\nx,w1,4.00\nx,w2, 7\ny,w1,1e-1\n")
    data = ContinuousAnswers.from_csv(tmp_path / "a.csv", truth={"x": "4.00", "y": np.nan})
    assert data.value.dtype == np.float64 and sorted(data.value) == [0.1, 4.0, 7.0]
    assert data.truth_series().to_dict() == {"x": 4.0}  # NaN = unknown
    assert (data.n_tasks, data.n_workers, data.n_answers) == (2, 2, 3)
    assert not data.value.flags.writeable and not data.task.flags.writeable
    back = data.to_frame()
    assert list(back.columns) == list(ContinuousAnswers.ROLES)
    assert "ContinuousAnswers(answers=3, tasks=2, workers=2, gold=1)" == repr(data)


@pytest.mark.parametrize("fmt", ["jsonl", "tsv", "parquet"])
def test_table_other_formats(tmp_path, fmt):
    df = pd.DataFrame({"task": ["x", "x", "y"], "worker": ["a", "b", "a"], "label": [1.5, 2.0, 3.0]})
    path = tmp_path / f"a.{fmt}"
    if fmt == "jsonl":
        df.to_json(path, orient="records", lines=True)
    elif fmt == "tsv":
        df.to_csv(path, sep="\t", index=False)
    else:
        pytest.importorskip("pyarrow")
        df.to_parquet(path)
    reader = ContinuousAnswers.from_parquet if fmt == "parquet" else ContinuousAnswers.from_csv
    data = reader(path)
    pd.testing.assert_frame_equal(data.to_frame(), df)


def test_snow_wordsim_gold_reads():
    folder = SHARED_DATA / "snow_wordsim"
    skip_missing(folder)
    data = load_folder(folder, kind="continuous")
    assert np.isfinite(data.truth).all() and data.truth.max() == pytest.approx(3.94, abs=0.1)


@pytest.mark.parametrize("cell, shown", [("abc", "finite numbers: 'abc'"), ("inf", "finite numbers: 'inf'"),
                                         ("nan", "finite numbers: 'nan'"),
                                         # an empty cell was "finite numbers: nan", as if nan were written
                                         ("", "missing value in column 'label'"),
                                         (" ", "missing value in column 'label'")])
def test_non_numeric_answer_names_its_line(tmp_path, cell, shown):
    (tmp_path / "a.csv").write_text(f"task,worker,label\nx,w1,1\nx,w2,{cell}\n")
    with pytest.raises(ValueError, match="line 3") as err:
        ContinuousAnswers.from_csv(tmp_path / "a.csv")
    assert shown in str(err.value)


def test_bad_frames_are_refused():
    df = pd.DataFrame({"task": [1, 2, 3], "worker": ["a", "b", "a"], "label": [1.0, np.inf, 2.0]})
    with pytest.raises(ValueError, match=r"finite numbers: inf at row position 1"):
        ContinuousAnswers.from_frame(df)
    with pytest.raises(ValueError, match="finite numbers"):
        ContinuousAnswers.from_frame(df.assign(label=[True, False, True]))
    with pytest.raises(ValueError, match=r"missing value in column 'worker' at row position 2"):
        ContinuousAnswers.from_frame(df.assign(label=1.0, worker=["a", "b", None]))
    with pytest.raises(ValueError, match=r"missing column\(s\) \['label'\]"):
        ContinuousAnswers.from_frame(df.drop(columns="label"))
    with pytest.raises(ValueError, match="empty"):
        ContinuousAnswers.from_frame(df.iloc[:0])
    with pytest.raises(ValueError, match="gold value 'high' of task 1"):
        ContinuousAnswers.from_frame(df.assign(label=1.0), truth={1: "high"})
    with pytest.raises(TypeError, match="ContinuousAnswers or a DataFrame"):
        Mean().fit([(1, "a", 2.0)])


def test_bad_hyper_parameters_name_the_parameter():
    data, _ = continuous_crowd(20, 5, 3, seed=0)
    with pytest.raises(ValueError, match="trim must be a number in"):
        TrimmedMean(trim=0.5).fit(data)
    with pytest.raises(ValueError, match="noise_prior must be a finite number >= 0"):
        GaussianEM(noise_prior=-1).fit(data)
    with pytest.raises(ValueError, match="significance must be a number in"):
        cl.get_method("catd")(significance=1.5).fit(data)
    with pytest.raises(ValueError, match="min_shared must be a whole number >= 1"):
        cl.get_method("lrs-moments")(min_shared=0).fit(data)


def test_all_tasks_and_features():
    df = pd.DataFrame({"task": ["a", "b"], "worker": [1, 2], "label": [1.0, 3.0]})
    feats = pd.DataFrame([[0.0], [1.0], [2.0]], index=["a", "b", "c"])
    data = ContinuousAnswers.from_frame(df, all_tasks=["c"], features=feats)
    assert list(data.tasks) == ["a", "b", "c"] and data.labels_per_task().tolist() == [1, 1, 0]
    assert data.features[:, 0].tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("name", sorted(n for n, k in cl.method_kinds().items()
                                         if k == "continuous" and n != "crowd-layer-regression"))
def test_every_answer_the_same_number(name):
    """Workers who all give one value have no covariance at all (lrs-moments indexed a sparse
    matrix with empty arrays and raised numpy's "truth value ... ambiguous")."""
    df = pd.DataFrame({"task": ["t1", "t1", "t2", "t2"], "worker": ["a", "b", "a", "b"],
                       "label": [1.0, 1.0, 1.0, 1.0]})
    res = cl.get_method(name)().fit(ContinuousAnswers.from_frame(df)).result_frame()
    assert list(res["task"]) == ["t1", "t2"] and np.allclose(res["estimate"], 1.0)
    assert np.isfinite(res[["estimate", "stderr"]].to_numpy()).all()


@pytest.mark.parametrize("name", METHODS)
@pytest.mark.parametrize("a, b", [(1.0, 1e9), (1e6, 1e12), (-3.0, 0.0)])
def test_estimates_follow_an_affine_map_of_the_answers(name, a, b):
    """Answers far from 0 (timestamps: 1e9 plus a few units) give the same estimates, mapped.

    Gaussian-EM took the prior variance as ``E[m^2] - mu^2``, which cancels to noise at 1e9
    and moved estimates on a 0-100 scale by up to 5 units."""
    data, _ = continuous_crowd(300, 20, 5, bias=(-5, 5), noise=(1, 20), scale=(0.5, 1.5), seed=1)
    df = data.to_frame()
    shifted = df.assign(label=a * df["label"] + b)
    est = cl.get_method(name)().fit(data).estimates_
    moved = cl.get_method(name)().fit(ContinuousAnswers.from_frame(shifted)).estimates_
    spread = float(df["label"].std())
    assert np.max(np.abs((moved.to_numpy() - b) / a - est.to_numpy())) < 1e-4 * spread


# ------------------------------------------------------------- units of the answers
#: every registered continuous method, the end-to-end heads included
ALL_METHODS = sorted(cl.methods(kind="continuous"))

#: crowds where a method can read the units of the answers: simulated (tasks, workers,
#: answers per task, seed), or the first 40 tasks of snow_emotion with their first 3
#: answers (9 workers, some in triangles the rank-one model of lrs-moments fits exactly,
#: residuals at rounding level: the QA report's case).  60 x 2 with 30 workers and 30 x 12
#: with 2 leave no pair sharing 3 tasks (lrs-moments' fallback); 20 x 2 with 5 workers,
#: isolated pairs, one of negative covariance
UNIT_DESIGNS = ["snow_emotion", (40, 9, 3, 0), (60, 30, 2, 1), (30, 12, 2, 0), (20, 5, 2, 3),
                (200, 20, 5, 1)]


def _unit_design(design):
    """The answers of a :data:`UNIT_DESIGNS` entry (with 3 item features per task)."""
    if design == "snow_emotion":
        folder = SHARED_DATA / "snow_emotion"
        skip_missing(folder)
        df = pd.read_csv(folder / "labels.csv")
        df = df[df["task"].isin(df["task"].unique()[:40])].groupby("task", sort=False).head(3)
        rng = np.random.default_rng(0)
        n = df["task"].nunique()
        return ContinuousAnswers.from_frame(df, features=pd.DataFrame(rng.normal(size=(n, 3)),
                                                                      index=df["task"].unique()))
    n_tasks, n_workers, k, seed = design
    data, _ = continuous_crowd(n_tasks, n_workers, k, assignment="random", truth_mean=50,
                               truth_sd=10, scale=(0.5, 1.5), spammers=0.2, seed=seed, n_features=3)
    return data


def _fit_in_units(name, data, a, b):
    """``name`` fitted on the answers ``a x + b`` (features kept): (estimates, stderr) as arrays."""
    est = cl.get_method(name)()
    if get_tags(est).requires_features:  # a few epochs: the map of units is what is tested
        est.set_params(epochs=3, backbone="linear")
    moved = ContinuousAnswers(data.task, data.worker, a * data.value + b, data.tasks, data.workers,
                              features=data.features)
    est.fit(moved)
    return est.estimates_.to_numpy(), est.stderr_.to_numpy()


@pytest.mark.parametrize("name", ALL_METHODS)
@pytest.mark.parametrize("design", UNIT_DESIGNS,
                         ids=lambda d: d if isinstance(d, str) else "x".join(map(str, d)))
def test_every_method_is_equivariant_to_a_change_of_units(name, design):
    """Answers in other units (``a x + b``) give the estimates in those units and standard
    errors times ``|a|``, up to rounding.

    lrs-moments read the units: its outlier cut was a multiple of the residuals' median,
    which rounding sets where the rank-one model fits a triangle of workers exactly (on
    snow_emotion, 40 tasks x 3 answers, scaling by 10 moved an estimate by 0.46 and a
    standard error by 10%); without a pair sharing 3 tasks its ``v`` was 1 in the answers'
    units; and on a pair with a negative covariance its sweeps never converged, so where they
    stopped was set by rounding.  The Crowd Layer head is tested on positive maps only: it
    fixes no sign of its network's output, so ``-x`` trains another network."""
    data = _unit_design(design)
    learner = get_tags(cl.get_method(name)).requires_features
    maps = [(1e-3, 0.0), (10.0, 0.0), (100.0, 0.0), (1.0, 1e4), (2.5, -300.0)]
    if not learner:
        maps += [(-1.0, 0.0), (-0.01, 3.0)]
    spread = float(data.value.std())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pairs that never meet: the fallback warns (below)
        est, se = _fit_in_units(name, data, 1.0, 0.0)
        for a, b in maps:
            moved, moved_se = _fit_in_units(name, data, a, b)
            np.testing.assert_allclose((moved - b) / a, est, rtol=0, atol=1e-6 * spread,
                                       err_msg=f"estimates, answers {a} x + {b}")
            np.testing.assert_allclose(moved_se / abs(a), se, rtol=1e-6,
                                       err_msg=f"stderr, answers {a} x + {b}")


def test_lrs_moments_without_a_usable_pair_has_honest_standard_errors():
    """No pair of workers shares 3 tasks (2 answers per task, 1,000 workers): lrs-moments took
    ``v = 1`` in the answers' units, so on a 0-100 scale the truths' prior variance was 1, its
    95% intervals covered 10% of the truths and it lost to the mean.  It now takes the
    workers as alike, with variances the answers give (the covariance of two workers'
    answers to one task, the spread within tasks)."""
    from crowdlearn.continuous.lrs_moments import worker_covariances

    data, planted = continuous_crowd(500, 1000, 2, assignment="random", truth_mean=50,
                                     truth_sd=10, seed=0)
    assert len(worker_covariances(data, 3)[0]) == 0  # the case: no usable pair
    lrs = cl.get_method("lrs-moments")().fit(data)
    err = lrs.estimates_.to_numpy() - planted.truth
    cover = float(np.mean(np.abs(err) < 1.96 * lrs.stderr_.to_numpy()))
    assert 0.9 < cover < 0.99
    assert mae(lrs, data) < mae(Mean().fit(data), data)


@pytest.mark.parametrize("name", ["gaussian-em", "catd", "lrs-moments"])
def test_workers_who_never_meet_give_each_task_its_answers_with_a_warning(name):
    """No task answered by two workers: a worker model has nothing to be fitted from.
    Gaussian-EM and lrs-moments gave every task the answers' mean with standard errors of
    1e-3 and 2e-7, silently.  Every worker model now warns, as the class-label aggregators
    do, and returns the mean of each task's answers with the standard error of ``mean``."""
    df = pd.DataFrame({"task": ["a", "b", "c", "c"], "worker": ["u", "v", "w", "w"],
                       "label": [1.0, 5.0, 2.0, 4.0]})
    with pytest.warns(UserWarning, match=r"no task has answers from two different workers and "
                                         r"no gold is given, so worker quality cannot be estimated"):
        est = cl.get_method(name)().fit(df)
    plain = Mean().fit(df)
    np.testing.assert_allclose(est.estimates_, [1.0, 5.0, 3.0])
    np.testing.assert_allclose(est.stderr_, plain.stderr_)
    assert (est.stderr_ >= 1.0).all()  # the spread of the answers within tasks, not 1e-3
    # gold on an answered task teaches gaussian-em and catd the worker; lrs-moments never
    # reads gold, so its worker model stays unidentified
    gold = {"a": 1.5}
    if name == "lrs-moments":
        with pytest.warns(UserWarning, match="and the method learns nothing from gold"):
            with_gold = cl.get_method(name)().fit(df, gold=gold)
        np.testing.assert_allclose(with_gold.estimates_, [1.5, 5.0, 3.0])
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            cl.get_method(name)().fit(df, gold=gold)
    with warnings.catch_warnings():  # the location estimates lose nothing: no warning
        warnings.simplefilter("error")
        Median().fit(df)


# ------------------------------------------------------------------ location estimates
def test_location_estimates_by_hand():
    df = pd.DataFrame({"task": ["a"] * 5 + ["b"] * 2,
                       "worker": list("pqrst") + list("pq"),
                       "label": [1.0, 2.0, 3.0, 4.0, 100.0, 5.0, 6.0]})
    mean = Mean().fit(df).estimates_
    median = Median().fit(df).estimates_
    trimmed = TrimmedMean(trim=0.2).fit(df).estimates_
    assert mean.to_dict() == {"a": 22.0, "b": 5.5}
    assert median.to_dict() == {"a": 3.0, "b": 5.5}
    assert trimmed.to_dict() == {"a": 3.0, "b": 5.5}  # one answer cut at each end of a


# --------------------------------------------------------------- planted worker recovery
def test_gaussian_em_recovers_planted_bias_noise_and_scale():
    """100 answers per worker: correlations with the planted bias, noise and scale > 0.95."""
    data, planted = continuous_crowd(1000, 50, 5, bias=(-1, 1), noise=(0.2, 1.5),
                                     scale=(0.5, 1.5), seed=3)
    em = GaussianEM().fit(data)
    assert em.converged_
    assert _corr(planted.bias, em.worker_bias_) > 0.95
    assert _corr(planted.noise, em.worker_noise_) > 0.95
    assert _corr(planted.scale, em.worker_scale_) > 0.9
    assert mae(em, data) < 0.7 * mae(Mean().fit(data), data)


def test_gaussian_em_at_20_answers_per_worker_is_near_the_oracle():
    """With 20 answers per worker, the noise of a worker is known to ~1/sqrt(40) relative
    error even with the truth in hand: the EM's recovery is compared with that oracle's
    (per-worker residual spread around the planted truth and planted bias)."""
    corr_b, corr_n, oracle_n = [], [], []
    for seed in range(4):
        data, p = continuous_crowd(200, 50, 5, bias=(-1.5, 1.5), noise=(0.2, 1.5), seed=seed)
        em = GaussianEM(scale=False).fit(data)
        resid = data.value - p.truth[data.task] - p.bias[data.worker]
        n_w = data.answers_per_worker()
        oracle = np.sqrt(np.bincount(data.worker, resid**2) / n_w)
        corr_b.append(_corr(p.bias, em.worker_bias_))
        corr_n.append(_corr(p.noise, em.worker_noise_))
        oracle_n.append(_corr(p.noise, oracle))
    assert np.mean(corr_b) > 0.95
    assert np.mean(corr_n) > np.mean(oracle_n) - 0.05


@pytest.mark.parametrize("name", ["gaussian-em", "catd", "lrs-moments"])
def test_worker_models_beat_the_mean_with_spammers(name):
    data, planted = continuous_crowd(3000, 50, 5, scale=(0.6, 1.4), spammers=0.2, seed=1)
    est = cl.get_method(name)().fit(data)
    assert mae(est, data) < 0.9 * mae(Mean().fit(data), data)
    noise = est.worker_noise_.to_numpy()
    # a spammer's answers do not follow the truth: whatever else the model says of it, the
    # residual noise it leaves is larger than a diligent worker's
    assert np.median(noise[planted.spammer]) > np.median(noise[~planted.spammer])
    if name != "catd":  # CATD has no scale: spammers show up as noise, not as scale 0
        assert np.abs(est.worker_scale_[planted.spammer]).max() < 0.3


def test_stderr_is_calibrated_for_the_gaussian_em():
    data, _ = continuous_crowd(2000, 40, 5, seed=5)
    em = GaussianEM().fit(data)
    z = (em.estimates_.to_numpy() - data.truth) / em.stderr_.to_numpy()
    assert 0.85 < np.std(z) < 1.15
    assert np.mean(np.abs(z) < 1.96) > 0.92


def test_gold_is_used_by_the_worker_model():
    data, planted = continuous_crowd(300, 20, 3, bias=(-2, 2), seed=2)
    gold = pd.Series(planted.truth[:100], index=data.tasks[:100])
    without = GaussianEM().fit(data)
    with_gold = GaussianEM().fit(data, gold=gold)
    rest = data.tasks[100:]
    truth = pd.Series(planted.truth, index=data.tasks)[rest]
    assert mae(with_gold.estimates_[rest], truth) < mae(without.estimates_[rest], truth)
    assert (with_gold.stderr_[data.tasks[:100]] == 0).all()


# ------------------------------------------------------------------------- real sets
def _real(name):
    folder = SHARED_DATA / name
    skip_missing(folder)
    return load_folder(folder, kind="continuous")


def _scores(data):
    return {m: continuous_scores(cl.get_method(m)().fit(data), data) for m in METHODS}


def test_movie_reviews_best_method_beats_mean_and_median():
    """The train split's crowd answers against the gold ratings (1,500 reviews)."""
    scores = _scores(_real("movie_reviews"))
    best = min(scores, key=lambda m: scores[m]["mae"])
    for baseline in ("mean", "median"):
        assert scores[best]["mae"] < 0.8 * scores[baseline]["mae"]
        assert scores[best]["rmse"] < 0.8 * scores[baseline]["rmse"]


def test_snow_emotion_methods_against_the_baselines():
    """On snow_emotion no worker model beats the plain mean (the mean is within 2% of
    every method; the Zheng et al. 2017 survey found the same on this set); the worker
    models beat the median on both metrics."""
    scores = _scores(_real("snow_emotion"))
    for m in ("gaussian-em", "catd", "lrs-moments"):
        assert scores[m]["mae"] < scores["median"]["mae"]
        assert scores[m]["rmse"] < scores["median"]["rmse"]
        assert scores[m]["mae"] < 1.06 * scores["mean"]["mae"]


@pytest.mark.xfail(strict=True, reason="issue 14 acceptance not met on snow_emotion: no "
                   "method beats the mean of the answers; even worker weights fitted on the "
                   "gold gain only 1.5% MAE (benchmarks/RESULTS.md, continuous-accuracy)")
def test_snow_emotion_best_method_beats_mean_and_median():
    scores = _scores(_real("snow_emotion"))
    best = min(scores, key=lambda m: scores[m]["mae"])
    assert best not in ("mean", "median")
    assert scores[best]["rmse"] < min(scores["mean"]["rmse"], scores["median"]["rmse"])


def test_snow_wordsim_rank_correlation():
    """Gold on another scale (0-4 vs answers 0-10): rank correlation only."""
    data = _real("snow_wordsim")
    for m in METHODS:
        assert spearman(cl.get_method(m)().fit(data), data) > 0.85


def test_metrics_by_hand_and_truth_report():
    est = pd.Series({"a": 1.0, "b": 2.0, "c": 4.0, "d": 9.0})
    gold = pd.Series({"a": 1.0, "b": 3.0, "c": 3.0, "z": 0.0})  # d without gold, z not estimated
    assert mae(est, gold) == pytest.approx(2 / 3)
    assert rmse(est, gold) == pytest.approx(np.sqrt(2 / 3))
    assert spearman(est, gold) == pytest.approx(0.866, abs=1e-3)
    data, _ = continuous_crowd(50, 10, 3, seed=0)
    report = truth_report(Mean().fit(data), data)
    assert set(report) == {"mae", "rmse", "pearson", "spearman"}
    with pytest.raises(ValueError, match="no truth"):
        truth_report(Mean().fit(data), data.with_truth(None))


def test_catd_leave_one_out_residuals_keep_workers_from_absorbing_their_tasks():
    # random design, 5 answers per task: with in-sample residuals a worker's own answer pulls
    # its tasks' estimates toward itself, its weight grows, and it ends alone on its tasks
    data, planted = continuous_crowd(4000, 400, 5, assignment="random", seed=0, scale=(0.6, 1.4),
                                     spammers=0.1)
    fits = {r: cl.get_method("catd")(residuals=r).fit(data) for r in ("in-sample", "leave-one-out")}
    mae = {r: np.mean(np.abs(f.result_frame()["estimate"].to_numpy() - planted.truth)) for r, f in fits.items()}
    assert fits["leave-one-out"].converged_ and fits["leave-one-out"].n_iter_ < 30
    assert mae["leave-one-out"] < mae["in-sample"], mae
    # no worker's weight runs away: the largest is within a few times the median
    weights = {r: np.asarray(f.worker_weight_, float) for r, f in fits.items()}
    assert weights["leave-one-out"].max() < 50 * np.median(weights["leave-one-out"])
    assert weights["in-sample"].max() > 1000 * np.median(weights["in-sample"])
    with pytest.raises(ValueError, match="residuals"):
        cl.get_method("catd")(residuals="cheat").fit(data)


@pytest.mark.parametrize("source", ["simulated", "movie_reviews"])
def test_catd_task_answered_alone_by_a_newcomer_gets_the_crowds_noise_as_stderr(source):
    """A task answered once, by a worker who answered nothing else, had a standard error of
    30 times the crowd's noise (its worker's variance was bounded as one residual by the
    chi-square interval of one degree of freedom): it is now the crowd's pooled noise, the
    estimate is the answer, and no other task changes."""
    from crowdlearn.continuous.base import pooled_variance

    if source == "simulated":
        data, _ = continuous_crowd(300, 20, 4, seed=3)
    else:
        data = _real("movie_reviews")
    frame = data.to_frame().astype({"task": str, "worker": str})
    alone = pd.concat([frame, pd.DataFrame({"task": ["lonely"], "worker": ["newbie"],
                                            "label": [float(np.median(data.value))]})],
                      ignore_index=True)
    with_newbie = ContinuousAnswers.from_frame(alone)
    est = cl.get_method("catd")().fit(with_newbie)
    base = cl.get_method("catd")().fit(ContinuousAnswers.from_frame(frame))
    se = float(est.stderr_["lonely"])
    assert est.estimates_["lonely"] == pytest.approx(float(np.median(data.value)))
    spread = float(np.std(data.value))
    assert np.isfinite(se) and 0 < se <= spread
    center = Median().fit(with_newbie).estimates_.loc[with_newbie.tasks].to_numpy()
    assert se == pytest.approx(np.sqrt(pooled_variance(with_newbie, center)))
    # the newcomer's weight enters no other task
    others = base.estimates_.index
    np.testing.assert_allclose(est.estimates_[others], base.estimates_, rtol=1e-9)
    np.testing.assert_allclose(est.stderr_[others], base.stderr_, rtol=1e-9)


def test_cli_summary_says_n_a_for_a_metric_undefined_on_the_gold(tmp_path, capsys):
    """Gold on one task (or answers all equal) leaves Pearson and Spearman undefined; the
    summary line printed 'pearson = nan, spearman = nan'; it now prints n/a, as the group
    report does for undefined gaps."""
    from crowdlearn.cli import main

    src, gold = tmp_path / "a.csv", tmp_path / "g.csv"
    src.write_text("task,worker,label\nt1,a,1.5\nt1,b,2.5\nt2,a,3\nt2,b,4\n")
    gold.write_text("task,truth\nt1,2\n")
    assert main(["aggregate", str(src), "--kind", "continuous", "--method", "mean", "--gold", str(gold)]) == 0
    err = capsys.readouterr().err
    assert "against gold: mae = 0.0000, rmse = 0.0000, pearson = n/a, spearman = n/a" in err
    assert "nan" not in err


# ------------------------------------------------------------- gold keyed by task id
def _int_task_answers() -> pd.DataFrame:
    """Integer task ids 0..3: an array of gold used to be keyed 0..n-1, i.e. clamp tasks 0..n-1."""
    return pd.DataFrame({"task": [0, 0, 1, 1, 2, 3, 3], "worker": ["a", "b", "a", "b", "a", "a", "b"],
                         "label": [1.0, 2.0, 3.0, 5.0, 4.0, 7.0, 9.0]})


@pytest.mark.parametrize("gold", [np.array([10.0, 20, 30]), [10.0, 20, 30], pd.Index([10.0, 20, 30])])
def test_positional_gold_and_truth_are_refused(gold):
    frame = _int_task_answers()
    with pytest.raises(ValueError, match=r"^gold must be keyed by task id \(a pandas Series .* which names no task"):
        cl.get_method("mean")().fit(frame, gold=gold)
    with pytest.raises(ValueError, match=r"^truth must be keyed by task id .*task -> number"):
        ContinuousAnswers.from_frame(frame, truth=gold)
    data = ContinuousAnswers.from_frame(frame)
    with pytest.raises(ValueError, match=r"^truth must be keyed by task id"):
        data.with_truth(gold)
    with pytest.raises(ValueError, match=r"^gold must be keyed by task id"):
        data.encode_gold(gold)


@pytest.mark.parametrize("name", ["mean", "gaussian-em"])
def test_keyed_gold_gives_the_fits_it_gave(name):
    frame = _int_task_answers()
    series = pd.Series([10.0, 30.0], index=[3, 1])
    plain = cl.get_method(name)()
    a = plain.fit(frame, gold=series).result_frame()
    b = cl.get_method(name)().fit(frame, gold={3: 10.0, 1: 30.0}).result_frame()
    pd.testing.assert_frame_equal(a, b)
    assert a.set_index("task").loc[[1, 3], "estimate"].tolist() == [30.0, 10.0]
    assert a.set_index("task").loc[[0, 2], "stderr"].gt(0).all()  # only the keyed tasks clamped
    for truth in (series, {3: 10.0, 1: 30.0}):
        data = ContinuousAnswers.from_frame(frame, truth=truth)
        np.testing.assert_array_equal(data.truth, [np.nan, 30.0, np.nan, 10.0])
        np.testing.assert_array_equal(ContinuousAnswers.from_frame(frame).with_truth(truth).truth, data.truth)


def test_continuous_metrics_refuse_positional_gold():
    est = pd.Series({0: 1.0, 1: 2.0, 2: 4.0})
    with pytest.raises(ValueError, match=r"^gold must be keyed by task id .*ContinuousAnswers works too"):
        mae(est, np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"^estimates must be keyed by task id"):
        rmse([1.0, 2.0, 3.0], est)
    assert mae(est, {2: 3.0, 0: 1.0}) == mae(est, pd.Series([3.0, 1.0], index=[2, 0])) == 0.5
