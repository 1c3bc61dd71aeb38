"""Synthetic pairwise comparisons with planted item scores and planted worker parameters.

Generative model (one comparison): a random pair of distinct items is shown, in random order,
to a worker drawn from the crowd; with ``d = s_left - s_right + bias_w``

    true outcome ~ P(left) = F(d - tau), P(right) = F(-d - tau), tie otherwise

(``F`` logistic, or probit for Thurstone data; ``bias_w`` the worker's position bias, > 0
favouring the left item), and the worker reports that outcome with probability ``eta_w`` and
its reverse (a win for the other item; a tie stays a tie) otherwise -- the annotator model of
Crowd-BT (Chen et al. 2013).  A reliable worker has ``eta`` near 1, an unreliable one below
0.5 (a reverser).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core.base import resolve_generator
from ..pairwise.data import Comparisons
from ..pairwise.links import outcome_probs

__all__ = ["PairwisePlanted", "pairwise_crowd", "PreferencePlanted", "preference_crowd"]


@dataclass(frozen=True)
class PairwisePlanted:
    """The planted parameters of a :func:`pairwise_crowd`.

    scores : Series item -> planted score (also the table's ``truth``).
    eta : Series worker -> probability of reporting the true outcome.
    position_bias : Series worker -> shift of ``d`` towards the left item.
    reliable : Series worker -> bool.
    tau : float, the tie threshold.
    """

    scores: pd.Series
    eta: pd.Series
    position_bias: pd.Series
    reliable: pd.Series
    tau: float


def pairwise_crowd(n_items: int = 200, n_workers: int = 50, n_comparisons: int = 5000, *,
                   frac_unreliable: float = 0.0, eta_reliable=(0.85, 1.0),
                   eta_unreliable=(0.05, 0.35), score_scale: float = 1.5, tau: float = 0.0,
                   bias_scale: float = 0.0, link: str = "logistic", n_uncompared: int = 0,
                   seed=0) -> tuple[Comparisons, PairwisePlanted]:
    """Draw a crowd of comparisons; returns ``(Comparisons with truth, PairwisePlanted)``.

    Parameters
    ----------
    n_items, n_workers, n_comparisons : int
    frac_unreliable : float
        Share of workers (rounded) whose ``eta`` is drawn from ``eta_unreliable``.
    eta_reliable, eta_unreliable : (low, high)
        Uniform ranges of ``eta``.
    score_scale : float
        Planted scores are ``N(0, score_scale^2)``.
    tau : float
        Tie threshold (0: no ties).
    bias_scale : float
        Position biases are ``N(0, bias_scale^2)``.
    link : {"logistic", "probit"}
    n_uncompared : int
        Extra items listed in the table (with planted scores) but never compared.
    seed : int, default 0
    """
    if n_items < 2 or n_workers < 1 or n_comparisons < 0:
        raise ValueError(f"need n_items >= 2 (a comparison has two), n_workers >= 1 and "
                         f"n_comparisons >= 0; got {n_items}, {n_workers}, {n_comparisons}")
    rng = resolve_generator(seed)
    scores = rng.normal(0.0, score_scale, n_items + n_uncompared)
    n_bad = int(round(frac_unreliable * n_workers))
    reliable = np.ones(n_workers, dtype=bool)
    reliable[rng.permutation(n_workers)[:n_bad]] = False
    eta = np.where(reliable, rng.uniform(*eta_reliable, n_workers),
                   rng.uniform(*eta_unreliable, n_workers))
    bias = rng.normal(0.0, bias_scale, n_workers) if bias_scale > 0 else np.zeros(n_workers)

    left = rng.integers(0, n_items, n_comparisons)
    right = (left + rng.integers(1, n_items, n_comparisons)) % n_items  # never equal to left
    worker = rng.integers(0, n_workers, n_comparisons)
    p, _, _ = outcome_probs(scores[left] - scores[right] + bias[worker], tau, link)
    u = rng.random(n_comparisons)
    true = np.where(u < p[:, 0], 0, np.where(u < p[:, 0] + p[:, 1], 1, 2))
    flip = (rng.random(n_comparisons) >= eta[worker]) & (true != 2)
    outcome = np.where(flip, 1 - true, true).astype(np.int8)

    item_ids = pd.Index([f"i{k}" for k in range(n_items + n_uncompared)], name="item")
    worker_ids = pd.Index([f"w{k}" for k in range(n_workers)], name="worker")
    data = Comparisons(worker, left, right, outcome, worker_ids, item_ids, truth=scores)
    planted = PairwisePlanted(
        scores=pd.Series(scores, index=item_ids, name="score"),
        eta=pd.Series(eta, index=worker_ids, name="eta"),
        position_bias=pd.Series(bias, index=worker_ids, name="position_bias"),
        reliable=pd.Series(reliable, index=worker_ids, name="reliable"),
        tau=float(tau))
    return data, planted


@dataclass(frozen=True)
class PreferencePlanted:
    """The planted parameters of a :func:`preference_crowd`.

    quality : Series (prompt, response) -> planted quality score.
    better : Series pair -> 0 if ``response_1`` is truly better, 1 if ``response_2``.
    eta : Series worker -> probability of reporting the true outcome.
    """

    quality: pd.Series
    better: pd.Series
    eta: pd.Series


def preference_crowd(n_prompts: int = 50, responses_per_prompt: int = 4, n_workers: int = 20,
                     annotations_per_pair: int = 3, *, frac_unreliable: float = 0.3,
                     eta_reliable=(0.85, 1.0), eta_unreliable=(0.05, 0.35),
                     score_scale: float = 1.5, tau: float = 0.2, seed=0):
    """Preference annotations on every pair of responses of every prompt.

    Each response has a planted quality ``N(0, score_scale^2)``; each pair is judged by
    ``annotations_per_pair`` distinct annotators, who report the Bradley-Terry/Rao-Kupper
    outcome with probability ``eta_w`` and its reverse otherwise (as :func:`pairwise_crowd`).
    Returns ``(Preferences, PreferencePlanted)``; the pairs keep the order of the rows.
    """
    from ..pairwise.preferences import Preferences

    rng = resolve_generator(seed)
    n_bad = int(round(frac_unreliable * n_workers))
    reliable = np.ones(n_workers, dtype=bool)
    reliable[rng.permutation(n_workers)[:n_bad]] = False
    eta = np.where(reliable, rng.uniform(*eta_reliable, n_workers),
                   rng.uniform(*eta_unreliable, n_workers))
    rows, quality, better = [], {}, []
    for pr in range(n_prompts):
        q = rng.normal(0.0, score_scale, responses_per_prompt)
        names = [f"response {pr}.{k}" for k in range(responses_per_prompt)]
        quality.update({(f"prompt {pr}", n): v for n, v in zip(names, q)})
        for i in range(responses_per_prompt):
            for j in range(i + 1, responses_per_prompt):
                better.append(0 if q[i] >= q[j] else 1)
                p, _, _ = outcome_probs(np.array([q[i] - q[j]]), tau)
                for w in rng.choice(n_workers, annotations_per_pair, replace=False):
                    true = rng.choice(3, p=p[0] / p[0].sum())
                    said = 1 - true if (true < 2 and rng.random() >= eta[w]) else true
                    rows.append((f"prompt {pr}", names[i], names[j], f"w{w}", "ab="[said]))
    frame = pd.DataFrame(rows, columns=["prompt", "response_a", "response_b", "worker", "label"])
    prefs = Preferences.from_frame(frame)
    planted = PreferencePlanted(
        quality=pd.Series(quality, name="quality"),
        better=pd.Series(better, name="better"),
        eta=pd.Series(eta, index=pd.Index([f"w{k}" for k in range(n_workers)], name="worker"),
                      name="eta"))
    return prefs, planted
