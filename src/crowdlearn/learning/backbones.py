"""Backbones ``f(x) -> K logits`` for the end-to-end learners.

Every learner trains a backbone that maps a feature vector to K class *logits* (no softmax:
the methods apply their own normalisation).  ``make_backbone`` accepts ``None`` (the default
:class:`MLP` sized from the data), the strings ``"mlp"`` / ``"linear"``, or any
``torch.nn.Module`` (deep-copied so that ``fit`` never mutates the estimator's parameter).
"""

from __future__ import annotations

import copy

import numpy as np

from .torch_utils import torch

nn = torch.nn

__all__ = ["MLP", "make_backbone", "default_hidden"]


def default_hidden(in_features: int, n_classes: int) -> int:
    """Hidden width of the default MLP: ``clip(4 * sqrt(in_features * n_classes), 32, 256)``.

    The geometric mean of the input and output widths (times 4) grows with both sides but stays
    small for the few-hundred-feature crowd datasets (music 124 x 10 -> 140, labelme 200 x 8 ->
    160), close to the 128 units of the Crowd Layer / CCEM reference networks.
    """
    return int(np.clip(round(4 * np.sqrt(in_features * n_classes)), 32, 256))


class MLP(nn.Module):
    """``Linear(d, h) -> ReLU -> Dropout(p) -> Linear(h, K)``, returning logits.

    Parameters
    ----------
    in_features, n_classes : int
    hidden : int or None
        Hidden width; ``None`` uses :func:`default_hidden`.  ``0`` gives a linear model
        (multinomial logistic regression).
    dropout : float
        Dropout rate after the hidden layer (0.5 as in the Crowd Layer and CCEM networks).
    """

    def __init__(self, in_features: int, n_classes: int, hidden: int | None = None, dropout: float = 0.5):
        super().__init__()
        if hidden is None:
            hidden = default_hidden(in_features, n_classes)
        hidden = int(hidden)
        if hidden < 0:
            raise ValueError(f"hidden must be >= 0 or None, got {hidden}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.hidden = hidden
        if hidden == 0:
            self.net = nn.Linear(in_features, n_classes)
        else:
            self.net = nn.Sequential(
                nn.Linear(in_features, hidden), nn.ReLU(), nn.Dropout(float(dropout)),
                nn.Linear(hidden, n_classes),
            )

    def forward(self, x):
        return self.net(x)


def make_backbone(backbone, in_features: int, n_classes: int, hidden: int | None = None,
                  dropout: float = 0.5) -> "nn.Module":
    """Resolve the ``backbone`` parameter of an estimator into a fresh ``nn.Module``.

    ``None`` / ``"mlp"``: :class:`MLP`; ``"linear"``: ``nn.Linear``; a module: a deep copy (so a
    refit starts from the user's initial weights and ``sklearn.clone`` stays valid).
    """
    if isinstance(backbone, nn.Module):
        return copy.deepcopy(backbone)
    if backbone is None or backbone == "mlp":
        return MLP(in_features, n_classes, hidden=hidden, dropout=dropout)
    if backbone == "linear":
        return nn.Linear(in_features, n_classes)
    raise ValueError(f"backbone must be None, 'mlp', 'linear' or a torch.nn.Module, got {backbone!r}")
