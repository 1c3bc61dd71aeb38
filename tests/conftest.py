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
    """Skip the calling test when ``folder`` has no answers file (labels.csv, or pairs.csv
    for comparisons), with a countable reason."""
    if not any((folder / name).exists() for name in ("labels.csv", "pairs.csv")):
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
    """DS crowd with random asymmetric confusions [w, true, answered]; returns (data, conf).

    Diligent workers: per (worker, class) accuracy U(0.55, 0.9), errors split by a
    Dirichlet(0.7); the first ``spammers`` workers answer from their own random distribution
    whatever the truth.  ``per_task`` distinct random workers per task.
    """
    from crowdlearn import simulate

    specs = [simulate.WorkerSpec.diligent(n_workers - spammers, (0.55, 0.9), concentration=0.7)]
    if spammers:
        specs.insert(0, simulate.WorkerSpec.spammer(spammers, concentration=1.0))
    data = simulate.crowd(n_tasks, k, specs, labels_per_task=per_task, seed=seed)
    return data, data.planted.confusions


def coin_crowd(n_tasks=1500, n_workers=50, k=4, per_task=5, spam_frac=0.2, seed=0):
    """One-coin workers (accuracy U(0.4, 0.95)) plus uniform spammers (accuracy 1/K).

    Returns (data, acc, spam); the first ``spam_frac`` of the workers are the spammers.
    """
    from crowdlearn import simulate

    n_spam = int(spam_frac * n_workers)
    specs = [simulate.WorkerSpec.spammer(n_spam), simulate.WorkerSpec.one_coin(n_workers - n_spam, (0.4, 0.95))]
    data = simulate.crowd(n_tasks, k, specs, labels_per_task=per_task, seed=seed)
    return data, data.planted.accuracy, data.planted.kind == "spammer"


def one_coin_crowd(n_tasks, n_workers, per_task, k, seed, acc=None, adv_frac=0.2, spam_frac=0.2):
    """One-coin workers, ``per_task`` distinct ones per task; returns (data, truth, acc).

    Default population, in this worker order: good workers (accuracy 0.65-0.95),
    ``adv_frac`` adversaries (accuracy 0.05-0.3 for K = 2, 0-0.1 otherwise: well below
    chance) and ``spam_frac`` spammers (accuracy 1/K).  Wrong answers are uniform over the
    other classes.  ``acc`` gives every worker's accuracy instead.
    """
    from crowdlearn import simulate

    WorkerSpec = simulate.WorkerSpec
    if acc is None:
        n_adv, n_spam = int(adv_frac * n_workers), int(spam_frac * n_workers)
        specs = [
            WorkerSpec.one_coin(n_workers - n_adv - n_spam, (0.65, 0.95)),
            WorkerSpec.one_coin(n_adv, (0.05, 0.3) if k == 2 else (0.0, 0.1)),
            WorkerSpec.spammer(n_spam),
        ]
    else:
        specs = [WorkerSpec.one_coin(n_workers, np.asarray(acc, dtype=float))]
    data = simulate.crowd(n_tasks, k, specs, labels_per_task=per_task, seed=seed)
    return data, data.truth, data.planted.accuracy
