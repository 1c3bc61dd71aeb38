"""Max-MIG, COINNet and the EM-family learners (raykar, aggnet, deepmf, deepbp, bayesdgc)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from sklearn.metrics import roc_auc_score  # noqa: E402

from crowdlearn.core.data import CrowdLabels  # noqa: E402
from crowdlearn.learning import get_method, methods  # noqa: E402
from crowdlearn.core.stats import vote_fractions as soft_majority  # noqa: E402
from crowdlearn.learning.estep import bp_one_coin, reliability_nodes  # noqa: E402
from crowdlearn.learning.maxmig import mig_loss  # noqa: E402
from crowdlearn import simulate  # noqa: E402

NAMES = ["maxmig", "coinnet", "raykar", "aggnet", "deepmf", "deepbp", "bayesdgc"]
# small training budgets keep the shared checks fast; the defaults are benchmarked separately
FAST = {
    "maxmig": dict(epochs=15),
    "coinnet": dict(epochs=30),
    "raykar": dict(max_iter=8, backbone="mlp", lr=3e-3),
    "aggnet": dict(max_iter=6),
    "deepmf": dict(max_iter=6),
    "deepbp": dict(max_iter=6, n_nodes=64),
    "bayesdgc": dict(epochs=25),
}


def make(name, **kw):
    return get_method(name)(**{**FAST[name], **kw})


def planted_crowd(n_tasks=600, k=3, n_workers=8, l=5, seed=0, perfect=False, separation=3.0):
    """Dense-ish DS crowd with asymmetric planted confusions [worker, true, answered]."""
    spec = simulate.WorkerSpec.diligent(n_workers, 1.0 if perfect else (0.55, 0.9))
    data = simulate.crowd(n_tasks, k, spec, labels_per_task=l, seed=seed)
    X, _ = simulate.class_features(data.truth, k, 8, separation, seed + 1)
    return X, data, data.planted.confusions


def feature_truth(n_tasks, k, separation, seed):
    """Balanced random truth and Gaussian class-cluster features for it."""
    truth = np.random.default_rng(seed).integers(0, k, n_tasks)
    return truth, simulate.class_features(truth, k, 10, separation, seed + 1)[0]


def maxmig_crowd(structure, expertise, n_tasks, seed):
    """Max-MIG's binary information structure on Gaussian-cluster features."""
    truth, X = feature_truth(n_tasks, 2, 2.5, seed)
    return simulate.maxmig_structures(n_tasks, structure, expertise, seed=seed + 2, truth=truth, features=X)


def sparse_regular_crowd(n_tasks, l=3, r=4, n_extreme=0, seed=0):
    """deepBP's sparse binary crowd (Beta(2, 1) workers) plus spammers labelling every task."""
    truth, X = feature_truth(n_tasks, 2, 1.0, seed)
    return simulate.sparse_regular(n_tasks, l, r, dense_spammers=n_extreme, seed=seed, truth=truth, features=X)


@pytest.fixture(scope="module")
def crowd():
    return planted_crowd()


@pytest.fixture(scope="module")
def fitted(crowd):
    X, labels, _ = crowd
    return {name: make(name).fit(X, labels) for name in NAMES}


def test_registry_lists_all():
    assert set(NAMES) <= set(methods())


def test_one_estimator_base(crowd, fitted):
    """Every learner is a CrowdClassifier: one input path, backbone factory, history format."""
    import crowdlearn.learning.numerics as core
    from crowdlearn.learning.backbones import MLP
    from crowdlearn.learning.base import CrowdClassifier, CustomLoopClassifier

    assert all(issubclass(cls, CrowdClassifier) for cls in methods().values())
    assert not hasattr(core, "CrowdModel") and not hasattr(core, "make_backbone")
    X, labels, _ = crowd
    for name in NAMES:
        m = fitted[name]
        assert isinstance(m, CustomLoopClassifier)
        assert isinstance(m.net_, MLP) or name == "raykar"  # raykar: logistic regression
        assert m.history_ and {"epoch", "loss", "time"} <= set(m.history_[0])
        np.testing.assert_array_equal(m.predict_proba(pd.DataFrame(X[:20])), m.predict_proba(X[:20]))
    with pytest.raises(ValueError, match="max_iter"):
        make("aggnet", max_iter=0).fit(X, labels)


# ---------------------------------------------------------------------------- shared checks
@pytest.mark.parametrize("name", NAMES)
def test_outputs_well_formed(name, crowd, fitted):
    X, labels, _ = crowd
    m = fitted[name]
    assert list(m.probas_.index) == list(labels.tasks)
    p = m.probas_.to_numpy()
    assert np.all(np.isfinite(p)) and np.allclose(p.sum(1), 1)
    q = m.predict_proba(X[:50])
    assert q.shape == (50, labels.n_classes) and np.allclose(q.sum(1), 1)
    assert set(m.predict(X[:50])) <= set(labels.classes)
    # accuracy on training tasks well above majority vote's level on this crowd
    mv = (soft_majority(labels).argmax(1) == labels.truth).mean()
    acc = (p.argmax(1) == labels.truth).mean()
    assert acc > max(0.85, mv), (acc, mv)


@pytest.mark.parametrize("name", NAMES)
def test_bad_input_raises_value_error(name, crowd):
    X, labels, _ = crowd
    with pytest.raises(ValueError, match="one row per task"):
        make(name).fit(X[:-1], labels)
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        make(name).fit(bad, labels)
    with pytest.raises(ValueError, match="CrowdLabels"):
        make(name).fit(X, labels.to_frame())
    with pytest.raises(ValueError, match="not fitted"):
        make(name).predict_proba(X)


@pytest.mark.parametrize("name", ["raykar", "aggnet", "deepmf", "bayesdgc", "coinnet"])
def test_recovers_planted_confusions(name, crowd, fitted):
    _, _, planted = crowd
    est = fitted[name].confusions_
    assert est.shape == planted.shape
    assert np.allclose(est.sum(-1), 1)
    # mean absolute error per cell; orientation [worker, true, answered] (asymmetric planted)
    err = np.abs(est - planted).mean()
    transposed = np.abs(est.transpose(0, 2, 1) - planted).mean()
    limit = 0.12 if name == "coinnet" else 0.06  # COINNet's outlier term absorbs part of the noise
    assert err < limit and err < transposed, (err, transposed)


def test_deepbp_recovers_worker_accuracy():
    # seed 1: the 8 workers' mean accuracies spread (sd 0.07) enough to be ranked; in the
    # shared crowd (seed 0) they lie within sd 0.04, the size of deepBP's estimation error
    X, labels, planted = planted_crowd(seed=1)
    true_acc = np.array([np.mean(np.diag(c)) for c in planted])
    est = make("deepbp").fit(X, labels).skills_
    assert np.corrcoef(est, true_acc)[0, 1] > 0.8
    assert np.abs(est - true_acc).mean() < 0.06


# ---------------------------------------------------------------------------- E-step units
def test_bp_estep_exact_on_single_worker_factor():
    """One worker, one task: message = E[q]/(1 - E[q]) under the Beta prior (K = 2)."""
    lab = CrowdLabels.from_codes(np.array([0]), np.array([0]), np.array([1]), n_tasks=1, n_workers=1, n_classes=2)
    q, logw = reliability_nodes(2.0, 1.0, 16, "quadrature")
    post, y, _ = bp_one_coin(lab, np.full((1, 2), 0.5), q, logw)
    np.testing.assert_allclose(post[0], [1 / 3, 2 / 3], atol=1e-10)
    q, logw = reliability_nodes(2.0, 1.0, 20000, "mc", np.random.default_rng(0))
    post_mc, _, _ = bp_one_coin(lab, np.full((1, 2), 0.5), q, logw)
    np.testing.assert_allclose(post_mc[0], [1 / 3, 2 / 3], atol=0.01)


def test_bp_estep_matches_aggregator_bp_without_network():
    """With a uniform network factor deepBP's E-step is Liu et al.'s BP (registry ``bp``)."""
    from crowdlearn.aggregation.belief_propagation import BeliefPropagation

    lab = sparse_regular_crowd(n_tasks=300, seed=1)
    q, logw = reliability_nodes(2.0, 1.0, 64, "quadrature")
    post, _, _ = bp_one_coin(lab, np.full((300, 2), 0.5), q, logw, tol=1e-6, max_iter=200)
    ref = BeliefPropagation(alpha=2.0, beta=1.0, tol=1e-6, max_iter=200).fit(lab).probas_.to_numpy()
    assert np.abs(post - ref).max() < 1e-3


def test_mig_losses_prefer_agreeing_experts():
    torch.manual_seed(0)
    y = torch.randint(0, 3, (64,))
    sharp = torch.nn.functional.one_hot(y, 3).float() * 0.9 + 0.1 / 3
    noise = torch.softmax(torch.randn(64, 3), -1)
    prior = torch.full((3,), 1 / 3)
    for div in ("kl", "pearson", "js"):
        assert mig_loss(sharp, sharp, prior, div) < mig_loss(sharp, noise, prior, div)
    with pytest.raises(ValueError, match="divergence"):
        mig_loss(sharp, sharp, prior, "tv")


def test_bayesdgc_natural_gradient_sign():
    """The SVI step moves the Dirichlet parameters towards prior + statistics (notes 8.5)."""
    X, labels, planted = planted_crowd(n_tasks=400, seed=5)
    m = make("bayesdgc").fit(X, labels)
    counts = np.bincount(labels.worker, minlength=labels.n_workers)
    # total concentration of each worker ~ K * (prior row mass) + its number of answers
    prior_mass = labels.n_classes * (5.0 + 2.0 * (labels.n_classes - 1))
    np.testing.assert_allclose(m.dirichlet_.sum((1, 2)), prior_mass + counts, rtol=0.25)


# ---------------------------------------------------------------------------- method-specific
def _mv_then_train_acc(labels, X, seed=0):
    torch.manual_seed(seed)
    y = torch.as_tensor(soft_majority(labels).argmax(1))
    Xt = torch.as_tensor((X - X.mean(0)) / X.std(0), dtype=torch.float32)
    net = torch.nn.Sequential(torch.nn.Linear(X.shape[1], 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(100):
        loss = torch.nn.functional.cross_entropy(net(Xt), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return float((net(Xt).argmax(1).numpy() == labels.truth).mean())


def test_maxmig_stable_across_information_structures():
    accs, mv_accs = {}, {}
    for structure in ("independent", "naive_majority", "correlated"):
        labels = maxmig_crowd(structure, "low", n_tasks=1000, seed=0)
        m = get_method("maxmig")(epochs=15).fit(labels.features, labels)
        accs[structure] = (m.predict_proba(labels.features).argmax(1) == labels.truth).mean()
        mv_accs[structure] = _mv_then_train_acc(labels, labels.features)
    assert max(accs.values()) - min(accs.values()) < 0.02, accs
    assert min(accs.values()) > 0.85, accs
    assert mv_accs["naive_majority"] < 0.6, mv_accs  # majority vote collapses (juniors say 0)
    assert accs["naive_majority"] > mv_accs["naive_majority"] + 0.25


def test_maxmig_forecaster_uses_new_labels():
    labels = maxmig_crowd("independent", "high", n_tasks=800, seed=2)
    m = get_method("maxmig")(epochs=10).fit(labels.features, labels)
    h = m.predict_proba(labels.features)
    z = m.predict_proba(labels.features, labels)
    np.testing.assert_allclose(z, m.probas_.to_numpy(), atol=1e-5)
    assert (z.argmax(1) == labels.truth).mean() >= (h.argmax(1) == labels.truth).mean() - 0.01
    with pytest.raises(ValueError, match="tasks"):
        m.predict_proba(labels.features[:10], labels)


def test_coinnet_outlier_scores_rank_planted_outliers():
    truth, X = feature_truth(1200, 4, 3.0, seed=0)
    labels = simulate.instance_outliers(truth, X, outlier_frac=0.15, n_workers=20, labels_per_task=5,
                                        accuracy=(0.6, 0.9), outlier_prob=0.8, seed=0)
    outlier = labels.planted.outlier_class >= 0
    m = get_method("coinnet")(epochs=40).fit(labels.features, labels)
    auc = roc_auc_score(outlier, m.outlier_scores_.to_numpy())
    assert auc > 0.8, auc  # measured 0.90 at the default 60 epochs on 1500 tasks
    assert (m.predict_proba(labels.features).argmax(1) == labels.truth).mean() > 0.9


def test_deepbp_beats_deepmf_with_extreme_spammer_and_misspecified_prior():
    """Sparse (3, 4)-regular binary crowd, Beta(2, 1) workers + one extreme spammer, model
    prior Dir(2, 1.5) (paper sec. 4.1): mean field mistakes the spammer and collapses."""
    labels = sparse_regular_crowd(n_tasks=1000, l=3, r=4, n_extreme=1, seed=0)
    kw = dict(alpha=2.0, beta=1.5, max_iter=10)
    bp = get_method("deepbp")(n_nodes=100, **kw).fit(labels.features, labels)
    mf = get_method("deepmf")(**kw).fit(labels.features, labels)
    acc_bp = (bp.probas_.to_numpy().argmax(1) == labels.truth).mean()
    acc_mf = (mf.probas_.to_numpy().argmax(1) == labels.truth).mean()
    assert acc_bp > 0.8 and acc_bp > acc_mf + 0.05, (acc_bp, acc_mf)
    assert bp.skills_[-1] == pytest.approx(0.5, abs=0.05)  # the spammer is seen as a coin flip


def test_clipping_caps_network_confidence():
    from crowdlearn.learning.numerics import clipped_proba

    p = np.array([[0.99, 0.01], [0.3, 0.7]])
    q = clipped_proba(p, 0.8)
    assert q.max() <= 0.8 + 1e-6 and np.allclose(q.sum(1), 1)
    with pytest.raises(ValueError, match="clip"):
        X, labels, _ = planted_crowd(n_tasks=60)
        get_method("deepbp")(clip=0.2).fit(X, labels)


def test_features_attached_or_as_frame_give_same_fit(crowd):
    X, labels, _ = crowd
    ref = make("raykar").fit(X, labels).probas_.to_numpy()
    attached = make("raykar").fit(labels.with_features(X)).probas_.to_numpy()
    frame = pd.DataFrame(X, index=labels.tasks)[::-1]  # rows in another order, aligned by task id
    by_id = make("raykar").fit(frame, labels).probas_.to_numpy()
    np.testing.assert_allclose(attached, ref, atol=1e-6)
    np.testing.assert_allclose(by_id, ref, atol=1e-6)
    with pytest.raises(ValueError, match="features"):
        make("raykar").fit(labels)
