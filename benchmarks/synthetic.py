"""Synthetic Dawid-Skene-style crowd data for speed benchmarks, saved as plain .npz codes.

Model (:func:`crowdlearn.simulate.one_coin`): ``n_tasks = n_labels // labels_per_task``
tasks with a uniform true class in ``[0, n_classes)``; each task is labelled by
``labels_per_task`` distinct workers drawn uniformly at random; worker ``w`` answers
correctly with probability ``acc[w] ~ U(0.75, 0.95)`` and otherwise picks one of the other
classes uniformly.  Rows are in task-major order.  The saved files are read by
``_crowdkit_runner.py`` in crowd-kit's venv with numpy alone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["make_ds_codes", "save_npz", "load_npz"]


def make_ds_codes(
    n_labels: int,
    n_classes: int = 5,
    labels_per_task: int = 5,
    n_workers: int | None = None,
    seed: int = 0,
    acc_range: tuple[float, float] = (0.75, 0.95),
):
    """Generate integer-coded crowd labels.

    Returns ``(task, worker, label, truth)``: three int32 arrays of length
    ``n_tasks * labels_per_task`` (codes: tasks ``0..n_tasks-1``, workers
    ``0..n_workers-1``, labels ``0..n_classes-1``) and the int32 array of true
    classes, ``truth[t]`` for task ``t``.

    ``n_workers`` defaults to ``max(labels_per_task, n_labels // 100)``
    (1,000 workers at 1e5 labels, 10,000 at 1e6).
    """
    n_labels = int(n_labels)
    if labels_per_task < 1 or n_classes < 2:
        raise ValueError("need labels_per_task >= 1 and n_classes >= 2")
    n_tasks = n_labels // labels_per_task
    if n_tasks < 1:
        raise ValueError("n_labels must be >= labels_per_task")
    if n_workers is None:
        n_workers = max(labels_per_task, n_labels // 100)
    if n_workers < labels_per_task:
        raise ValueError("n_workers must be >= labels_per_task (workers per task are distinct)")

    from crowdlearn import simulate

    data = simulate.one_coin(n_tasks, n_workers, n_classes, labels_per_task, accuracy=tuple(acc_range),
                             seed=seed)
    return data.task, data.worker, data.label, data.truth


def save_npz(path, task, worker, label, truth=None, **extra) -> Path:
    """Save coded arrays to ``path`` (uncompressed .npz) with keys task/worker/label[/truth]."""
    path = Path(path)
    arrays = {
        "task": np.asarray(task, dtype=np.int32),
        "worker": np.asarray(worker, dtype=np.int32),
        "label": np.asarray(label, dtype=np.int32),
    }
    if truth is not None:
        arrays["truth"] = np.asarray(truth, dtype=np.int32)
    arrays.update({k: np.asarray(v) for k, v in extra.items()})
    np.savez(path, **arrays)
    return path


def load_npz(path):
    """Load ``(task, worker, label, truth_or_None)`` saved by :func:`save_npz`."""
    with np.load(path) as z:
        truth = z["truth"] if "truth" in z.files else None
        return z["task"], z["worker"], z["label"], truth


if __name__ == "__main__":  # python synthetic.py N OUT.npz [n_workers]
    import sys

    n = int(float(sys.argv[1]))
    out = sys.argv[2]
    nw = int(sys.argv[3]) if len(sys.argv) > 3 else None
    t, w, y, z = make_ds_codes(n, n_workers=nw)
    save_npz(out, t, w, y, z)
    print(f"{out}: {y.size} labels, {z.size} tasks, {w.max() + 1} workers, "
          f"raw label accuracy {np.mean(y == z[t]):.3f}")
