"""MMLC-owf: truth inference by oracle worker finding (Han et al., AAAI 2025, arXiv:2407.13268).

After fitting :class:`~crowdlearn.mmlc.model.MMLC`, every worker w has a projection vector
g(w) in the worker spectral space.  The oracle worker's vector o is estimated as the centre of
those points (:func:`~crowdlearn.mmlc.oracle_estimators.estimate_oracle`), and every task is
labelled with the model's answer for that virtual worker::

    P(y_i = k) = softmax(T(sum_e o_e f_e(x_i)))_k

No confusion matrices are estimated (``confusions_`` is not set); the worker model is the
network itself.  ``gold`` given to ``fit`` clamps its tasks' outputs but does not train the
network (MMLC learns only from the crowd answers).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from sklearn.base import clone

from ..aggregation.base import BaseAggregator
from ..core.base import Tags, check_fitted
from ..core.data import CrowdLabels
from .oracle_estimators import ESTIMATORS, estimate_oracle

__all__ = ["MMLCOracle", "require_features", "make_mmlc_model"]


def require_features(data: CrowdLabels, who: str) -> None:
    """Raise a ValueError naming ``who`` when ``data`` carries no item features."""
    if data.features is None:
        raise ValueError(
            f"{who} needs item features: load the dataset with features "
            "(e.g. io.load_folder(path, with_features=True) or labels.with_features(X))"
        )


def make_mmlc_model(model, random_state):
    """A fresh :class:`~crowdlearn.mmlc.model.MMLC` from None, a dict of its arguments or an MMLC."""
    from .model import MMLC

    if model is None:
        est = MMLC()
    elif isinstance(model, dict):
        est = MMLC(**model)
    elif isinstance(model, MMLC):
        est = clone(model)
    else:
        raise ValueError(f"model must be None, a dict of MMLC arguments or an MMLC, got {type(model).__name__}")
    if random_state is not None:
        est.set_params(random_state=random_state)
    return est


class MMLCOracle(BaseAggregator):
    """MMLC-owf: label every task with the MMLC prediction of the estimated oracle worker.

    Parameters
    ----------
    estimator : str
        How the oracle vector is found from the workers' vectors: ``"kde"`` (per-coordinate
        1-D KDE mode, as the original code), ``"kde-multivariate"``, ``"mean"``, ``"median"``
        or a ``"weighted-"`` variant (workers weighted by their number of labels).
    bandwidth : "scott", "silverman" or float
        Kernel bandwidth rule for the KDE estimators (default Scott; not tuned on truth).
    normalize : bool or "auto"
        Rescale the oracle to sum to 1 (the original code does).  ``"auto"``: only for the
        softmax gate, whose vectors live on the simplex; coordinate-wise modes do not, so
        they are pulled back onto it.  ReLU-gate vectors are not on the simplex and are used
        as estimated.
    model : MMLC or dict, optional
        The network configuration: an MMLC (cloned) or a dict of MMLC keyword arguments
        (a dict keeps ``get_params`` comparable across clones).  Default ``MMLC()`` with
        data-driven sizes.
    random_state : int
        Seed of the network (overrides ``model.random_state``).

    Attributes
    ----------
    oracle_ : ndarray (E,)
    model_ : fitted MMLC
    worker_projections_ : DataFrame workers x E
    """

    def __crowd_tags__(self) -> Tags:
        # SGD on shuffled triples: renaming ids changes the optimisation path
        return dataclasses.replace(super().__crowd_tags__(), requires_features=True, stochastic=True)

    def __init__(self, estimator="kde", bandwidth="scott", normalize="auto", model=None, random_state=0):
        self.estimator = estimator
        self.bandwidth = bandwidth
        self.normalize = normalize
        self.model = model
        self.random_state = random_state

    def _check_data(self, data: CrowdLabels) -> None:
        super()._check_data(data)
        require_features(data, "mmlc-owf")
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}; got {self.estimator!r}")

    def _fit(self, data, gold, init):
        self.model_ = make_mmlc_model(self.model, self.random_state).fit(data)
        self.worker_projections_ = self.model_.worker_projections_
        self.oracle_ = self.find_oracle(self.estimator, self.bandwidth)
        return self.model_.predict_proba(data.features, self.oracle_)

    def find_oracle(self, estimator: str | None = None, bandwidth=None) -> np.ndarray:
        """The oracle vector under another estimator/bandwidth without refitting the network."""
        check_fitted(self, "model_")
        estimator = self.estimator if estimator is None else estimator
        bandwidth = self.bandwidth if bandwidth is None else bandwidth
        V = self.model_.worker_projections_.to_numpy()
        o = estimate_oracle(V, estimator, weights=self.model_.labels_per_worker_, bandwidth=bandwidth)
        norm = self.normalize if self.normalize != "auto" else (self.model_.gate == "softmax")
        if norm and o.sum() > 0:
            o = o / o.sum()
        return o

    def predict_oracle(self, X, estimator: str | None = None, bandwidth=None) -> np.ndarray:
        """Class probabilities of the oracle (optionally under another estimator) for features X."""
        return self.model_.predict_proba(X, self.find_oracle(estimator, bandwidth))
