"""The estimator contract shared by every truth-inference method.

Subclasses implement ``_fit(data, gold, init) -> posteriors (N x K ndarray)`` and set their
worker model attributes; :class:`BaseAggregator` does validation, gold clamping, seeded
tie-breaking and the conversion to pandas objects keyed by the user's ids.

Confusion-matrix orientation (one convention for the whole library)::

    confusions_[w, j, l] = P(worker w answers class l | true class j)

rows (true class) sum to 1.  Converters to other orientations live in
:func:`crowdlearn.aggregation.base.confusion_frame`.

The helpers the public methods rely on are module functions or *sealed* methods
(:data:`SEALED`): a subclass that defines one of those names is rejected when the class is
created, so a method-specific helper can never silently replace the base's (a subclass
helper named like a base helper once made ``predict`` fail with a TypeError).  The hooks a
subclass is meant to override are ``_fit``, ``_predict_proba_codes`` and ``_check_data``.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import warnings
from typing import Any

import numpy as np
import pandas as pd

from ..core import progress
from ..core.base import CrowdEstimator, Tags, check_fitted, resolve_random_state
from ..core.data import CrowdLabels, as_crowd_labels
from ..core.gold import keyed_gold
from ..core.ids import positions_by_value, show_value
from ..core.params import check_params
from ..core.stats import argmax_random_ties, clamp_to_gold, vote_fractions

__all__ = ["BaseAggregator", "ConfusionAggregator", "GoldCodes", "argmax_random_ties", "confusion_frame",
           "normalize_rows", "align_to_fit", "label_aggregator", "user_stacklevel", "workers_meet", "SEALED"]

#: names of BaseAggregator's public methods and helpers that subclasses may not redefine
SEALED = frozenset({
    "fit_predict", "fit_predict_proba", "predict_proba", "predict", "_record_iteration",
    "_progress_step", "_progress_relay",
    "__sklearn_is_fitted__", "__init_subclass__",
})

def confusion_frame(confusion: np.ndarray, classes: pd.Index) -> pd.DataFrame:
    """One worker's K x K confusion as a DataFrame: rows = true class, columns = answer."""
    return pd.DataFrame(
        confusion,
        index=pd.Index(classes, name="true"),
        columns=pd.Index(classes, name="answered"),
    )


def normalize_rows(proba: np.ndarray, n_classes: int) -> np.ndarray:
    """Rows that sum to one; a NaN or empty row becomes uniform (never leaks out)."""
    proba = np.asarray(proba, dtype=np.float64)
    if proba.size and np.isfinite(proba).all() and proba.min() >= 0.0:
        # the usual case, checked with whole-array passes (fast at 10^7 cells); rows
        # already normalised to rounding are returned as they are
        sums = proba.sum(axis=1)
        if np.all(np.abs(sums - 1.0) <= 1e-9):
            return proba
        if np.all(sums > 0):
            return proba / sums[:, None]
    bad = ~np.all(np.isfinite(proba), axis=1)
    proba[bad] = 0.0
    proba = np.clip(proba, 0.0, None)
    sums = proba.sum(axis=1, keepdims=True)
    empty = sums[:, 0] <= 0
    sums[empty] = 1.0
    proba = proba / sums
    proba[empty] = 1.0 / max(n_classes, 1)
    return proba


def align_to_fit(data: CrowdLabels, workers: pd.Index, classes: pd.Index) -> CrowdLabels:
    """Recode ``data`` onto fitted worker and class codes; answers of unseen workers are dropped.

    Tasks keep their own codes (new tasks are what ``predict_proba`` scores); a class the fit
    never saw is an error, since no worker model covers it.
    """
    if data.classes.equals(classes) and data.workers.equals(workers):
        return data
    # by value: answers read from a CSV (text ids and labels) scored by a model fitted on a
    # numeric DataFrame, or back, name the same workers and classes
    cls_map = positions_by_value(classes, data.classes, "the fitted classes")
    if np.any(cls_map < 0):
        unknown = data.classes[cls_map < 0][0]
        raise ValueError(f"class {show_value(unknown)} was not seen during fit")
    w_map = positions_by_value(workers, data.workers, "the fitted workers")
    keep = w_map[data.worker] >= 0
    if data.n_labels and not keep.any():
        warnings.warn(
            f"none of the {data.n_workers} worker(s) of these answers was seen during fit (e.g. "
            f"{show_value(data.workers[0])}): every task gets the class prior", UserWarning, stacklevel=3)
    return CrowdLabels(
        data.task[keep],
        w_map[data.worker[keep]],
        cls_map[data.label[keep]],
        tasks=data.tasks,
        workers=workers,
        classes=classes,
    )


def label_aggregator(method: Any, params: dict | None = None, random_state: Any = 0) -> "BaseAggregator":
    """A fresh, unfitted label-only classification aggregator, for methods built on others
    (one fit per threshold of an ordinal scale, per tag of a multi-label crowd).

    ``method`` is a registered name, an estimator class or an instance (cloned); ``params``
    its constructor arguments; ``random_state`` is given to it unless ``params`` sets one.

    Raises
    ------
    ValueError
        For an unknown name, or a method that is not a label-only classification aggregator.
    """
    from sklearn.base import clone

    from ..core.base import get_tags
    from ..registry import get_method

    params = dict(params or {})
    if isinstance(method, str):
        est = get_method(method, kind="classification")(**params)
    elif isinstance(method, type):
        est = method(**params)
    else:
        est = clone(method).set_params(**params)
    tags = get_tags(est)
    if tags.kind != "classification" or tags.requires_features:
        raise ValueError(f"method {method!r} is not a label-only classification aggregator "
                         "(e.g. 'ds', 'mv', 'glad')")
    if "random_state" in est.get_params(deep=False) and "random_state" not in params:
        est.set_params(random_state=random_state)
    return est


def workers_meet(data: CrowdLabels) -> bool:
    """True when some task has answers from two different workers.

    Without such a task (and without gold) no worker can be compared with anyone: every
    worker model is unidentified, and its EM only drifts along a ridge of equal likelihood
    (skills falling while the class prior soaks up the answers' marginal).  ``data`` may be
    any answer table sorted by task with ``task_ptr`` offsets and a ``worker`` code array
    (:class:`~crowdlearn.continuous.data.ContinuousAnswers` too).
    """
    counts = data.labels_per_task()
    if len(data.worker) == 0 or counts.max() < 2:
        return False
    starts = data.task_ptr[:-1][counts > 0]
    return bool(np.any(np.minimum.reduceat(data.worker, starts)
                       != np.maximum.reduceat(data.worker, starts)))


def user_stacklevel() -> int:
    """``stacklevel`` that makes a warning point at the first caller outside crowdlearn.

    A fit reaches its warnings through one to three of the package's own frames (mixins,
    ``auto``'s candidates, the CLI), so a fixed level would often name a line of crowdlearn.
    Frames are told apart by their module's name, which holds for any kind of install.
    """
    frame, level = sys._getframe(1), 1  # the function that will call warnings.warn
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module != "crowdlearn" and not module.startswith("crowdlearn."):
            break
        frame, level = frame.f_back, level + 1
    return level


#: how many BaseAggregator.fit calls are running in this thread (composite methods fit
#: others): the warnings about the fitted labels are the outermost fit's to give
_FIT_DEPTH = threading.local()


def _answers_without_overlap(data: CrowdLabels, proba: np.ndarray, name: str, warn: bool = True) -> np.ndarray:
    """The answers' vote shares on every answered task, with a warning: what any aggregator
    returns when no two workers ever answered the same task and no gold is given.

    Any other posterior would come from the worker model's unidentified parameters, i.e. from
    where its EM happened to stop, and majority vote's answer is the only one every model
    agrees with.  Tasks without answers keep the method's own posterior (its class prior).
    """
    if warn:
        warnings.warn(
            f"{name}: no task has answers from two different workers and no gold is given, so "
            "worker quality cannot be estimated; each task's posterior is its answers' vote shares",
            UserWarning, stacklevel=user_stacklevel(),
        )
    answered = data.labels_per_task() > 0
    out = proba.copy()
    out[answered] = vote_fractions(data)[answered]
    return out


#: a fit "collapsed" when at least this share of the answered tasks gets one class ...
COLLAPSE_SHARE = 0.99
#: ... that majority vote gives to at most this share of them (guards for a warning, not
#: tuned: they flag the degenerate EM solution in which one class absorbs every task)
COLLAPSE_VOTE_SHARE = 0.8


class CollapseWarning(UserWarning):
    """A fit put nearly every task in one class that majority vote gives to far fewer."""


def _warn_if_collapsed(data: CrowdLabels, codes: np.ndarray, gold: np.ndarray | None, name: str) -> None:
    """Warn when nearly every answered task gets the class that majority vote gives to far fewer.

    With 2-3 answers per task and few per worker, EM methods can reach the solution in which
    one class absorbs every task and the others are answered at random: the likelihood of
    such answers barely tells a latent class apart from each worker's answer rate.  The labels
    are then useless, and nothing else in the fit says so.  The same labels are right when one
    class really is that frequent, which the answers alone cannot tell, so the message says
    both.  Tasks with gold are left out (their labels are the gold); ties in the vote count
    as shares.
    """
    judged = data.labels_per_task() > 0
    if gold is not None:
        judged &= gold < 0
    n = int(judged.sum())
    if n < 20 or data.n_classes < 2:
        return
    top = int(np.bincount(codes[judged], minlength=data.n_classes).argmax())
    share = float(np.mean(codes[judged] == top))
    if share < COLLAPSE_SHARE:  # the common case: no vote table needed
        return
    votes = vote_fractions(data)[judged]
    is_max = votes >= votes.max(axis=1, keepdims=True) - 1e-12
    vote_share = float(np.mean(is_max[:, top] / is_max.sum(axis=1)))
    if vote_share <= COLLAPSE_VOTE_SHARE:
        warnings.warn(
            f"{name}: {share:.0%} of the answered tasks get class {show_value(data.classes[top])}, which "
            f"majority vote gives to {vote_share:.0%} of them: either that class is that frequent, "
            "or the fit collapsed onto one class (too few answers per task and per worker to "
            "identify its worker model); compare with 'mv'",
            CollapseWarning, stacklevel=user_stacklevel(),
        )


@dataclasses.dataclass(frozen=True, eq=False)
class GoldCodes:
    """Gold given to :meth:`BaseAggregator.fit` as class codes per task, not as class values.

    ``codes[i]`` is the position in ``data.classes`` of the gold class of ``data.tasks[i]``,
    or -1 where it is unknown: the form a fit works in, which composite methods hand on to
    the methods they fit on the same table (a moment method to its EM stage, MMLC-df to its
    base aggregator).  The marker is what tells codes apart from class values: a plain array
    of classes 1..5 read as codes would shift every gold label by one class, silently, so
    ``fit`` refuses plain arrays and reads codes only when they come wrapped in this type.

    Parameters
    ----------
    codes : array of int, shape (n_tasks,)
        Class codes in ``[-1, n_classes - 1]``, in the order of the answer table's tasks;
        ``fit`` checks the length and the range against the table it is given.

    Raises
    ------
    TypeError
        When ``codes`` is not a one-dimensional array of integers.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> labels = pd.DataFrame({"task": ["t1", "t1", "t2", "t2"], "worker": ["a", "b", "a", "b"],
    ...                        "label": ["no", "yes", "yes", "yes"]})
    >>> from crowdlearn import DawidSkene
    >>> DawidSkene().fit(labels, gold=GoldCodes(np.array([1, -1]))).labels_["t1"]  # classes: no, yes
    'yes'
    """

    codes: np.ndarray

    def __post_init__(self) -> None:
        codes = np.asarray(self.codes)
        if codes.ndim != 1 or codes.dtype.kind not in "iu":
            raise TypeError(
                f"GoldCodes takes a 1-D array of integer class codes, got {codes.ndim}-D "
                f"{codes.dtype} values; gold of class values goes to fit as a Series task -> class"
            )
        object.__setattr__(self, "codes", codes)  # frozen: the one normalising assignment


def _encode_gold(data: CrowdLabels, gold: Any) -> np.ndarray | None:
    """Gold as int32 class codes per task (-1 unknown), or None when it names no class.

    Codes come in only as :class:`GoldCodes` (composite methods hand their gold on this way),
    whose values are checked to be codes: an out-of-range one would otherwise index past the
    class axis deep inside a fit.  Any other gold must be keyed by task id; a sequence is
    refused, since whether it holds class values or codes, and in which task order, cannot
    be told from it.  Gold that names tasks but none of the answers' tasks is refused too: it
    would be dropped whole, and the fit would run as if no gold had been given (typically ids
    of another type).
    """
    if gold is None:
        return None
    if isinstance(gold, GoldCodes):
        codes = gold.codes
        if codes.shape != (data.n_tasks,):
            raise ValueError(
                f"GoldCodes holds {codes.size} codes for the {data.n_tasks} tasks of the answers; "
                "it needs one per task, in the order of their tasks (-1 where unknown)"
            )
        bad = (codes < -1) | (codes >= data.n_classes)
        if np.any(bad):
            raise ValueError(
                f"gold given as class codes holds {int(codes[bad][0])}, outside [-1, {data.n_classes - 1}] "
                f"(codes of the classes {list(data.classes)[:10]}); pass a Series task -> class instead"
            )
        return codes.astype(np.int32) if np.any(codes >= 0) else None
    gold = keyed_gold(gold, hint="; class codes per task (positions in the answers' classes, "
                      "-1 unknown) go in crowdlearn.aggregation.GoldCodes")
    codes = data.encode_gold(gold)
    if not np.any(codes >= 0):
        named = gold.dropna()
        if len(named):
            raise ValueError(
                f"none of the {len(named)} gold task(s) (e.g. {named.index[0]!r}) is among the "
                f"answers' tasks (e.g. {data.tasks[0]!r}); gold must be keyed by task id"
            )
        return None
    return codes


def _encode_init(data: CrowdLabels, init: Any) -> np.ndarray:
    if isinstance(init, pd.DataFrame):
        # matched by value like gold (ids read from text vs numbers), and a missing row or
        # column named: reindexing would only show it as NaN cells
        at = {}
        for axis, want, have in (("task", data.tasks, init.index), ("class", data.classes, init.columns)):
            at[axis] = positions_by_value(have, want, f"init's {axis}s")
            if np.any(at[axis] < 0):
                absent = want[at[axis] < 0]
                raise ValueError(f"init has no {'row' if axis == 'task' else 'column'} for {axis} "
                                 f"{absent[0]!r} ({len(absent)} {axis}(s) missing)")
        init = init.to_numpy(dtype=float)[np.ix_(at["task"], at["class"])]
    init = np.asarray(init, dtype=np.float64)
    if init.shape != (data.n_tasks, data.n_classes):
        raise ValueError(
            f"init must have shape (n_tasks, n_classes) = {(data.n_tasks, data.n_classes)}, "
            f"got {init.shape}"
        )
    if not np.all(np.isfinite(init)) or np.any(init < 0):
        raise ValueError("init must hold finite, non-negative numbers")
    return normalize_rows(init.copy(), data.n_classes)


class BaseAggregator(CrowdEstimator):
    """Base class for truth inference from crowd labels only.

    Fitted attributes (all methods)
    -------------------------------
    labels_ : Series, task -> class
        Point estimate per task; ties broken by the seeded rule of :func:`argmax_random_ties`.
    probas_ : DataFrame, tasks x classes
        Posterior (or score) per task and class; rows sum to 1.
    history_ : list of float
        Objective per iteration (empty for closed-form methods).
    n_iter_ : int
    converged_ : bool
    tasks_, workers_, classes_ : Index
        The ids the fit saw.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        clash = SEALED.intersection(vars(cls))
        if clash:
            raise TypeError(
                f"{cls.__name__} redefines {', '.join(sorted(clash))} of BaseAggregator; "
                "give method-specific helpers another name"
            )

    def __crowd_tags__(self) -> Tags:
        return Tags(kind="classification")

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "probas_")

    # ------------------------------------------------------------------ public
    def fit(self, labels: Any, *, gold: Any = None, init: Any = None, verbose: bool | None = None,
            callback: Any = None) -> "BaseAggregator":
        """Infer the true label of every task.

        Parameters
        ----------
        labels : CrowdLabels or DataFrame (task, worker, label)
            A ``dask.dataframe.DataFrame`` is refused with a pointer to
            :func:`crowdlearn.scale.fit_dask`, which fits it on its cluster.
        gold : Series or mapping task -> class, or GoldCodes, optional
            Known labels, keyed by task id (tasks the answers do not have are ignored).
            Their tasks are clamped to the gold class; methods with a worker model also
            learn from them.  A plain array or list is refused (``ValueError``): its values
            name no task, and class values cannot be told from class codes.  Codes per task
            (positions in the answers' classes, -1 unknown) are given as
            :class:`GoldCodes`, the form composite methods hand on to the fits inside them.
        init : array (n_tasks, n_classes) or DataFrame, optional
            Initial posteriors for iterative methods (rows are normalised); ignored by
            closed-form methods.
        verbose : bool, optional
            Progress bar of the iterations on stderr (tqdm): True draws it, None (default)
            only on a terminal for fits longer than a second, False never
            (:mod:`crowdlearn.core.progress`).
        callback : callable, optional
            Called after every iteration with a :class:`~crowdlearn.core.progress.StepRecord`
            (``iteration``, ``objective``, ``elapsed``, ...).  Neither changes the result.

        Notes
        -----
        When no task has answers from two different workers and no gold is given, no worker
        model is identified: every method then returns the answers' vote shares as its
        posterior (with a ``UserWarning``), and its fitted worker parameters, which only say
        where EM stopped, are not used for ``probas_``.
        """
        if type(labels).__module__.startswith(("dask.", "dask_expr")):  # answers on a cluster
            raise TypeError(
                "labels is a dask DataFrame: fit it where it lives with "
                "crowdlearn.scale.fit_dask(estimator, frame) (methods: crowdlearn.scale.supported_methods())"
            )
        check_params(self)
        data = as_crowd_labels(labels)
        self._check_data(data)
        gold_codes = _encode_gold(data, gold)
        init_p = _encode_init(data, init) if init is not None else None
        self._rng = resolve_random_state(getattr(self, "random_state", 0))
        self.history_: list[float] = []
        self.n_iter_ = 0
        self.converged_ = True
        depth = getattr(_FIT_DEPTH, "n", 0)
        _FIT_DEPTH.n = depth + 1
        with progress.start(getattr(self, "max_iter", None), type(self).__name__, verbose,
                            callback) as self._progress:
            try:
                proba = self._fit(data, gold_codes, init_p)
            finally:
                del self._progress
                _FIT_DEPTH.n = depth
        proba = normalize_rows(proba, data.n_classes)
        if gold_codes is None and not workers_meet(data):
            proba = _answers_without_overlap(data, proba, type(self).__name__, warn=depth == 0)
        clamp_to_gold(proba, gold_codes)
        self.tasks_ = data.tasks
        self.workers_ = data.workers
        self.classes_ = data.classes
        codes = argmax_random_ties(proba, self._rng, data.tasks)
        if depth == 0:  # an inner fit of a composite method leaves it to the outer one
            _warn_if_collapsed(data, codes, gold_codes, type(self).__name__)
        self.label_codes_ = codes
        self.probas_ = pd.DataFrame(proba, index=data.tasks, columns=data.classes)
        self.labels_ = pd.Series(data.classes.take(codes), index=data.tasks, name="label")
        del self._rng
        return self

    def fit_predict(self, labels: Any, **kwargs: Any) -> pd.Series:
        return self.fit(labels, **kwargs).labels_

    def fit_predict_proba(self, labels: Any, **kwargs: Any) -> pd.DataFrame:
        return self.fit(labels, **kwargs).probas_

    def predict_proba(self, labels: Any) -> pd.DataFrame:
        """Posteriors for (possibly new) tasks under the fitted worker model.

        Answers by workers the fit never saw are ignored (they carry no estimated skill).
        Methods tagged ``has_worker_model`` implement it; on the training answers it returns
        ``probas_`` of a fit without gold.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        NotImplementedError
            For methods without a worker model that scores new answers.
        """
        check_fitted(self)
        data = align_to_fit(as_crowd_labels(labels), self.workers_, self.classes_)
        proba = normalize_rows(self._predict_proba_codes(data), data.n_classes)
        return pd.DataFrame(proba, index=data.tasks, columns=self.classes_)

    def predict(self, labels: Any) -> pd.Series:
        proba = self.predict_proba(labels)
        rng = resolve_random_state(getattr(self, "random_state", 0))
        codes = argmax_random_ties(proba.to_numpy(), rng, proba.index)
        return pd.Series(self.classes_.take(codes), index=proba.index, name="label")

    # ---------------------------------------------------------------- hooks
    def _fit(self, data: CrowdLabels, gold: np.ndarray | None, init: np.ndarray | None) -> np.ndarray:
        raise NotImplementedError

    def _predict_proba_codes(self, data: CrowdLabels) -> np.ndarray:
        raise NotImplementedError(
            f"{type(self).__name__} has no worker model that scores new tasks"
        )

    # -------------------------------------------------------------- helpers
    def _record_iteration(self, objective: float, previous: float, n_answers: int) -> bool:
        """Log one iteration's objective; True (and ``converged_``) once it has settled.

        Settled means the objective moved by less than ``self.tol`` per answer since the
        previous iteration; ``tol <= 0`` never settles, so exactly ``max_iter`` rounds run.
        """
        self.history_.append(objective)
        self.n_iter_ += 1
        self._progress_step(objective)
        if self.tol > 0 and abs(objective - previous) / max(n_answers, 1) < self.tol:
            self.converged_ = True
        return self.converged_

    def _progress_step(self, value: float) -> None:
        """Report one iteration to the fit's progress bar / callback (methods that log their
        ``history_`` themselves call it; :meth:`_record_iteration` does)."""
        reporter = getattr(self, "_progress", None)
        if reporter is not None and reporter.active:
            reporter.step(value)

    def _progress_relay(self):
        """A ``callback`` for a fit nested in this one (e.g. the EM stage of a moment method):
        its iterations are reported as this fit's; the nested fit draws no bar of its own."""
        return lambda record: self._progress_step(record.objective)

    def _check_data(self, data: CrowdLabels) -> None:
        if data.n_labels == 0:
            raise ValueError("no crowd answers to aggregate")
        if data.n_classes < 1:
            raise ValueError("no classes")


class ConfusionAggregator(BaseAggregator):
    """Base of methods whose worker model is a confusion matrix per worker.

    Subclasses set, in ``_fit``, ``confusions_`` (W x K x K, ``[w, true, answered]``) and
    the E-step tables ``_log_table`` (``[w*K + answered, true]``) and ``_log_prior``; this
    class turns them into ``predict_proba`` for new tasks and per-worker confusion frames.
    The posteriors ``_fit`` returns must be the E-step of exactly these tables, so that
    ``predict_proba`` on the training answers reproduces ``probas_``.
    """

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), has_worker_model=True)

    def _predict_proba_codes(self, data: CrowdLabels) -> np.ndarray:
        from ..core import kernels

        post, _ = kernels.estep(data, self._log_table, self._log_prior, "numpy")
        return post

    def confusion(self, worker: Any) -> pd.DataFrame:
        """The fitted confusion matrix of one worker (rows = true class, columns = answer)."""
        check_fitted(self)
        pos = self.workers_.get_loc(worker)
        return confusion_frame(self.confusions_[pos], self.classes_)
