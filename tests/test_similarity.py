"""Similarity annotations (crowdclustering): answer table, simulator, methods, metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import crowdlearn
from crowdlearn.diagnostics.similarity_metrics import (adjusted_rand, clustering_scores, nmi,
                                                       pairwise_f1)
from crowdlearn.similarity import SimilarityAnswers
from crowdlearn.similarity.base import (agreement_reliability, estimate_n_clusters, pair_evidence,
                                        pair_same_posterior)
from crowdlearn.similarity.spectral import SpectralSimilarity
from crowdlearn.similarity.symnmf import SymNMFClustering, procrustes_symnmf
from crowdlearn.simulate.similarity import similarity_crowd


def _truth(data):
    return pd.Series(data.truth, index=data.items)


# ------------------------------------------------------------------ acceptance (issue 14)
@pytest.fixture(scope="module")
def acceptance_crowd():
    # 1,000 items, K = 5, 20% coin-flipping annotators; 40 answers per item = 20,000 answers
    return similarity_crowd(n_items=1000, n_clusters=5, n_workers=50, answers_per_item=40,
                            random_fraction=0.2, seed=11)


@pytest.fixture(scope="module")
def acceptance_fit(acceptance_crowd):
    data, _ = acceptance_crowd
    return SymNMFClustering(n_clusters=5).fit(data)


def test_symnmf_reaches_ari_09_on_acceptance_crowd(acceptance_crowd, acceptance_fit):
    data, planted = acceptance_crowd
    assert adjusted_rand(planted.clusters, acceptance_fit.clusters_.to_numpy()) > 0.9


def test_symnmf_beats_vote_spectral_baseline(acceptance_crowd, acceptance_fit):
    data, planted = acceptance_crowd
    base = SpectralSimilarity(n_clusters=5).fit(data)
    ours = adjusted_rand(planted.clusters, acceptance_fit.clusters_.to_numpy())
    theirs = adjusted_rand(planted.clusters, base.clusters_.to_numpy())
    assert ours > theirs + 0.05


def test_planted_reliability_recovered_and_random_annotators_flagged(acceptance_crowd,
                                                                     acceptance_fit):
    _, planted = acceptance_crowd
    rel = acceptance_fit.worker_reliability_.to_numpy()
    assert np.corrcoef(rel, planted.reliability)[0, 1] > 0.9
    # every coin-flipper is below every reliable annotator, and near 1/2
    assert rel[planted.random].max() < rel[~planted.random].min()
    assert np.all(np.abs(rel[planted.random] - 0.5) < 0.05)


def test_n_clusters_estimated_by_eigen_gap():
    data, planted = similarity_crowd(n_items=1000, n_clusters=5, answers_per_item=100,
                                     random_fraction=0.2, seed=2)
    assert estimate_n_clusters(data) == 5
    est = SymNMFClustering().fit(data)
    assert est.n_clusters_ == 5
    assert adjusted_rand(planted.clusters, est.clusters_.to_numpy()) > 0.95


@pytest.mark.parametrize("method", [SymNMFClustering, SpectralSimilarity])
def test_answers_that_never_say_different_give_one_cluster(method):
    """Every pair answered "same" (or tied): the centred similarity matrix is zero and the
    eigen-gap rule picked K = 2 from a flat spectrum, splitting items every answer joins."""
    items = [f"i{k}" for k in range(8)]
    rows = [(w, items[k], items[k + 1], 1) for k in range(7) for w in ("u", "v")]
    rows += [("u", "i0", "i7", 1), ("u", "i2", "i5", 1), ("v", "i2", "i5", 0)]  # one tie
    data = SimilarityAnswers.from_frame(pd.DataFrame(rows, columns=list(SimilarityAnswers.ROLES)))
    assert estimate_n_clusters(data) == 1
    est = method().fit(data)
    assert est.n_clusters_ == 1 and set(est.clusters_) == {0}


@pytest.mark.parametrize("method", [SymNMFClustering, SpectralSimilarity])
@pytest.mark.parametrize("n_clusters", [None, 2])
def test_one_pair_answered_different_gives_two_clusters(method, n_clusters):
    """Two items whose only answers say "different": the estimate of K returned 1 for fewer
    than 3 items, and SymNMF asked for K = n = 2 got a rank-1 completion (the eigen solver was
    capped at n - 1 vectors), so both put the two items in one cluster with confidence 1."""
    data = SimilarityAnswers.from_frame(pd.DataFrame(
        [("u", "a", "b", 0), ("v", "a", "b", 0)], columns=list(SimilarityAnswers.ROLES)))
    if n_clusters is None:
        assert estimate_n_clusters(data) == 2
    est = method(n_clusters=n_clusters).fit(data)
    assert est.n_clusters_ == 2
    assert est.clusters_["a"] != est.clusters_["b"]
    # one pair answered "same" stays one cluster
    same = SimilarityAnswers.from_frame(pd.DataFrame([("u", "a", "b", 1)], columns=list(SimilarityAnswers.ROLES)))
    assert estimate_n_clusters(same) == 1 and set(method().fit(same).clusters_) == {0}


def test_registered_under_similarity_kind():
    names = set(crowdlearn.methods(kind="similarity"))
    assert {"symnmf", "similarity-spectral"} <= names


def test_result_frame_columns_and_memberships(acceptance_fit, acceptance_crowd):
    data, _ = acceptance_crowd
    frame = acceptance_fit.result_frame()
    assert list(frame.columns) == ["item", "cluster", "confidence"]
    assert list(frame["item"]) == list(data.items)
    memb = acceptance_fit.memberships_
    np.testing.assert_allclose(memb.sum(axis=1), 1.0)
    assert set(acceptance_fit.clusters_) == set(range(acceptance_fit.n_clusters_))
    np.testing.assert_array_equal(memb.to_numpy().argmax(axis=1), acceptance_fit.clusters_)


def test_dataframe_input_equals_table_input():
    data, _ = similarity_crowd(n_items=80, n_clusters=3, answers_per_item=30, seed=4)
    a = SymNMFClustering(n_clusters=3).fit(data).result_frame()
    b = SymNMFClustering(n_clusters=3).fit(data.to_frame()).result_frame()
    pd.testing.assert_frame_equal(a, b)


def test_procrustes_symnmf_recovers_block_indicators():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 4, size=200)
    h_true = np.eye(4)[labels]
    vals, vecs = np.linalg.eigh(h_true @ h_true.T)
    w = vecs[:, -4:] * np.sqrt(vals[-4:])
    h = procrustes_symnmf(w)
    assert adjusted_rand(labels, h.argmax(axis=1)) == 1.0
    np.testing.assert_allclose(h @ h.T, h_true @ h_true.T, atol=1e-6)



def _sparse_error_free_answers():
    """12 items in 3 clusters (i % 3); each pair asked with probability 0.4, by one of 5
    workers drawn at random; every answer is correct (24 answers).  The planted clustering is
    the only 3-clustering consistent with all of them."""
    rng = np.random.default_rng(12)
    rows = []
    for i in range(12):
        for j in range(i + 1, 12):
            if rng.random() < 0.4:
                rows.append((f"w{rng.integers(5)}", i, j, int(i % 3 == j % 3)))
    return SimilarityAnswers.from_frame(pd.DataFrame(rows, columns=list(SimilarityAnswers.ROLES)))


def test_symnmf_does_not_collapse_on_sparse_error_free_answers():
    """Reliabilities were each answer's agreement with h_i . h_j of the soft memberships, near
    1/K for uncertain items whatever the answer: round by round the error-free annotators fell
    (one to 0.44), the memberships flattened to 1/K (confidence 0.34) and the clusters came
    from rounding (ARI 0.51, 1.0 after one round)."""
    data = _sparse_error_free_answers()
    assert data.n_answers == 24
    est = SymNMFClustering(n_clusters=3).fit(data)
    truth = np.array([int(item) % 3 for item in data.items])
    assert adjusted_rand(truth, est.clusters_.to_numpy()) == 1.0
    assert est.result_frame()["confidence"].median() > 0.6
    assert est.worker_reliability_.min() > 0.5


def test_pair_posterior_keeps_the_pairs_own_answers():
    """Uniform memberships: the product says "same" with 1/K whatever the answers; the pair's
    posterior weighs its own evidence against the 1/K prior.  One-hot: both are the product."""
    data = SimilarityAnswers.from_frame(pd.DataFrame(
        [("u", "a", "b", 1), ("v", "b", "c", 0)], columns=list(SimilarityAnswers.ROLES)))
    lo, hi, ev, _ = pair_evidence(data, np.array([2.0, 2.0]))
    flat = np.full((3, 3), 1 / 3)
    logistic = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    np.testing.assert_allclose(pair_same_posterior(flat, lo, hi, ev),
                               logistic(ev + np.log(1 / 2)))
    np.testing.assert_allclose(agreement_reliability(data, flat, prior=0.0), [1 / 3, 2 / 3])
    np.testing.assert_allclose(agreement_reliability(data, flat, prior=0.0, evidence=ev),
                               [logistic(2 - np.log(2)), 1 - logistic(-2 - np.log(2))])
    hard = np.eye(3)[[0, 0, 1]]
    np.testing.assert_array_equal(pair_same_posterior(hard, lo, hi, ev), [1.0, 0.0])
    np.testing.assert_array_equal(agreement_reliability(data, hard, evidence=ev),
                                  agreement_reliability(data, hard))


@pytest.mark.parametrize("rename", [lambda i: f"it{i}", str, lambda i: -i],
                         ids=["prefixed", "text", "negated"])
def test_symnmf_posteriors_do_not_depend_on_item_names(rename):
    """Renamed items are the same items in another order.  The random restarts of the SymNMF
    step were rotations in the basis of the eigenvectors, whose signs follow that order:
    confidences moved by up to 0.58 here."""
    data, _ = similarity_crowd(n_items=200, n_clusters=4, answers_per_item=10, seed=3)
    frame = data.to_frame()
    renamed = frame.assign(item_a=frame["item_a"].map(rename), item_b=frame["item_b"].map(rename))
    a = SymNMFClustering(n_clusters=4).fit(frame)
    b = SymNMFClustering(n_clusters=4).fit(renamed)
    back = {rename(i): i for i in data.items}
    conf_a = a.result_frame().set_index("item")["confidence"]
    conf_b = b.result_frame().set_index("item")["confidence"].rename(index=back)
    np.testing.assert_allclose(conf_b.loc[conf_a.index], conf_a, atol=1e-8)
    memb_b = b.memberships_.rename(index=back).loc[a.memberships_.index].to_numpy()
    memb_a = a.memberships_.to_numpy()
    np.testing.assert_allclose(memb_b @ memb_b.T, memb_a @ memb_a.T, atol=1e-8)
    np.testing.assert_allclose(b.worker_reliability_, a.worker_reliability_, atol=1e-8)


def test_procrustes_symnmf_ignores_the_basis_of_the_square_root():
    """W and -W (eigenvectors of the other sign) are square roots of one matrix and give one
    factor H, random restarts included."""
    rng = np.random.default_rng(1)
    h_true = np.eye(4)[rng.integers(0, 4, size=60)]
    s = h_true @ h_true.T + 0.8 * rng.standard_normal((60, 60))
    vals, vecs = np.linalg.eigh((s + s.T) / 2)
    w = vecs[:, -4:] * np.sqrt(np.maximum(vals[-4:], 0.0))
    q, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    h = procrustes_symnmf(w, rng=np.random.default_rng(0), n_restarts=2)
    for other in (-w, w @ q):
        h2 = procrustes_symnmf(other, rng=np.random.default_rng(0), n_restarts=2)
        np.testing.assert_allclose(h2 @ h2.T, h @ h.T, atol=1e-8)


def test_procrustes_symnmf_iterates_until_the_residual_settles():
    """The stopping rule compared against prev = inf on the first step (inf <= tol * inf), so
    every start stopped after one Procrustes step whatever n_iter said."""
    rng = np.random.default_rng(3)
    h_true = 0.7 * np.eye(4)[rng.integers(0, 4, size=120)] + 0.3 * rng.random((120, 4))
    s = h_true @ h_true.T + 0.2 * rng.standard_normal((120, 120))
    vals, vecs = np.linalg.eigh((s + s.T) / 2)
    w = vecs[:, -4:] * np.sqrt(np.maximum(vals[-4:], 0.0))

    def residual(h):  # min over rotations Q of ||H - W Q||, the objective of the iterations
        u, _, vt = np.linalg.svd(w.T @ h)
        return np.linalg.norm(h - w @ (u @ vt))

    one, many = procrustes_symnmf(w, n_iter=1), procrustes_symnmf(w, n_iter=100)
    assert residual(many) < 0.5 * residual(one)

# ------------------------------------------------------------------------- answer table
def test_same_spellings_and_sides():
    df = pd.DataFrame({"worker": ["u", "v", "u", "v"], "item_a": ["x", "y", "z", "x"],
                       "item_b": ["y", "x", "x", "z"], "same": ["Yes", "0", "true", "NO"]})
    data = SimilarityAnswers.from_frame(df, truth={"x": "A", "y": "A", "q": "B"})
    assert list(data.same) == [1, 0, 1, 0]
    assert list(data.items) == ["x", "y", "z"]  # one code per item, whichever side
    assert data.n_items == 3 and list(data.truth) == [0, 0, -1]
    lo, hi, code = data.pairs()
    assert len(lo) == 2 and code[0] == code[1]  # (x, y) and (y, x) are one pair
    back = SimilarityAnswers.from_frame(data.to_frame())
    np.testing.assert_array_equal(back.same, data.same)
    with pytest.raises(ValueError, match="read-only"):
        data.same[0] = 0


@pytest.mark.parametrize("column, values, message", [
    ("item_b", ["y", "y", "x"], "compared with itself.*row position 1"),
    ("same", ["yes", "maybe", 1], "'maybe' at row position 1"),
    ("same", [1, 2, 0], "got 2 at row position 1"),
])
def test_bad_rows_are_named(column, values, message):
    df = pd.DataFrame({"worker": ["a", "b", "c"], "item_a": ["x", "y", "z"],
                       "item_b": ["y", "x", "x"], "same": [1, 0, 1]})
    df[column] = values
    with pytest.raises(ValueError, match=message):
        SimilarityAnswers.from_frame(df)


def test_bad_file_line_is_named(tmp_path):
    path = tmp_path / "sim.csv"
    path.write_text("worker,item_a,item_b,same\nw,a,b,1\nw,b,c,perhaps\n")
    with pytest.raises(ValueError, match="line 3"):
        SimilarityAnswers.from_csv(path)
    path.write_text("worker,item_a,item_b\nw,a,b\n")
    with pytest.raises(ValueError, match="same"):
        SimilarityAnswers.from_csv(path)


def test_missing_value_and_empty_table():
    df = pd.DataFrame({"worker": ["a", None], "item_a": ["x", "y"], "item_b": ["y", "z"],
                       "same": [1, 0]})
    with pytest.raises(ValueError, match="missing value in column 'worker' at row position 1"):
        SimilarityAnswers.from_frame(df)
    with pytest.raises(ValueError, match="empty"):
        SimilarityAnswers.from_frame(df.iloc[:0])


@pytest.mark.parametrize("params, name", [
    (dict(n_clusters=0), "n_clusters"), (dict(n_clusters=2.5), "n_clusters"),
    (dict(reliability_prior=-1.0), "reliability_prior"), (dict(max_iter=-1), "max_iter"),
    (dict(unobserved_weight=-0.5), "unobserved_weight"),
])
def test_bad_hyper_parameters(params, name):
    data, _ = similarity_crowd(n_items=40, n_clusters=2, answers_per_item=10, seed=0)
    with pytest.raises(ValueError, match=name):
        SymNMFClustering(**params).fit(data)


# --------------------------------------------------------------------------- simulator
def test_simulator_seeded_and_planted():
    a, pa = similarity_crowd(n_items=300, n_clusters=4, n_workers=20, answers_per_item=10,
                             random_fraction=0.25, seed=5)
    b, pb = similarity_crowd(n_items=300, n_clusters=4, n_workers=20, answers_per_item=10,
                             random_fraction=0.25, seed=5)
    pd.testing.assert_frame_equal(a.to_frame(), b.to_frame())
    assert pa.random.sum() == 5 and np.all(pa.reliability[pa.random] == 0.5)
    assert a.n_answers == 1500 and np.all(a.item_a != a.item_b)
    # answers agree with the planted status at the planted rates
    truly = pa.clusters[a.item_a] == pa.clusters[a.item_b]
    honest = (a.same == 1) == truly
    rel_hat = np.bincount(a.worker, weights=honest, minlength=20) / np.bincount(a.worker, minlength=20)
    assert np.corrcoef(rel_hat, pa.reliability)[0, 1] > 0.7
    c, _ = similarity_crowd(n_items=300, n_clusters=4, answers_per_item=10, same_fraction=0.6,
                            seed=5)
    same_pairs = np.mean(c.truth[c.item_a] == c.truth[c.item_b])
    assert 0.6 < same_pairs < 0.8


# ----------------------------------------------------------------------------- metrics
def test_metrics_relabel_invariant_and_hand_checked():
    truth = np.array([0, 0, 1, 1, 2, 2])
    pred = np.array([5, 5, 3, 3, 9, 9])
    assert clustering_scores(truth, pred) == {"ari": 1.0, "nmi": 1.0, "pairwise_f1": 1.0}
    # all in one cluster: 3 true pairs of 15 predicted -> P = 1/5, R = 1, F1 = 1/3
    assert pairwise_f1(truth, np.zeros(6, int)) == pytest.approx(1 / 3)
    assert nmi(truth, np.zeros(6, int)) == pytest.approx(0.0)
    # unknown truth (-1) is left out; Series align on the index
    t = pd.Series([0, 0, 1, -1], index=list("abcd"))
    p = pd.Series([1, 1, 0, 0], index=list("dcba"))
    assert adjusted_rand(t, p) == pytest.approx(adjusted_rand([0, 0, 1], [0, 0, 1]))


def test_json_lines_and_tsv_readers(tmp_path):
    rows = ['{"worker": "w", "item_a": "a", "item_b": "b", "same": "yes"}',
            '{"worker": "v", "item_a": "b", "item_b": "c", "same": 0}']
    (tmp_path / "sim.jsonl").write_text("\n".join(rows) + "\n")
    data = SimilarityAnswers.from_csv(tmp_path / "sim.jsonl")
    assert list(data.same) == [1, 0] and data.n_items == 3
    (tmp_path / "sim.tsv").write_text("worker\titem_a\titem_b\tsame\nw\ta\tb\ttrue\nv\tb\tb\t0\n")
    with pytest.raises(ValueError, match="compared with itself.*line 3"):
        SimilarityAnswers.from_csv(tmp_path / "sim.tsv")


@pytest.mark.parametrize("truth", [np.array(["A", "A", "B"]), ["A", "A", "B"]])
def test_positional_truth_is_refused_keyed_truth_reads_as_before(truth):
    """Integer item ids 0..2: a list used to be keyed 0..n-1, i.e. match items by position."""
    df = pd.DataFrame({"worker": ["u", "v", "u"], "item_a": [2, 1, 0], "item_b": [1, 0, 2],
                       "same": [1, 0, 1]})
    with pytest.raises(ValueError, match=r"^truth must be keyed by item id .*item -> cluster"):
        SimilarityAnswers.from_frame(df, truth=truth)
    for keyed in (pd.Series(["A", "B"], index=[2, 0]), {2: "A", 0: "B"}):
        assert list(SimilarityAnswers.from_frame(df, truth=keyed).truth) == [1, -1, 0]
