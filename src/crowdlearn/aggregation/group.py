"""Dawid-Skene for dependent workers: :class:`GroupAwareDawidSkene`.

Dawid-Skene assumes workers err independently given the true label.  Colluders (Sybil
accounts, workers sharing answers, annotators trained on one guideline) violate this: a
group of five copying one another counts five times in DS and can outvote everyone.  The
tutorial "Learning from crowdsourced noisy labels: a signal processing perspective"
(Ibrahim, Traganitis, Fu, Giannakis; section on dependent annotators) models each group
``g`` with a hidden *group label* per task.

Model
-----
For task ``j`` with true class ``y_j ~ pi`` and worker group ``g``::

    z_jg | y_j = c   ~  Gamma_g[c, :]              (group confusion,  K x K)
    a_jw | z_jg = b  ~  Pi_w[b, :]   for w in g    (member fidelity,  K x K)

so ``p(a_{j,g} | y_j = c) = sum_b Gamma_g[c, b] prod_{w in g} Pi_w[b, a_jw]``.  A group of one
worker has ``Pi_w = I`` fixed (its group label *is* its answer) and ``Gamma_g`` is its DS
confusion: with every worker alone the model is exactly Dawid-Skene.  EM:

* E-step: ``L_jg[b] = sum_{w in g on j} log Pi_w[b, a_jw]``,
  ``m_jg[c] = logsumexp_b(log Gamma_g[c, b] + L_jg[b])``,
  ``log q_j(c) = log pi_c + sum_g m_jg[c] + const``; the joint
  ``q_jg(c, b) = q_j(c) exp(log Gamma_g[c, b] + L_jg[b] - m_jg[c])``;
* M-step: ``Gamma_g[c, b] ∝ sum_j q_jg(c, b) + alpha``,
  ``Pi_w[b, a] ∝ sum_{j: a_jw = a} sum_c q_jg(c, b) + alpha + diag_alpha [a = b]`` (the
  diagonal pseudo-count ties each hidden group label to the answer its members give most),
  ``pi ∝ sum_j q_j + prior_alpha``.

Groups
------
Given (``groups``: mapping worker -> group id) or estimated from second-order statistics:
with the rank-(K-1) model of the centred cross-covariances of
:func:`crowdlearn.diagnostics.detection.second_order_model`, the *excess agreement* of a pair,
``e_ml = trace(R_ml - U_m U_l^T)``, is about zero for conditionally independent workers
and large for workers who copy one another (the model is refitted twice without the
most excessive pairs, so that a clique cannot bend it).  Pairs whose excess, divided by
its sampling standard deviation over the shared tasks
(:func:`crowdlearn.diagnostics.detection.pair_excess_z`), exceeds the Bonferroni critical
value over all pairs (or ``z_threshold``) are linked; groups are the connected components.

Orientation: ``group_confusions_[g, true, group label]``, ``fidelity_[w, group label,
answered]`` and the effective ``confusions_[w, true, answered] = Gamma_g Pi_w``; rows sum to 1.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ..core.base import Tags
from ..core.data import CrowdLabels
from ..core.stats import clamp_to_gold, expected_skills, logsumexp, vote_fractions
from .base import BaseAggregator

__all__ = ["GroupAwareDawidSkene", "estimate_worker_groups"]

_TINY = 1e-300


def estimate_worker_groups(labels: Any, z_threshold: float | None = None, min_shared: int = 10,
                           alpha: float = 0.01) -> pd.Series:
    """Groups of workers who agree more than conditional independence allows.

    ``z_threshold``: link threshold on a pair's standardised excess agreement; default the
    Bonferroni critical value at level ``alpha`` over the pairs tested.  Returns a Series
    worker -> group code (0..G-1); see the module docstring.
    """
    from ..core.data import as_crowd_labels
    from ..diagnostics.detection import MAX_CLASSES, pair_critical_z, pair_excess_z, second_order_model

    data = as_crowd_labels(labels)
    if data.n_classes > MAX_CLASSES:  # pair blocks would not fit in memory: everyone alone
        return pd.Series(np.arange(data.n_workers), index=data.workers, name="group")
    model = second_order_model(data, min_shared=min_shared, robust_passes=2)
    n_w = data.n_workers
    link_m = np.empty(0, np.int64)
    link_l = np.empty(0, np.int64)
    if len(model.pair_m):
        z = pair_excess_z(model)
        hit = z > (pair_critical_z(model, alpha) if z_threshold is None else z_threshold)
        link_m = model.workers[model.pair_m[hit]]
        link_l = model.workers[model.pair_l[hit]]
    graph = sp.coo_matrix((np.ones(len(link_m)), (link_m, link_l)), shape=(n_w, n_w))
    _, comp = connected_components(graph, directed=False)
    # renumber groups in order of their first worker, so the result does not depend on scipy
    _, first = np.unique(comp, return_index=True)
    order = np.argsort(first)
    remap = np.empty_like(order)
    remap[order] = np.arange(len(order))
    return pd.Series(remap[comp], index=data.workers, name="group")


def _rows_or_uniform(counts: np.ndarray) -> np.ndarray:
    """Rows (last axis) normalised to sum 1; a row without mass is uniform.

    Without pseudo-counts (``alpha = diag_alpha = 0``) a (group, true class) row that no
    posterior mass reaches is 0/0; it carries no information, so it is uniform, as in
    Dawid-Skene's M-step.
    """
    tot = counts.sum(axis=-1, keepdims=True)
    return np.where(tot > 0, counts / np.where(tot > 0, tot, 1.0), 1.0 / counts.shape[-1])


class GroupAwareDawidSkene(BaseAggregator):
    """Dawid-Skene with groups of dependent workers sharing a hidden group label.

    Parameters
    ----------
    groups : mapping or Series worker -> group id, optional
        Known groups; by default estimated with :func:`estimate_worker_groups`.
    z_threshold : float, optional
        Link threshold of the group estimation (standardised excess agreement of a pair);
        default the Bonferroni critical value at level 0.01 over the pairs tested.
    max_iter, tol : EM stopping rule (``tol`` on the log-likelihood change per answer).
    alpha, diag_alpha, prior_alpha : float
        Dirichlet pseudo-counts: every cell and the diagonal of the group confusions and of the
        member fidelities, and the class prior. The defaults are :class:`DawidSkene`'s, so
        that with every worker alone in its group the model *is* Dawid-Skene.
    random_state : int
        Tie-breaking seed.

    Attributes
    ----------
    groups_ : Series worker -> group code
    group_confusions_ : ndarray (G, K, K) ``[group, true, group label]``
    fidelity_ : ndarray (W, K, K) ``[worker, group label, answered]`` (identity for lone workers)
    confusions_ : ndarray (W, K, K) ``[worker, true, answered]`` effective confusion
    priors_ : Series, skills_ : Series
    """

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), accepts_init=True, has_worker_model=True)

    def __init__(
        self,
        groups: Mapping[Any, Any] | pd.Series | None = None,
        z_threshold: float | None = None,
        max_iter: int = 100,
        tol: float = 1e-7,
        alpha: float = 0.0,
        diag_alpha: float = 4.0,
        prior_alpha: float = 1.0,
        random_state: int | None = 0,
    ) -> None:
        self.groups = groups
        self.z_threshold = z_threshold
        self.max_iter = max_iter
        self.tol = tol
        self.alpha = alpha
        self.diag_alpha = diag_alpha
        self.prior_alpha = prior_alpha
        self.random_state = random_state

    def _group_codes(self, data: CrowdLabels) -> np.ndarray:
        if self.groups is None:
            return estimate_worker_groups(data, self.z_threshold).to_numpy()
        given = pd.Series(self.groups) if not isinstance(self.groups, pd.Series) else self.groups
        ids = given.reindex(data.workers)
        missing = ids.isna().to_numpy()
        if missing.any():
            raise ValueError(
                f"groups: no group given for {int(missing.sum())} worker(s), "
                f"e.g. {data.workers[np.flatnonzero(missing)[0]]!r}"
            )
        codes, _ = pd.factorize(ids, sort=False)
        return codes

    def _fit(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None):
        if self.max_iter < 1:
            raise ValueError(f"max_iter must be >= 1, got {self.max_iter}")
        k, n_w = data.n_classes, data.n_workers
        gcode = self._group_codes(data)
        n_g = int(gcode.max()) + 1
        alone = np.bincount(gcode, minlength=n_g)[gcode] == 1  # per worker
        lay = _Layout(data, gcode, n_g, alone)
        n_u = lay.n_units
        need = 8.0 * (n_u + n_w) * k * k
        if need > 1e9:
            raise ValueError(
                f"GroupAwareDawidSkene would need {n_u} (task, group) units x {k}^2 cells "
                f"({need / 1e9:.1f} GB); with {k} classes use 'mv', 'wawa' or 'zbs'"
            )
        # sparse sums for the M-step (np.add.at is ~10x slower at 10^6 answers)
        to_group = sp.csr_matrix((np.ones(n_u), (lay.u_group, np.arange(n_u))), shape=(n_g, n_u))
        grouped = ~lay.solo
        n_grouped = int(grouped.sum())
        to_cell = sp.csr_matrix(  # grouped answer -> (worker, answered) row
            (np.ones(n_grouped), (data.worker[grouped].astype(np.int64) * k + data.label[grouped],
                                  np.arange(n_grouped))),
            shape=(n_w * k, n_grouped),
        )
        solo_cell = sp.csr_matrix(  # lone answer -> (its group, answered) row
            (np.ones(len(lay.s_task)), (lay.s_group * k + lay.s_label, np.arange(len(lay.s_task)))),
            shape=(n_g * k, len(lay.s_task)),
        )

        if init is not None:
            post = init.copy()
        else:
            post = vote_fractions(data)  # DawidSkene's start
        clamp_to_gold(post, gold)
        known = None if gold is None else gold >= 0
        # initial hidden group labels: the group's own vote share on the task
        group_votes = np.zeros((n_u, k))
        np.add.at(group_votes, (lay.unit, data.label[grouped]), 1.0)
        zq = group_votes / group_votes.sum(axis=1, keepdims=True)
        joint = post[lay.u_task][:, :, None] * zq[:, None, :]  # q_jg(c, b)

        eye = np.eye(k)
        previous = -np.inf
        self.converged_ = False
        for _ in range(self.max_iter):
            # ---- M-step
            gam = np.full((n_g, k, k), self.alpha) + self.diag_alpha * eye  # as DawidSkene's
            gam += (to_group @ joint.reshape(n_u, k * k)).reshape(n_g, k, k)
            # a lone answer's group label is the answer itself: q(c, b) = q_j(c) [b = a]
            gam += (solo_cell @ post[lay.s_task]).reshape(n_g, k, k).transpose(0, 2, 1)
            gam = _rows_or_uniform(gam)
            zmarg = joint.sum(axis=1)  # (U, K) over b
            fid = np.full((n_w, k, k), self.alpha) + self.diag_alpha * eye
            # fid[w, b, a] += zmarg[unit of the answer, b] for every grouped answer (w, a)
            fid += (to_cell @ zmarg[lay.unit]).reshape(n_w, k, k).transpose(0, 2, 1)
            fid = _rows_or_uniform(fid)
            fid[alone] = eye
            prior = post.sum(axis=0) + self.prior_alpha
            prior /= prior.sum()
            # ---- E-step
            logp, ratio = _log_posterior(data, gam, fid, prior, lay)
            if gold is not None:
                logp[known] = np.where(eye[gold[known]] > 0, 0.0, -np.inf)
            norm = logsumexp(logp, axis=1, keepdims=True)
            post = np.exp(logp - norm)
            ll = float(norm.sum())
            joint = post[lay.u_task][:, :, None] * ratio
            if self._record_iteration(ll, previous, data.n_labels):
                break
            previous = ll

        self.groups_ = pd.Series(gcode, index=data.workers, name="group")
        self.group_confusions_ = gam
        self.fidelity_ = fid
        conf = np.einsum("wcb,wba->wca", gam[gcode], fid)
        self.confusions_ = conf
        self.priors_ = pd.Series(prior, index=data.classes, name="prior")
        self.skills_ = pd.Series(expected_skills(conf, prior), index=data.workers, name="skill")
        return post

    def _predict_proba_codes(self, data: CrowdLabels) -> np.ndarray:
        """The E-step of the fitted model on ``data`` (workers coded as in the fit).

        The same computation as the fit's last E-step, so on the training answers it returns
        ``probas_`` of a fit without gold.
        """
        gcode = self.groups_.to_numpy()
        n_g = self.group_confusions_.shape[0]
        alone = np.bincount(gcode, minlength=n_g)[gcode] == 1
        logp, _ = _log_posterior(data, self.group_confusions_, self.fidelity_,
                                 self.priors_.to_numpy(), _Layout(data, gcode, n_g, alone))
        return np.exp(logp - logsumexp(logp, axis=1, keepdims=True))


class _Layout:
    """Where each answer enters the E-step.

    An answer of a worker alone in its group is its own unit whose group label is the answer
    itself (identity fidelity), so its message is the column ``log Gamma_g[:, a]``: it is
    kept per answer (``s_task``, ``s_group``, ``s_label``), ``O(K)`` each, as in Dawid-Skene
    (a worker who answers a task twice gives two reads).  The answers of workers in groups of
    two or more form the (task, group) units (``unit`` per grouped answer, ``u_task``,
    ``u_group``), the only ones with a ``K x K`` joint ``q(c, b)``, so memory is
    ``O(answers K + grouped units K^2)``.
    """

    def __init__(self, data: CrowdLabels, gcode: np.ndarray, n_g: int, alone: np.ndarray) -> None:
        self.solo = alone[data.worker]
        grouped = np.flatnonzero(~self.solo)
        key = data.task[grouped].astype(np.int64) * n_g + gcode[data.worker[grouped]]
        _, first, unit = np.unique(key, return_index=True, return_inverse=True)
        self.unit = unit.reshape(-1)
        self.u_task = data.task[grouped[first]].astype(np.int64)
        self.u_group = gcode[data.worker[grouped[first]]]
        self.n_units = len(self.u_task)
        self.grouped = grouped
        lone = np.flatnonzero(self.solo)
        self.s_task = data.task[lone].astype(np.int64)
        self.s_group = gcode[data.worker[lone]].astype(np.int64)
        self.s_label = data.label[lone].astype(np.int64)
        n = data.n_tasks
        self.gather = sp.csr_matrix(  # grouped answer -> unit
            (np.ones(len(grouped)), (self.unit, np.arange(len(grouped)))), shape=(self.n_units, len(grouped)))
        self.to_task = sp.csr_matrix(  # unit -> task
            (np.ones(self.n_units), (self.u_task, np.arange(self.n_units))), shape=(n, self.n_units))
        self.solo_to_task = sp.csr_matrix(  # lone answer -> task
            (np.ones(len(lone)), (self.s_task, np.arange(len(lone)))), shape=(n, len(lone)))


def _log_posterior(data, gam, fid, prior, lay: _Layout):
    """Unnormalised ``log q_j(c)`` (N, K) and, per grouped unit, ``q(b | c)`` (U, K, K)."""
    log_gam = np.log(np.maximum(gam, _TINY))
    logp = np.log(prior)[None, :] + lay.solo_to_task @ log_gam[lay.s_group, :, lay.s_label]
    k = gam.shape[1]
    if lay.n_units == 0:
        return logp, np.empty((0, k, k))
    # Floored, not -inf: a member may answer one task twice with different labels; with the
    # floor neither answer makes every group label impossible (NaN).
    log_fid = np.log(np.maximum(fid, _TINY))
    w, a = data.worker[lay.grouped], data.label[lay.grouped]
    lz = lay.gather @ log_fid[w, :, a]  # (U, K over b)
    terms = log_gam[lay.u_group] + lz[:, None, :]  # (U, c, b), finite (floored logs)
    # log-sum-exp over b by hand: the shifted exponentials are reused for the joint
    # (scipy's logsumexp and a second exp cost 2x at 10^6 answers)
    top = terms.max(axis=2, keepdims=True)
    ratio = np.exp(terms - top, out=terms)
    total = ratio.sum(axis=2, keepdims=True)
    ratio /= total  # = exp(terms - msg): q(b | c) within the unit
    msg = (top + np.log(total))[:, :, 0]  # (U, c)
    return logp + lay.to_task @ msg, ratio
