"""Conformance data and checks of the continuous kind (``SPEC``, read by
:mod:`crowdlearn.testing.kinds`).

Toy data: :func:`crowdlearn.simulate.continuous.continuous_crowd` with 80 tasks, 16 workers,
5 answers per task (400 answers, 25 per worker), planted biases in +-0.5, noise 0.2-1.2
(in units of the truth's spread), and 4 item features that predict the truth up to noise 0.3
(for the end-to-end heads, tag ``requires_features``; the other methods ignore them).

Methods tagged ``stochastic`` (trained networks) skip the checks that compare numbers across
different inputs (renaming, affine maps): their training shuffles by position, so those
inputs give other, equally good fits; the generic checks hold them to determinism under a
seed and to the quality floor.

Quality: the skill of the estimates over the constant guess,
``1 - MAE(estimates) / MAE(mean of the truths)``.  Unlike a rank correlation it sees a
wrong level or scale; unlike a bare MAE it does not depend on the units.  Floor 0.5: on
``toy(1)`` the plain mean of the answers scores about 0.7 and every method about 0.6-0.8,
while estimates that lose half of what the mean knows (a wrong gauge, weights that
single out one bad worker, a scale off by half) fall below it.

Extra checks: renaming and reordering invariance, affine equivariance (answers
``a x + b`` give estimates ``a e + b`` and standard errors ``|a| se``), a task without
answers (gets the answers' mean, finite error), gold clamping, and a DataFrame input equal to
the table input.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.base import clone

from ..continuous.data import ContinuousAnswers
from ..core.base import get_tags
from .checks import describe, registered_name
from .kinds import KindSpec

__all__ = ["SPEC", "toy", "quality", "NOT_AFFINE_EQUIVARIANT", "check_renaming_invariance",
           "check_affine_equivariance", "check_task_without_answers", "check_gold_clamped",
           "check_frame_input"]

#: registered continuous methods whose estimates are not affine-equivariant (none yet; a
#: method with a fixed-scale prior or a trained network would be listed here)
NOT_AFFINE_EQUIVARIANT: frozenset[str] = frozenset()


def toy(seed: int) -> ContinuousAnswers:
    """400 answers of 16 workers on 80 tasks (see the module docstring)."""
    from ..simulate.continuous import continuous_crowd

    answers, _ = continuous_crowd(80, 16, 5, bias=(-0.5, 0.5), noise=(0.2, 1.2), n_features=4,
                                  feature_noise=0.3, seed=seed)
    return answers


def quality(est, answers: ContinuousAnswers) -> float:
    """``1 - MAE / MAE of the constant guess`` against the planted truth."""
    truth = answers.truth
    guess = float(np.mean(np.abs(truth - truth.mean())))
    err = float(np.mean(np.abs(est.estimates_.to_numpy() - truth)))
    return 1.0 - err / guess


def _tol(frame: pd.DataFrame) -> float:
    return 1e-6 * max(float(frame["estimate"].abs().max()), 1.0)


def check_renaming_invariance(est) -> None:
    """New task and worker ids (another sort order) and shuffled rows permute the result and
    change nothing else."""
    if get_tags(est).stochastic:
        return
    who = describe(est)
    data = toy(0)
    frame = data.to_frame()
    base = clone(est).fit(data).result_frame().set_index("task")
    rng = np.random.default_rng(3)
    renamed = frame.assign(task="t" + (1000 - frame["task"]).astype(str),
                           worker="w" + (99 - frame["worker"]).astype(str))
    renamed = renamed.iloc[rng.permutation(len(renamed))].reset_index(drop=True)
    other = clone(est).fit(ContinuousAnswers.from_frame(renamed)).result_frame()
    other["task"] = 1000 - other["task"].str[1:].astype(int)
    other = other.set_index("task").loc[base.index]
    tol = _tol(base)
    for col in ("estimate", "stderr"):
        diff = float(np.max(np.abs(other[col].to_numpy() - base[col].to_numpy())))
        assert diff <= tol, f"{who}: renaming and reordering changed the {col} by {diff:.3g}"


def check_affine_equivariance(est) -> None:
    """Answers ``a x + b`` (a = -2.5, b = 7) give estimates ``a e + b`` and errors ``|a| se``."""
    if registered_name(est) in NOT_AFFINE_EQUIVARIANT or get_tags(est).stochastic:
        return
    who = describe(est)
    data = toy(0)
    a, b = -2.5, 7.0
    moved = ContinuousAnswers(data.task, data.worker, a * data.value + b, data.tasks,
                              data.workers, truth=a * data.truth + b, features=data.features)
    base = clone(est).fit(data).result_frame()
    other = clone(est).fit(moved).result_frame()
    tol = abs(a) * _tol(base) * 10
    diff = float(np.max(np.abs(other["estimate"] - (a * base["estimate"] + b))))
    assert diff <= tol, f"{who}: answers a*x+b did not give estimates a*e+b (off by {diff:.3g})"
    diff = float(np.max(np.abs(other["stderr"] - abs(a) * base["stderr"])))
    assert diff <= tol, f"{who}: answers a*x+b did not give errors |a|*se (off by {diff:.3g})"


def check_task_without_answers(est) -> None:
    """A task listed through ``all_tasks`` without answers is in the result, with a finite,
    positive standard error and, unless the method predicts it from features, the mean of
    the answers as estimate."""
    who = describe(est)
    toy_data = toy(0)
    frame = toy_data.to_frame()
    feats = pd.DataFrame(toy_data.features, index=toy_data.tasks)
    feats.loc[-1] = 0.0
    data = ContinuousAnswers.from_frame(frame, all_tasks=[-1] + list(frame["task"].unique()),
                                        features=feats)
    result = clone(est).fit(data).result_frame().set_index("task")
    assert -1 in result.index, f"{who}: the task without answers is missing from the result"
    row = result.loc[-1]
    assert get_tags(est).requires_features or np.isclose(row["estimate"], frame["label"].mean()), (
        f"{who}: the task without answers got {row['estimate']:.4g}, not the answers' mean")
    assert np.isfinite(row["stderr"]) and row["stderr"] > 0, (
        f"{who}: the task without answers has standard error {row['stderr']!r}")


def check_gold_clamped(est) -> None:
    """Gold values given to ``fit`` are the estimates of their tasks, with error 0."""
    who = describe(est)
    data = toy(0)
    gold = pd.Series({data.tasks[0]: 42.0, data.tasks[5]: -3.0})
    result = clone(est).fit(data, gold=gold).result_frame().set_index("task")
    for task, value in gold.items():
        assert result.loc[task, "estimate"] == value and result.loc[task, "stderr"] == 0, (
            f"{who}: gold task {task!r} not clamped to {value}")


def check_frame_input(est) -> None:
    """``fit(DataFrame)`` with the default columns equals ``fit(ContinuousAnswers)`` (methods
    without features: a frame carries none)."""
    if get_tags(est).requires_features:
        return
    who = describe(est)
    data = toy(0)
    a = clone(est).fit(data).result_frame()
    b = clone(est).fit(data.to_frame()).result_frame()
    pd.testing.assert_frame_equal(a, b, obj=f"{who}: result from a DataFrame")


SPEC = KindSpec(
    toy=toy,
    units=lambda answers: answers.tasks,
    quality=quality,
    floor=0.5,
    extra=(check_renaming_invariance, check_affine_equivariance, check_task_without_answers,
           check_gold_clamped, check_frame_input),
)
