"""Conformance data and checks of the similarity kind (crowdclustering): :data:`SPEC`."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.base import clone

from ..core.base import get_tags
from ..diagnostics.similarity_metrics import adjusted_rand
from ..similarity.data import SimilarityAnswers
from ..simulate.similarity import similarity_crowd
from .checks import describe
from .kinds import KindSpec

__all__ = ["SPEC", "toy", "check_renaming_invariance", "check_side_swap",
           "check_uncompared_item"]


def toy(seed: int) -> SimilarityAnswers:
    """45 items in 3 clusters, 10 annotators (2 coin-flippers), 675 answers; 4 Gaussian item
    features (for the methods that need them; the others ignore them)."""
    answers, _ = similarity_crowd(n_items=45, n_clusters=3, n_workers=10, answers_per_item=30,
                                  random_fraction=0.2, reliability=(0.8, 0.95), n_features=4,
                                  separation=4.0, seed=seed)
    return answers


def _units(answers: SimilarityAnswers) -> pd.Index:
    return answers.items


def _quality(est, answers: SimilarityAnswers) -> float:
    truth = pd.Series(answers.truth, index=answers.items)
    return adjusted_rand(truth, est.clusters_)


def _partition_equal(a: pd.Series, b: pd.Series, who: str, what: str) -> None:
    a, b = a.align(b, join="inner")
    score = adjusted_rand(a, b)
    assert len(a) and abs(score - 1.0) < 1e-9, f"{who}: {what} changed the clustering (ARI {score:.4f})"


def check_renaming_invariance(est) -> None:
    """Renaming items and workers and shuffling the rows leaves the partition of the items
    (up to cluster relabelling) and every annotator's reliability unchanged (to 0.1 for a
    stochastic method)."""
    who = describe(est)
    data = toy(0)
    frame = data.to_frame()
    rng = np.random.default_rng(3)
    item_name = {i: f"it-{code}" for code, i in zip(rng.permutation(data.n_items), data.items)}
    worker_name = {w: f"ann-{code}" for code, w in zip(rng.permutation(data.n_workers), data.workers)}
    renamed = pd.DataFrame({
        "worker": frame["worker"].map(worker_name),
        "item_a": frame["item_a"].map(item_name),
        "item_b": frame["item_b"].map(item_name),
        "same": frame["same"],
    }).iloc[rng.permutation(len(frame))].reset_index(drop=True)
    features = None if data.features is None else pd.DataFrame(
        data.features, index=[item_name[i] for i in data.items])
    base = clone(est).fit(data)
    other = clone(est).fit(SimilarityAnswers.from_frame(renamed, features=features))
    back = other.clusters_.rename(index={v: k for k, v in item_name.items()})
    _partition_equal(base.clusters_, back, who, "renaming items and workers")
    rel = other.worker_reliability_.rename(index={v: k for k, v in worker_name.items()})
    # a stochastic method (SGD over shuffled answers) sees the answers in another order:
    # its numbers move a little, its clustering must not
    atol = 0.1 if get_tags(est).stochastic else 1e-6
    np.testing.assert_allclose(rel.loc[data.workers].to_numpy(),
                               base.worker_reliability_.to_numpy(), atol=atol,
                               err_msg=f"{who}: renaming changed the reliabilities")


def check_side_swap(est) -> None:
    """Swapping ``item_a`` and ``item_b`` on some rows changes nothing: a pair is unordered."""
    who = describe(est)
    data = toy(0)
    swap = np.random.default_rng(5).random(data.n_answers) < 0.5
    a = np.where(swap, data.item_b, data.item_a)
    b = np.where(swap, data.item_a, data.item_b)
    swapped = SimilarityAnswers(data.worker, a, b, data.same, data.workers, data.items,
                                truth=data.truth, features=data.features)
    first = clone(est).fit(data).result_frame()
    second = clone(est).fit(swapped).result_frame()
    pd.testing.assert_frame_equal(first, second, obj=f"{who}: result after swapping sides")


def check_uncompared_item(est) -> None:
    """An item listed but never compared gets a row (the prior cluster, finite confidence)
    and the other items keep their partition."""
    who = describe(est)
    data = toy(0)
    features = None
    if data.features is not None:  # the new item sits at the features' mean
        features = pd.DataFrame(np.vstack([data.features, data.features.mean(axis=0)]),
                                index=list(data.items) + ["never-compared"])
    extra = SimilarityAnswers.from_frame(data.to_frame(), all_items=["never-compared"],
                                         features=features)
    fitted = clone(est).fit(extra)
    frame = fitted.result_frame()
    assert "never-compared" in set(frame["item"]), f"{who}: the uncompared item has no row"
    row = frame.loc[frame["item"] == "never-compared"].iloc[0]
    assert 0 <= row["cluster"] < fitted.n_clusters_ and np.isfinite(row["confidence"]), \
        f"{who}: the uncompared item's row is not a valid cluster"
    base = clone(est).fit(data)
    _partition_equal(base.clusters_, fitted.clusters_.drop("never-compared"), who,
                     "adding an uncompared item")


def _check_kind_tag(est) -> None:
    assert get_tags(est).answer_type == "similarity", f"{describe(est)}: answer_type tag"


SPEC = KindSpec(
    toy=toy,
    units=_units,
    quality=_quality,
    floor=0.8,
    extra=(_check_kind_tag, check_renaming_invariance, check_side_swap, check_uncompared_item),
)
