"""torch import guard and the small torch utilities shared by the end-to-end learners.

torch is an optional extra of crowdlearn: ``import crowdlearn`` never imports it; the learning
estimators do, through this module, so a missing install fails with one clear message.
"""

from __future__ import annotations

import contextlib
import math
import os
import random

import numpy as np

try:  # the single place where the learning base imports torch
    import torch
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError(
        "crowdlearn.learning needs PyTorch; install it with: pip install 'crowdlearn[torch]'"
    ) from exc

__all__ = ["torch", "seed_everything", "seeded", "resolve_device", "as_tensor", "free_cores",
           "choose_threads", "fit_threads"]

#: torch's thread count when crowdlearn first imported it; a different count at fit time means
#: the user called ``torch.set_num_threads`` and their choice stands
_IMPORT_THREADS = torch.get_num_threads()

#: multiply-adds of one mini-batch step (parameters x batch rows) per extra thread: below
#: this a thread's share of a matrix product costs less than waking and joining it
WORK_PER_THREAD = 2**24


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


def free_cores() -> int:
    """Cores this process may use that no other runnable process is using now (at least 1).

    The usable cores are the affinity mask (``os.sched_getaffinity``: a container or
    ``taskset`` limit, not the machine's count).  Busy ones are the other runnable processes:
    ``procs_running`` of ``/proc/stat`` (instantaneous, this process included) on Linux, else
    the one-minute load average.
    """
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS, Windows
        usable = os.cpu_count() or 1
    busy = None
    try:
        with open("/proc/stat") as fh:
            for line in fh:
                if line.startswith("procs_running"):
                    busy = int(line.split()[1]) - 1  # minus this process
                    break
    except OSError:
        pass
    if busy is None:
        try:
            busy = int(round(os.getloadavg()[0]))
        except (AttributeError, OSError):
            busy = 0
    return max(1, usable - max(0, busy))


def _user_threads() -> int | None:
    """The thread count the user asked for, or None when they did not ask.

    ``CROWDLEARN_NUM_THREADS`` (crowdlearn's own setting), ``OMP_NUM_THREADS`` /
    ``MKL_NUM_THREADS`` (read by torch at import), or a ``torch.set_num_threads`` call after
    crowdlearn imported torch.
    """
    own = os.environ.get("CROWDLEARN_NUM_THREADS", "").strip()
    if own:
        try:
            return max(1, int(own))
        except ValueError:
            raise ValueError(f"CROWDLEARN_NUM_THREADS must be a positive integer, got {own!r}") from None
    if any(os.environ.get(v, "").strip() for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")):
        return torch.get_num_threads()
    now = torch.get_num_threads()
    return now if now != _IMPORT_THREADS else None


def choose_threads(n_params: int, batch_size: int, cores: int | None = None) -> int:
    """Threads for training a network of ``n_params`` weights on batches of ``batch_size`` rows.

    ``min(free cores, ceil(n_params * batch_size / WORK_PER_THREAD))``, at least 1.  The crowd
    datasets' networks are small (10^4-10^5 weights): a step is a few hundred microseconds, so
    intra-op threads mostly synchronise, and a thread on a core another job holds stalls every
    step (torch's threads wait for one another at each operation).  ``cores`` defaults to
    :func:`free_cores`.
    """
    cores = free_cores() if cores is None else max(1, int(cores))
    work = max(1, int(n_params)) * max(1, int(batch_size))
    return int(max(1, min(cores, math.ceil(work / WORK_PER_THREAD))))


@contextlib.contextmanager
def fit_threads(net, batch_size: int):
    """Run the block with torch's thread count chosen for ``net`` (a module or a weight count)
    and the free cores, unless the user chose one (:func:`_user_threads`); restores the count
    afterwards.  Yields the count used."""
    chosen = _user_threads()
    if chosen is not None and not os.environ.get("CROWDLEARN_NUM_THREADS", "").strip():
        yield chosen  # already in effect (torch read the variable, or the user set it)
        return
    if chosen is None:
        n_params = net if isinstance(net, int) else sum(p.numel() for p in net.parameters())
        chosen = choose_threads(n_params, batch_size)
    before = torch.get_num_threads()
    torch.set_num_threads(chosen)
    try:
        yield chosen
    finally:
        torch.set_num_threads(before)
