"""The early-stopping rule of every trained network: keep the best held-out weights, stop on patience.

After each epoch the trainer reports the held-out criterion (a crowd-label loss, never truth).
An epoch *improves* when its criterion is below the best so far by more than ``min_delta``; the
weights of that epoch are copied.  Training stops once ``patience`` epochs in a row have not
improved (``patience=None`` never stops: the full budget is run and the best weights are still
the ones kept).  At the end :meth:`EarlyStopping.restore` loads the best weights back.

Without a held-out set (criterion ``None`` at every epoch) nothing is copied or restored and
the last epoch counts as the chosen one, so a trainer can use the same object in both cases.
"""

from __future__ import annotations

import copy
import math

__all__ = ["EarlyStopping"]


class EarlyStopping:
    """Track the held-out criterion of one training run and keep the best weights.

    Parameters
    ----------
    patience : int or None
        Epochs without improvement after which :meth:`step` asks to stop; ``None`` = never.
    min_delta : float
        Smallest decrease of the criterion that counts as an improvement (guards against
        restarting the patience count on float noise).

    Attributes
    ----------
    best : float
        Smallest criterion seen (``inf`` before the first held-out epoch).
    best_epoch : int
        Epoch of ``best``; without a held-out criterion, the last epoch stepped.
    wait : int
        Epochs since the last improvement.
    """

    def __init__(self, patience: int | None = None, min_delta: float = 1e-6):
        self.patience = patience
        self.min_delta = min_delta
        self.best = math.inf
        self.best_epoch = 0
        self.wait = 0
        self._best_state = None

    def step(self, epoch: int, criterion: float | None, modules) -> bool:
        """Record epoch ``epoch`` with held-out ``criterion``; True when training should stop.

        ``modules`` are the torch modules whose ``state_dict`` is copied on an improvement.
        ``criterion=None`` means "no held-out set": the epoch is simply the latest one.  A
        ``nan`` criterion never improves.
        """
        if criterion is None:
            self.best_epoch = epoch
            return False
        if criterion < self.best - self.min_delta:
            self.best, self.best_epoch, self.wait = criterion, epoch, 0
            self._best_state = [copy.deepcopy(m.state_dict()) for m in modules]
            return False
        self.wait += 1
        return self.patience is not None and self.wait >= self.patience

    def restore(self, modules) -> None:
        """Load the best weights into ``modules`` (the same list, in the same order, as in :meth:`step`)."""
        if self._best_state is not None:
            for m, s in zip(modules, self._best_state):
                m.load_state_dict(s)
