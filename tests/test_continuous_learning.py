"""Crowd Layer regression heads (S, B, S+B): planted annotator parameters on synthetic crowds
with features, and end-to-end learning on movie_reviews (train reviews with crowd answers,
test reviews scored by f(x) alone)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import SHARED_DATA, skip_missing

pytest.importorskip("torch")

import crowdlearn as cl  # noqa: E402
from crowdlearn.continuous.data import ContinuousAnswers  # noqa: E402
from crowdlearn.continuous.features import read_ldac, text_features  # noqa: E402
from crowdlearn.core.tables import read_table  # noqa: E402
from crowdlearn.learning.crowd_layer_regression import CrowdLayerRegression  # noqa: E402
from crowdlearn.simulate.continuous import continuous_crowd  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread():
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_registered_as_continuous_with_features():
    from crowdlearn.core.base import get_tags

    tags = get_tags(cl.get_method("crowd-layer-regression", kind="continuous"))
    assert tags.requires_features and tags.stochastic and tags.kind == "continuous"


def test_s_plus_b_recovers_planted_bias_and_scale():
    data, planted = continuous_crowd(600, 20, 5, bias=(-1, 1), scale=(0.6, 1.4), noise=(0.2, 0.8),
                                     n_features=8, feature_noise=0.2, seed=4)
    est = CrowdLayerRegression(mode="S+B", backbone="linear").fit(data)
    assert np.corrcoef(est.worker_bias_, planted.bias)[0, 1] > 0.9
    assert np.corrcoef(est.worker_scale_, planted.scale)[0, 1] > 0.8
    assert np.corrcoef(est.worker_noise_, planted.noise)[0, 1] > 0.8
    mean = cl.get_method("mean")().fit(data).estimates_.to_numpy()
    err = np.abs(est.estimates_.to_numpy() - planted.truth).mean()
    assert err < np.abs(mean - planted.truth).mean()
    # predict on the training features is the fitted estimate (no answers used)
    assert np.allclose(est.predict(data.features), est.estimates_.to_numpy(), atol=1e-6)


def test_bad_input():
    data, _ = continuous_crowd(40, 8, 3, seed=0)
    with pytest.raises(ValueError, match="needs item features"):
        CrowdLayerRegression().fit(data)
    data, _ = continuous_crowd(40, 8, 3, n_features=3, seed=0)
    with pytest.raises(ValueError, match="mode must be one of"):
        CrowdLayerRegression(mode="MW").fit(data)
    est = CrowdLayerRegression(epochs=2).fit(data)
    with pytest.raises(ValueError, match="X has 2 features"):
        est.predict(np.zeros((3, 2)))


def _movie_reviews(n_components=50):
    folder = SHARED_DATA / "movie_reviews"
    skip_missing(folder)
    tasks = read_table(folder / "tasks.csv")["task"].to_numpy()  # the row order of bow.txt
    feats = pd.DataFrame(text_features(read_ldac(folder / "bow.txt"), n_components), index=tasks)
    truth = read_table(folder / "truth.csv").set_index("task")["truth"]
    data = ContinuousAnswers.from_frame(read_table(folder / "labels.csv"), all_tasks=tasks,
                                        features=feats, truth=truth)
    return data, data.labels_per_task() == 0


def test_movie_reviews_end_to_end_beats_two_stage_ridge():
    """Test reviews (no answers) scored by f(x): the S+B head beats a ridge regression
    trained on the mean of the answers (two-stage) on MAE and RMSE."""
    from sklearn.linear_model import RidgeCV
    from sklearn.preprocessing import StandardScaler

    data, test = _movie_reviews()
    assert test.sum() == 3506
    est = CrowdLayerRegression(mode="S+B", backbone="linear").fit(data)
    pred = est.estimates_.to_numpy()[test]
    gold = data.truth[test]
    mean = cl.get_method("mean")().fit(data).estimates_.to_numpy()
    z = StandardScaler().fit(data.features[~test]).transform(data.features)
    ridge = RidgeCV(alphas=np.logspace(-2, 4, 13)).fit(z[~test], mean[~test]).predict(z[test])
    mae, ridge_mae = np.abs(pred - gold).mean(), np.abs(ridge - gold).mean()
    rmse, ridge_rmse = np.sqrt(((pred - gold) ** 2).mean()), np.sqrt(((ridge - gold) ** 2).mean())
    assert mae < ridge_mae and rmse < ridge_rmse
    assert mae < 0.75 * np.abs(gold - gold.mean()).mean()  # far from the constant guess
