import os

if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest -n N: N processes share the cores, and torch / OpenBLAS threads in each of them
    # spin against one another (the torch tests ran 6x slower with -n 2 on two cores). Set
    # before numpy or torch is imported, which is when they read it.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

#: the real datasets: ../shared/data beside the checkout, or $CROWDLEARN_SHARED_DATA
SHARED_DATA = Path(
    os.environ.get("CROWDLEARN_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
)
#: every skip for a missing dataset starts with this, so the summary can count them
MISSING_DATA = "shared data missing:"


def skip_missing(folder: Path) -> None:
    """Skip the calling test when ``folder`` has no labels.csv, with a countable reason."""
    if not (folder / "labels.csv").exists():
        pytest.skip(f"{MISSING_DATA} {folder}")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Say loudly when real-data tests were skipped because the datasets are not there."""
    missing = [
        rep for rep in terminalreporter.stats.get("skipped", [])
        if MISSING_DATA in str(getattr(rep, "longrepr", ""))
    ]
    if missing:
        terminalreporter.write_sep("!", f"{len(missing)} real-data tests skipped", yellow=True)
        terminalreporter.write_line(
            f"the datasets were not found under {SHARED_DATA}; put ../shared beside the checkout "
            "or set CROWDLEARN_SHARED_DATA to the folder holding bluebirds/, dog/, ..."
        )


def accuracy(est, data) -> float:
    """Share of ``data``'s tasks whose fitted label matches its planted truth."""
    return float(np.mean(est.label_codes_ == data.truth))


def load_shared(name: str):
    """A dataset folder of ../shared/data as CrowdLabels with gold; skips when absent."""
    from crowdlearn.core.io import load_folder

    folder = SHARED_DATA / name
    skip_missing(folder)
    return load_folder(folder)


def load_shared_text(name: str):
    """A dataset folder of ../shared/data read as text: (CrowdLabels, gold Series on its tasks).

    Unlike :func:`load_shared`, every id and label stays a string; skips when absent.
    """
    from crowdlearn import CrowdLabels

    folder = SHARED_DATA / name
    skip_missing(folder)
    labels = pd.read_csv(folder / "labels.csv", dtype=str)
    truth = pd.read_csv(folder / "truth.csv", dtype=str).set_index("task")["truth"]
    data = CrowdLabels.from_frame(labels)
    return data, truth[truth.index.isin(data.tasks)]


def planted_crowd(n_tasks=2000, n_workers=30, k=3, per_task=5, seed=0, spammers=0):
    """DS crowd with random asymmetric confusions [w, true, answered]; returns (data, conf)."""
    from crowdlearn import CrowdLabels

    rng = np.random.default_rng(seed)
    conf = np.empty((n_workers, k, k))
    for w in range(n_workers):
        for j in range(k):
            diag = rng.uniform(0.55, 0.9)
            off = rng.dirichlet(np.full(k - 1, 0.7)) * (1 - diag)
            conf[w, j] = np.insert(off, j, diag)
    conf[:spammers] = rng.dirichlet(np.ones(k), size=spammers)[:, None, :]
    truth = rng.integers(0, k, n_tasks)
    task = np.repeat(np.arange(n_tasks), per_task)
    worker = np.argsort(rng.random((n_tasks, n_workers)), axis=1)[:, :per_task].ravel()
    cum = conf[worker, truth[task]].cumsum(axis=1)
    label = (rng.random(len(task))[:, None] > cum).sum(axis=1).clip(max=k - 1)
    data = CrowdLabels.from_codes(task, worker, label, n_tasks=n_tasks, n_workers=n_workers,
                                  n_classes=k, truth=truth)
    return data, conf


def coin_crowd(n_tasks=1500, n_workers=50, k=4, per_task=5, spam_frac=0.2, seed=0):
    """One-coin workers (accuracy U(0.4, 0.95)) plus uniform spammers (accuracy 1/K).

    Returns (data, acc, spam); the first ``spam_frac`` of the workers are the spammers.
    """
    from crowdlearn import CrowdLabels

    rng = np.random.default_rng(seed)
    acc = rng.uniform(0.4, 0.95, n_workers)
    spam = np.arange(n_workers) < int(spam_frac * n_workers)
    acc[spam] = 1.0 / k
    truth = rng.integers(0, k, n_tasks)
    task = np.repeat(np.arange(n_tasks), per_task)
    worker = np.argsort(rng.random((n_tasks, n_workers)), axis=1)[:, :per_task].ravel()
    right = rng.random(len(task)) < acc[worker]
    wrong = (truth[task] + rng.integers(1, k, len(task))) % k
    label = np.where(right, truth[task], wrong)
    data = CrowdLabels.from_codes(
        task, worker, label, n_tasks=n_tasks, n_workers=n_workers, n_classes=k, truth=truth
    )
    return data, acc, spam


def one_coin_crowd(n_tasks, n_workers, per_task, k, seed, acc=None, adv_frac=0.2, spam_frac=0.2):
    """One-coin workers, ``per_task`` distinct ones per task; returns (data, truth, acc).

    Default population: 60% good (accuracy 0.65-0.95), ``adv_frac`` adversaries (accuracy
    0.05-0.3 for K = 2, 0-0.1 otherwise: well below chance) and ``spam_frac`` spammers
    (accuracy 1/K), in random order.  Wrong answers are uniform over the other classes.
    Uses the legacy ``RandomState`` stream, so seeds keep their data.
    """
    from crowdlearn import CrowdLabels

    rng = np.random.RandomState(seed)
    if acc is None:
        n_adv, n_spam = int(adv_frac * n_workers), int(spam_frac * n_workers)
        acc = np.concatenate([
            rng.uniform(0.65, 0.95, n_workers - n_adv - n_spam),
            rng.uniform(0.05, 0.3, n_adv) if k == 2 else rng.uniform(0.0, 0.1, n_adv),
            np.full(n_spam, 1.0 / k),
        ])[rng.permutation(n_workers)]
    truth = rng.randint(k, size=n_tasks)
    workers = np.argsort(rng.rand(n_tasks, n_workers), axis=1)[:, :per_task]
    task = np.repeat(np.arange(n_tasks), per_task)
    worker = workers.ravel()
    correct = rng.rand(len(task)) < acc[worker]
    wrong = (truth[task] + rng.randint(1, k, size=len(task))) % k
    label = np.where(correct, truth[task], wrong)
    data = CrowdLabels.from_codes(
        task, worker, label, n_tasks=n_tasks, n_workers=n_workers, n_classes=k, truth=truth
    )
    return data, truth, acc
