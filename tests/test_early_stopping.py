"""The shared early-stopping rule: best held-out weights kept and restored, patience."""

import pytest

torch = pytest.importorskip("torch")

from crowdlearn.learning.early_stopping import EarlyStopping  # noqa: E402


def _run(criteria, patience, min_delta=1e-6):
    """Step a one-parameter module whose weight is the epoch number; return (stopper, module, epochs run)."""
    m = torch.nn.Linear(1, 1, bias=False)
    es = EarlyStopping(patience, min_delta=min_delta)
    run = 0
    for epoch, c in enumerate(criteria):
        with torch.no_grad():
            m.weight.fill_(float(epoch))
        run += 1
        if es.step(epoch, c, [m]):
            break
    es.restore([m])
    return es, m, run


def test_best_weights_restored_and_patience_stops():
    es, m, run = _run([3.0, 2.0, 2.5, 1.0, 1.5, 1.2, 1.1, 0.1], patience=3)
    assert run == 7  # epochs 4, 5, 6 do not improve on epoch 3
    assert es.best_epoch == 3 and es.best == 1.0 and m.weight.detach().item() == 3.0


def test_no_patience_runs_everything_and_keeps_best():
    es, m, run = _run([3.0, 1.0, 2.0, 2.0, 2.0, 2.0], patience=None)
    assert run == 6 and es.best_epoch == 1 and m.weight.detach().item() == 1.0


def test_min_delta_and_nan():
    # 0.9999999 is not an improvement over 1.0 with min_delta 1e-6; nan never improves
    es, m, run = _run([1.0, 1.0 - 1e-7, float("nan"), 0.5], patience=None)
    assert es.best_epoch == 3 and m.weight.detach().item() == 3.0
    es, _, _ = _run([1.0, 1.0 - 1e-7], patience=None)
    assert es.best_epoch == 0


def test_without_held_out_set_last_epoch_and_weights_kept():
    es, m, run = _run([None] * 5, patience=1)
    assert run == 5 and es.best_epoch == 4 and m.weight.detach().item() == 4.0  # nothing restored
