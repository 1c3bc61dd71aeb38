"""torch import guard and the small torch utilities shared by the end-to-end learners.

torch is an optional extra of crowdlearn: ``import crowdlearn`` never imports it; the learning
estimators do, through this module, so a missing install fails with one clear message.
"""

from __future__ import annotations

import contextlib
import random

import numpy as np

try:  # the single place where the learning base imports torch
    import torch
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError(
        "crowdlearn.learning needs PyTorch; install it with: pip install 'crowdlearn[torch]'"
    ) from exc

__all__ = ["torch", "seed_everything", "seeded", "resolve_device", "as_tensor"]


def seed_everything(seed: int) -> int:
    """Seed Python's, numpy's global and torch's generators; returns the integer seed.

    The estimators do not rely on the global numpy/Python generators (they draw from their own
    ``numpy.random.Generator``) but user-supplied backbones may, so all are seeded.  Call it
    inside :func:`seeded`, which gives the caller's generators back afterwards.
    """
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    return seed


@contextlib.contextmanager
def seeded(seed: int):
    """Run the block with every global generator seeded by ``seed``, then restore them.

    A fit must not change the caller's random streams: torch's CPU generator is forked
    (``torch.random.fork_rng``) and Python's and numpy's global states are saved and put back,
    so ``np.random.rand()`` after a fit draws what it would have drawn without it.
    """
    py_state, np_state = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]):
            seed_everything(seed)
            yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)


def resolve_device(device) -> "torch.device":
    """``"cpu"`` (default, also for ``None``), ``"cuda"``, ``"cuda:1"``, ``"mps"`` or a torch.device.

    ``"auto"`` picks CUDA when available.  An unavailable device raises ``ValueError``.
    """
    if isinstance(device, torch.device):
        return device
    if device in (None, "cpu"):
        return torch.device("cpu")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device must be 'cpu', 'cuda', 'auto' or a torch.device, got {device!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available")
    return dev


def as_tensor(a, device="cpu", dtype=None) -> "torch.Tensor":
    """numpy array -> tensor on ``device`` (float arrays become float32, ints int64)."""
    a = np.asarray(a)
    if dtype is None:
        dtype = torch.float32 if a.dtype.kind == "f" else torch.int64 if a.dtype.kind in "iu" else None
    return torch.as_tensor(a, dtype=dtype, device=resolve_device(device))
