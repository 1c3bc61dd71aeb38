"""Conformance data and checks of the pairwise kind (read by :mod:`crowdlearn.testing.kinds`)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone

from ..diagnostics.pairwise_metrics import spearman
from ..pairwise.data import Comparisons
from ..simulate.pairwise import pairwise_crowd
from .checks import describe
from .kinds import KindSpec

__all__ = ["SPEC", "toy", "check_renaming_invariance", "check_left_right_swap",
           "check_uncompared_item", "check_disconnected_graph"]

#: scores of two fits that should agree up to the optimisers' stopping rules
SCORE_ATOL = 2e-3


def toy(seed: int) -> Comparisons:
    """30 items, 8 workers, 400 comparisons with ties and one reversing worker."""
    data, _ = pairwise_crowd(30, 8, 400, frac_unreliable=0.125, tau=0.3, seed=seed)
    return data


def _quality(est: Any, data: Comparisons) -> float:
    return spearman(est.scores_, data.truth_series())


def _rebuild(frame: pd.DataFrame, **kw) -> Comparisons:
    return Comparisons.from_frame(frame, **kw)


def _fit_scores(est: Any, data: Comparisons) -> pd.Series:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return clone(est).fit(data).scores_


def check_renaming_invariance(est: Any) -> None:
    """Renaming items and workers and shuffling the rows changes no item's score."""
    who = describe(est)
    data = toy(0)
    base = _fit_scores(est, data)
    frame = data.to_frame()
    rename = {item: f"z{len(data.items) - k:03d}" for k, item in enumerate(data.items)}
    for col in ("left", "right", "label"):
        frame[col] = frame[col].map(lambda v: rename.get(v, v))
    frame["worker"] = "u_" + frame["worker"].astype(str)
    frame = frame.sample(frac=1.0, random_state=3).reset_index(drop=True)
    got = _fit_scores(est, _rebuild(frame))
    back = got.rename(index={new: old for old, new in rename.items()}).loc[base.index]
    err = float(np.max(np.abs(back.to_numpy() - base.to_numpy())))
    assert err < SCORE_ATOL, f"{who}: renaming and reordering changed scores by up to {err:.2e}"


def check_left_right_swap(est: Any) -> None:
    """Showing every pair the other way round (left and right swapped, winners unchanged)
    leaves the scores unchanged: no item is favoured by the side it was shown on."""
    who = describe(est)
    data = toy(0)
    base = _fit_scores(est, data)
    frame = data.to_frame()
    frame[["left", "right"]] = frame[["right", "left"]].to_numpy()
    got = _fit_scores(est, _rebuild(frame)).loc[base.index]
    err = float(np.max(np.abs(got.to_numpy() - base.to_numpy())))
    assert err < SCORE_ATOL, f"{who}: swapping left and right changed scores by up to {err:.2e}"


def check_uncompared_item(est: Any) -> None:
    """An item listed but never compared gets a row, with the prior mean score 0, a finite
    standard error, and the disconnected-graph warning; the other items are unaffected."""
    who = describe(est)
    data = toy(0)
    frame = data.to_frame()
    extended = Comparisons.from_frame(frame, all_items=["never-compared"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted = clone(est).fit(extended)
    assert any("connected components" in str(w.message) for w in caught), \
        f"{who}: no warning for an item that was never compared"
    result = fitted.result_frame().set_index("item")
    assert "never-compared" in result.index, f"{who}: the uncompared item has no row"
    row = result.loc["never-compared"]
    assert abs(row["score"]) < 1e-6, f"{who}: the uncompared item's score is {row['score']}, not 0"
    assert np.isfinite(row["stderr"]), f"{who}: the uncompared item's stderr is not finite"
    base = _fit_scores(est, data)
    err = float(np.max(np.abs(result.loc[base.index, "score"].to_numpy() - base.to_numpy())))
    assert err < SCORE_ATOL, f"{who}: an uncompared item changed the other scores by {err:.2e}"


def check_disconnected_graph(est: Any) -> None:
    """Two sets of items never compared with each other: a UserWarning naming the number of
    components, and a finite result (the prior ties the components together)."""
    who = describe(est)
    a, _ = pairwise_crowd(12, 4, 150, tau=0.3, seed=5)
    b, _ = pairwise_crowd(12, 4, 150, tau=0.3, seed=6)
    fa, fb = a.to_frame(), b.to_frame()
    for col in ("left", "right", "label"):
        fb[col] = fb[col].map(lambda v: v if v == "tie" else f"B{v}")
    data = Comparisons.from_frame(pd.concat([fa, fb], ignore_index=True))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = clone(est).fit(data).result_frame()
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert any("2 connected components" in m for m in messages), \
        f"{who}: no warning naming 2 components; got {messages}"
    assert np.all(np.isfinite(result[["score", "stderr"]].to_numpy())), f"{who}: non-finite result"


SPEC = KindSpec(
    toy=toy,
    units=lambda data: data.items,
    quality=_quality,
    floor=0.7,
    extra=(check_renaming_invariance, check_left_right_swap, check_uncompared_item,
           check_disconnected_graph),
)
