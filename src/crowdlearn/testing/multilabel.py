"""Conformance data and checks of the multi-label kind (:data:`SPEC`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone

from ..aggregation.base import label_aggregator
from ..diagnostics.multilabel_metrics import hamming_loss
from ..multilabel.data import MultiLabelAnswers
from ..simulate.multilabel import multilabel_crowd
from .checks import describe
from .kinds import KindSpec

__all__ = ["SPEC", "toy_answers", "check_equals_per_tag_fits", "check_renaming_invariance",
           "check_task_without_answers", "check_string_and_list_inputs"]

_TAGS = ["red", "green", "blue", "grey"]


def toy_answers(seed: int = 0) -> MultiLabelAnswers:
    """A small multi-label crowd (80 tasks, 4 answers each, 4 tags) with string ids."""
    data, _ = multilabel_crowd(n_tasks=80, n_workers=10, n_tags=4, labels_per_task=4,
                               tags=_TAGS, seed=seed)
    return MultiLabelAnswers(
        data.task, data.worker, data.tag_ptr, data.tag_code,
        tasks=pd.Index([f"t{i:03d}" for i in range(data.n_tasks)]),
        workers=pd.Index([f"w{i:02d}" for i in range(data.n_workers)]),
        tags=data.tags, truth_ptr=data.truth_ptr, truth_code=data.truth_code,
        truth_known=data.truth_known)


def _quality(est: Any, data: MultiLabelAnswers) -> float:
    return 1.0 - hamming_loss(est.labels_, data.truth_series(), data.tags)


def check_equals_per_tag_fits(est: Any) -> None:
    """A per-tag method (parameter ``method``) gives, for every tag, exactly the posteriors
    and labels of its aggregator fitted alone on that tag's binary crowd."""
    if "method" not in est.get_params(deep=False):
        return
    who, data = describe(est), toy_answers(0)
    fitted = clone(est).fit(data)
    for j, tag in enumerate(data.tags):
        params = fitted.get_params(deep=False)
        alone = label_aggregator(params["method"], params.get("params"), params.get("random_state", 0))
        alone.fit(data.tag_labels(tag))
        np.testing.assert_array_equal(fitted.probas_[tag].to_numpy(), alone.probas_[1].to_numpy(),
                                      err_msg=f"{who}: tag {tag!r} differs from its aggregator alone")
        np.testing.assert_array_equal(fitted.decisions_[:, j], alone.labels_.to_numpy() == 1,
                                      err_msg=f"{who}: decisions of tag {tag!r} differ from its aggregator's")


def _renamed(data: MultiLabelAnswers, seed: int = 5):
    rng = np.random.default_rng(seed)
    df = data.to_frame(joined=False)
    df = df.iloc[rng.permutation(len(df))].reset_index(drop=True)
    task_map = {t: f"task-{i:04d}" for i, t in enumerate(rng.permutation(np.asarray(data.tasks, dtype=object)))}
    worker_map = {w: f"ω{i}" for i, w in enumerate(rng.permutation(np.asarray(data.workers, dtype=object)))}
    tag_map = {t: f"k{len(data.tags) - i}" for i, t in enumerate(data.tags)}  # reversed tag order
    df["task"] = df["task"].map(task_map)
    df["worker"] = df["worker"].map(worker_map)
    df["label"] = [[tag_map[t] for t in row] for row in df["label"]]
    return MultiLabelAnswers.from_frame(df), task_map, tag_map


def check_renaming_invariance(est: Any) -> None:
    """Shuffling the answers and renaming tasks, workers and tags (reversing the tag order)
    permutes the posteriors and changes nothing else."""
    who, data = describe(est), toy_answers(2)
    new, task_map, tag_map = _renamed(data)
    a, b = clone(est).fit(data), clone(est).fit(new)
    pa = a.probas_.rename(index=task_map, columns=tag_map)
    pb = b.probas_.reindex(index=pa.index, columns=pa.columns)
    assert not pb.isna().any().any(), f"{who}: renamed tasks or tags missing from probas_"
    np.testing.assert_allclose(pb.to_numpy(), pa.to_numpy(), atol=1e-6,
                               err_msg=f"{who}: posteriors change when ids are renamed/reordered")


def check_task_without_answers(est: Any) -> None:
    """A task listed without answers still gets a row (its prior), finite, in input order."""
    who, data = describe(est), toy_answers(0)
    df = data.to_frame()
    lonely = MultiLabelAnswers.from_frame(df, all_tasks=["lonely-task", *data.tasks])
    frame = clone(est).fit(lonely).result_frame()
    assert "lonely-task" in set(frame["task"]), f"{who}: a task without answers is missing"
    assert list(frame["task"]) == list(lonely.tasks), f"{who}: result tasks not in input order"
    assert np.all(np.isfinite(frame.select_dtypes("number").to_numpy(float))), f"{who}: NaN for a lonely task"


def check_string_and_list_inputs(est: Any) -> None:
    """Lists of tags and delimiter-separated strings (with another delimiter) are the same input."""
    who, data = describe(est), toy_answers(0)
    lists = MultiLabelAnswers.from_frame(data.to_frame(joined=False))
    text = data.to_frame(joined=False)
    text["label"] = [",".join(row) for row in text["label"]]
    strings = MultiLabelAnswers.from_frame(text, delimiter=",")
    pa, pb = clone(est).fit(lists).probas_, clone(est).fit(strings).probas_
    pd.testing.assert_frame_equal(pa, pb, obj=f"{who}: lists vs ','-separated strings")


SPEC = KindSpec(
    toy=toy_answers,
    units=lambda data: data.tasks,
    quality=_quality,
    floor=0.85,
    extra=(check_equals_per_tag_fits, check_renaming_invariance, check_task_without_answers,
           check_string_and_list_inputs),
)
