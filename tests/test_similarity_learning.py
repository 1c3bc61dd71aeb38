"""End-to-end crowdclustering (learning.crowd_clustering): G(i,j) ~ Bernoulli(f(x_i)^T f(x_j))."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

import crowdlearn  # noqa: E402
from crowdlearn.core.base import get_tags  # noqa: E402
from crowdlearn.diagnostics.similarity_metrics import adjusted_rand  # noqa: E402
from crowdlearn.learning.crowd_clustering import CrowdClustering  # noqa: E402
from crowdlearn.similarity import SimilarityAnswers  # noqa: E402
from crowdlearn.similarity.symnmf import SymNMFClustering  # noqa: E402
from crowdlearn.simulate.similarity import similarity_crowd  # noqa: E402


@pytest.fixture(scope="module")
def sparse_crowd():
    # Gaussian clusters in 10 dimensions; 6 answers per item (1,200 answers for 400 items):
    # far too few for the answers alone
    return similarity_crowd(n_items=400, n_clusters=4, n_workers=30, answers_per_item=6,
                            random_fraction=0.2, n_features=10, separation=3.0, seed=3)


def test_registered_needing_features():
    assert crowdlearn.methods(kind="similarity")["crowd-clustering"] is CrowdClustering
    assert get_tags(CrowdClustering).requires_features


def test_features_beat_label_only_symnmf_on_sparse_answers(sparse_crowd):
    data, planted = sparse_crowd
    e2e = CrowdClustering(n_clusters=4, epochs=40).fit(data)
    label_only = SymNMFClustering(n_clusters=4).fit(data)
    ours = adjusted_rand(planted.clusters, e2e.clusters_.to_numpy())
    theirs = adjusted_rand(planted.clusters, label_only.clusters_.to_numpy())
    assert ours > 0.6 and ours > theirs + 0.3
    # coin-flipping annotators come out less reliable than the others on average
    rel = e2e.worker_reliability_.to_numpy()
    assert rel[planted.random].mean() < rel[~planted.random].mean() - 0.1


def test_needs_features_and_checks_params():
    data, _ = similarity_crowd(n_items=40, n_clusters=2, answers_per_item=10, seed=0)
    with pytest.raises(ValueError, match="needs item features"):
        CrowdClustering(n_clusters=2).fit(data)
    feats, _ = similarity_crowd(n_items=40, n_clusters=2, answers_per_item=10, n_features=3,
                                seed=0)
    for params, name in [(dict(epochs=0), "epochs"), (dict(lr=-1.0), "lr"),
                         (dict(init_reliability=0.3), "init_reliability")]:
        with pytest.raises(ValueError, match=name):
            CrowdClustering(n_clusters=2, **params).fit(feats)


def test_uncompared_item_gets_network_memberships():
    data, _ = similarity_crowd(n_items=60, n_clusters=2, answers_per_item=20, n_features=3,
                               separation=5.0, seed=1)
    frame = data.to_frame()
    rows = frame["item_a"].ne(0) & frame["item_b"].ne(0)  # item 0 is never compared
    sub = SimilarityAnswers.from_frame(frame[rows], all_items=data.items, features=data.features)
    est = CrowdClustering(n_clusters=2, epochs=30).fit(sub)
    memb = est.memberships_.loc[0].to_numpy()
    # f(x_0), not the flat prior: item 0 sits with the items of its planted cluster
    assert memb.max() > 0.9
    mates = np.flatnonzero(data.truth == data.truth[0])[1:]
    assert np.mean(est.clusters_.loc[mates].to_numpy() == est.clusters_.loc[0]) > 0.9
