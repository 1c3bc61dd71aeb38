"""MinimaxEntropy: worker and task parameters (Zhou et al. 2012)."""

import numpy as np
import pandas as pd
import pytest

import crowdlearn as cl
from crowdlearn import simulate
from crowdlearn.benchmarking import gold_accuracy
from conftest import load_shared
from crowdlearn.core.stats import split_ties


def _hard_items_crowd(seed, n_tasks=1500, n_workers=30, k=3, per_task=7):
    """A crowd drawn from the minimax model: 40% of items pull every worker to one wrong class."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, n_tasks)
    acc = rng.uniform(0.6, 0.85, n_workers)
    sigma = np.log(np.where(np.eye(k)[None] > 0, acc[:, None, None], ((1 - acc) / (k - 1))[:, None, None]))
    tau = np.zeros((n_tasks, k, k))
    hard = rng.random(n_tasks) < 0.4
    lure = (truth + rng.integers(1, k, n_tasks)) % k
    tau[hard, :, :] = 0.0
    tau[np.flatnonzero(hard), truth[hard], lure[hard]] = 1.6
    rows = []
    for j in range(n_tasks):
        for w in rng.choice(n_workers, per_task, replace=False):
            logits = sigma[w, truth[j]] + tau[j, truth[j]]
            p = np.exp(logits - logits.max())
            rows.append((j, w, rng.choice(k, p=p / p.sum())))
    df = pd.DataFrame(rows, columns=["task", "worker", "label"])
    return cl.CrowdLabels.from_frame(df).with_truth(pd.Series(truth))


@pytest.mark.parametrize("seed", [0, 1])
def test_minimax_beats_majority_vote_and_matches_ds_with_item_difficulty(seed):
    data = _hard_items_crowd(seed)
    mv = gold_accuracy(cl.MajorityVote().fit(data).labels_, data)
    ds = gold_accuracy(cl.DawidSkene().fit(data).labels_, data)
    me = cl.MinimaxEntropy().fit(data)
    acc = gold_accuracy(me.labels_, data)
    assert acc > mv + 0.005
    assert acc >= ds - 0.01
    np.testing.assert_allclose(me.probas_.to_numpy().sum(axis=1), 1.0)
    assert np.all(np.diff(me.history_) > -1e-6 * data.n_labels)  # block ascent never goes down


def test_minimax_worker_confusions_follow_the_planted_ones():
    data = simulate.dawid_skene(3000, 20, 3, labels_per_task=6, seed=3)
    me = cl.MinimaxEntropy().fit(data)
    diag_fit = np.einsum("wkk->wk", me.confusions_).mean(axis=1)
    diag_true = np.einsum("wkk->wk", data.planted.confusions).mean(axis=1)
    assert np.corrcoef(diag_fit, diag_true)[0, 1] > 0.9
    assert gold_accuracy(me.labels_, data) >= gold_accuracy(cl.MajorityVote().fit(data).labels_, data)


def test_minimax_on_bluebirds():
    data = load_shared("bluebirds")
    assert gold_accuracy(cl.MinimaxEntropy().fit(data).labels_, data) > 0.89


def test_minimax_bad_parameters():
    data = simulate.dawid_skene(50, 5, 2, seed=0)
    with pytest.raises(ValueError, match="lambda_task"):
        cl.MinimaxEntropy(lambda_task="big").fit(data)
    with pytest.raises(ValueError, match="max_cells"):
        cl.MinimaxEntropy(max_cells=10, solver="lbfgs").fit(data)


def test_many_classes_and_few_answers_do_not_collapse_to_one_class():
    # imagenet15n: 15 classes, 1.27 answers per task; with a zero-centred worker penalty the
    # ascent labelled (almost) every task with one class: 7.6% accuracy on the whole set, 7.3%
    # on this random 600-task subset after 10 rounds (MV: 55%)
    data = load_shared("imagenet15n")
    rng = np.random.default_rng(0)
    sub = data.subset(tasks=data.tasks[np.sort(rng.choice(data.n_tasks, 600, replace=False))])
    est = cl.MinimaxEntropy(max_iter=10).fit(sub)
    # MV's expected accuracy with its (many) ties split evenly: a baseline that does not
    # depend on how the tie-breaking draw falls
    mv = split_ties(cl.MajorityVote().fit(sub).probas_.to_numpy())[np.arange(sub.n_tasks), sub.truth].mean()
    assert est.labels_.nunique() >= 12
    assert gold_accuracy(est.labels_, sub) > mv - 0.01


def test_numba_and_numpy_backends_agree():
    pytest.importorskip("numba")
    data = _hard_items_crowd(2, n_tasks=300)
    gold = pd.Series(data.truth[:30], index=data.tasks[:30])
    fits = [cl.MinimaxEntropy(backend=b, max_iter=8, solver="lbfgs").fit(data, gold=gold)
            for b in ("numpy", "numba")]
    np.testing.assert_allclose(fits[0].history_, fits[1].history_, rtol=1e-9)
    np.testing.assert_allclose(fits[0].probas_.to_numpy(), fits[1].probas_.to_numpy(), atol=1e-7)
    np.testing.assert_allclose(fits[0].task_params_, fits[1].task_params_, atol=1e-6)
    assert np.all(fits[1].label_codes_[:30] == data.truth[:30])  # gold clamps its tasks
    # the compiled path needs no (answers, K, K) arrays, so the memory guard is numpy's only
    cl.MinimaxEntropy(backend="numba", max_cells=10, max_iter=2).fit(data)
    with pytest.raises(ValueError, match="backend"):
        cl.MinimaxEntropy(backend="gpu").fit(data)


def test_block_solver_reaches_the_joint_solvers_fit():
    pytest.importorskip("numba")
    data = _hard_items_crowd(0, n_tasks=600)
    joint = cl.MinimaxEntropy().fit(data)
    block = cl.MinimaxEntropy(solver="block").fit(data)
    # "auto" follows the back end: the joint solver on small inputs (so the result does not
    # depend on numba being installed), the block solver where the compiled passes run
    assert joint.solver_ == "lbfgs" and block.solver_ == "block"
    assert cl.MinimaxEntropy(backend="numba", max_iter=1).fit(data).solver_ == "block"
    assert cl.MinimaxEntropy(backend="numpy", max_iter=1).fit(data).solver_ == "lbfgs"
    assert np.all(np.diff(block.history_) > -1e-6 * data.n_labels)  # both blocks lower the M-step objective
    assert block.history_[-1] >= joint.history_[-1] - 1e-3 * data.n_labels
    assert np.mean(block.label_codes_ == joint.label_codes_) > 0.99
    assert gold_accuracy(block.labels_, data) >= gold_accuracy(joint.labels_, data) - 0.01
    with pytest.raises(ValueError, match="solver"):
        cl.MinimaxEntropy(solver="newton").fit(data)


def test_numpy_answer_term_is_the_log_softmax_formula_to_the_bit():
    # the numpy back end's data term and E-step were restructured (buffers reused, one-hot
    # products formed on the answered column only) but must keep the log-softmax
    # formulation's bits: L-BFGS-B's path amplified rounding-level gradient changes into
    # posterior changes of 5e-4 on a real set (product)
    import scipy.sparse as sp
    from scipy.special import log_softmax

    from crowdlearn.aggregation.minimax import _AnswerTerm

    data = simulate.dawid_skene(80, 9, 4, labels_per_task=3, seed=2)
    k, n_w, n_t, n = data.n_classes, data.n_workers, data.n_tasks, data.n_labels
    rng = np.random.default_rng(0)
    term = _AnswerTerm(data)
    for scale in (1.0, 400.0):  # large logits: the row-maximum shift matters
        sig, tau = scale * rng.normal(size=(n_w, k, k)), rng.normal(size=(n_t, k, k))
        q = rng.dirichlet(np.ones(k), n_t)
        q[0] = [1.0, 0.0, 0.0, 0.0]
        # the former formulation
        by_worker = sp.csr_matrix((np.ones(n), (data.worker, np.arange(n))), shape=(n_w, n))
        by_task = sp.csr_matrix((np.ones(n), (data.task, np.arange(n))), shape=(n_t, n))
        onehot, qa = np.eye(k)[data.label], q[data.task]
        lp = log_softmax(sig[data.worker] + tau[data.task], axis=2)
        ref_value = -(qa[:, :, None] * onehot[:, None, :] * lp).sum()
        ga = (-qa[:, :, None] * (onehot[:, None, :] - np.exp(lp))).reshape(n, k * k)
        g_sig, g_tau = np.empty_like(sig), np.empty_like(tau)
        value = term.value_grad(sig, tau, q, g_sig, g_tau)
        assert value == ref_value
        np.testing.assert_array_equal(g_sig.reshape(n_w, -1), by_worker @ ga)
        np.testing.assert_array_equal(g_tau.reshape(n_t, -1), by_task @ ga)
        np.testing.assert_array_equal(term.task_loglik(sig, tau), by_task @ lp[np.arange(n), :, data.label])
    # and it is the gradient of the value (central differences on a few coordinates)
    sig, tau = rng.normal(size=(n_w, k, k)), 0.3 * rng.normal(size=(n_t, k, k))
    g_sig, g_tau = np.empty_like(sig), np.empty_like(tau)
    term.value_grad(sig, tau, q, g_sig, g_tau)
    for params, grad in ((sig, g_sig), (tau, g_tau)):
        for idx in zip(*(rng.integers(0, m, 6) for m in params.shape)):
            step = np.zeros_like(params)
            step[idx] = 1e-6
            params += step
            up = term.value_grad(sig, tau, q, np.empty_like(sig), np.empty_like(tau))
            params -= 2 * step
            down = term.value_grad(sig, tau, q, np.empty_like(sig), np.empty_like(tau))
            params += step
            assert abs((up - down) / 2e-6 - grad[idx]) < 1e-6 * max(1.0, abs(grad[idx]))


def _many_class_crowd(seed, k=400, n_tasks=60, n_workers=20, per_task=3, p_right=0.7):
    rng = np.random.RandomState(seed)
    truth = rng.randint(0, k, n_tasks)
    rows = []
    for t in range(n_tasks):
        for w in rng.choice(n_workers, per_task, replace=False):
            rows.append((t, w, truth[t] if rng.rand() < p_right else rng.randint(0, k)))
    return pd.DataFrame(rows, columns=["task", "worker", "label"]), truth


def test_many_classes_use_the_sparse_solver_and_converge():
    # ~130 classes on 180 answers: the dense solvers carried (W + N) K^2 = 1.4M parameters
    # and took ~1 min; the sparse solver optimises only the rows the posteriors reach
    df, truth = _many_class_crowd(0)
    me = cl.MinimaxEntropy().fit(df)
    assert me.solver_ == "sparse" and me.converged_
    # against majority vote's expected accuracy (a tied task counts 1 / the number of tied
    # classes): 11 of the 60 tasks are ties, so the accuracy of one draw is a matter of luck
    mv = cl.MajorityVote().fit(df).probas_
    top = mv.to_numpy() == mv.to_numpy().max(axis=1, keepdims=True)
    right = np.asarray(mv.columns)[None, :] == truth[mv.index.to_numpy()][:, None]
    expected_mv = float(np.mean((top & right).sum(axis=1) / top.sum(axis=1)))
    acc = float(np.mean(me.labels_.to_numpy() == truth[me.labels_.index.to_numpy()]))
    assert acc >= expected_mv - 0.02
    assert np.allclose(me.probas_.sum(axis=1), 1.0)


def test_sparse_solver_matches_the_dense_one_on_few_classes():
    # the sparse M-step drops posteriors below 1e-3; on a 3-class crowd it reaches the same
    # labels and an objective within 0.1% of the joint L-BFGS solver's
    data = _hard_items_crowd(0, n_tasks=300)
    dense = cl.MinimaxEntropy(solver="lbfgs").fit(data)
    sparse = cl.MinimaxEntropy(solver="sparse").fit(data)
    assert (dense.labels_ == sparse.labels_).mean() > 0.98
    assert abs(sparse.history_[-1] - dense.history_[-1]) < 1e-3 * abs(dense.history_[-1])


def test_numpy_memory_guard_does_not_advise_installing_numba_when_installed():
    from crowdlearn.core import kernels

    df, _ = _many_class_crowd(1, k=50)
    with pytest.raises(ValueError) as err:
        cl.MinimaxEntropy(solver="lbfgs", backend="numpy", max_cells=10).fit(df)
    if kernels.compiled_kernels() is not None:
        assert "install numba" not in str(err.value) and "backend='numba'" in str(err.value)


def test_predict_proba_finds_a_fitted_task_named_as_text():
    # a task of the fit named "3" (answers read from a CSV) keeps its fitted tau, as workers and
    # classes are matched by value
    data = simulate.dawid_skene(60, 8, 3, labels_per_task=4, seed=4)
    frame = data.to_frame()
    model = cl.get_method("minimax")().fit(frame)
    part = frame.iloc[:12]
    as_text = part.assign(task=part["task"].astype(str))
    np.testing.assert_allclose(model.predict_proba(as_text).to_numpy(), model.predict_proba(part).to_numpy(),
                               atol=1e-12)
