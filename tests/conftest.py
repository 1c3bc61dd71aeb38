from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def load_shared(name: str):
    """A dataset folder of ../shared/data as CrowdLabels with gold; skips when absent."""
    from crowdlearn.io import load_folder

    folder = SHARED_DATA / name
    if not (folder / "labels.csv").exists():
        pytest.skip(f"{folder} not available")
    return load_folder(folder)


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
