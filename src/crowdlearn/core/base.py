"""The estimator contract every crowdlearn method follows, whatever its kind.

A method is a :class:`CrowdEstimator`: a scikit-learn estimator (``get_params``, ``set_params``,
``clone`` and ``repr`` come from :class:`sklearn.base.BaseEstimator`) that declares what it
needs and promises through a frozen :class:`Tags` record returned by ``__crowd_tags__``.
Everything that treats methods generically -- the registry, the CLI listing, the benchmarks
and the shared conformance suite -- reads these tags through :func:`get_tags` instead of
probing private class attributes, so a capability is declared once, in one place, and an
undeclared one falls back to a documented default.

Two further rules are shared by all methods:

* *not fitted* is always :class:`sklearn.exceptions.NotFittedError` (:func:`check_fitted`);
* ``random_state`` has one meaning (:func:`resolve_random_state`): an integer is a seed, ``None``
  draws fresh entropy (not reproducible, as in scikit-learn), and a ``RandomState`` or
  ``Generator`` is used as the source of randomness.  Every estimator's default is ``0``, so
  a default fit is reproducible.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

__all__ = [
    "Tags",
    "CrowdEstimator",
    "AnswerEstimator",
    "get_tags",
    "check_fitted",
    "resolve_random_state",
    "resolve_generator",
    "resolve_seed",
    "KINDS",
]

#: the registry kinds a method may declare: categorical truth inference, end-to-end learners,
#: then one kind per answer type (see :class:`AnswerEstimator`)
KINDS = ("classification", "learning", "continuous", "ordinal", "multilabel", "pairwise",
         "similarity")


@dataclass(frozen=True)
class Tags:
    """What a method needs and what it promises; read with :func:`get_tags`.

    Attributes
    ----------
    kind : str
        Registry kind: ``"classification"`` (truth inference from answers, possibly with item
        features), ``"learning"`` (trains a classifier ``f(x)`` end to end), or the kind of
        answer the method aggregates: ``"continuous"``, ``"ordinal"``, ``"multilabel"``,
        ``"pairwise"``, ``"similarity"``; see :data:`KINDS`.
    answer_type : str
        What one crowd answer is: ``"categorical"`` (one class out of K), ``"continuous"``
        (a number), ``"ordinal"`` (one of K ordered classes), ``"multilabel"`` (a set of
        tags), ``"pairwise"`` (which of two items wins, or a tie), ``"similarity"``
        (whether two items belong together).
    requires_features : bool
        ``fit`` needs item features (learners, MMLC).
    binary_only : bool
        The model is defined for K = 2 classes only.
    accepts_init : bool
        ``fit(..., init=posteriors)`` starts from the given posteriors (EM-type methods);
        other methods ignore ``init``.
    accepts_gold : bool
        ``fit(..., gold=...)`` is accepted (gold tasks are clamped to their class).
    stochastic : bool
        The output depends on ``random_state`` beyond tie-breaking (random restarts, SGD on
        shuffled data): generic invariance checks compare quality, not numbers.
    has_worker_model : bool
        A fitted worker model scores new answers: ``predict_proba(labels)`` works.
    predict_matches_fit : bool
        With a worker model: ``predict_proba`` of the training answers reproduces ``probas_``
        of a fit without gold (to rounding), because ``probas_`` is the posterior of the
        fitted worker model.  False for message-passing methods whose ``probas_`` are built
        from leave-one-out messages (each answer is weighed by messages that exclude it),
        while ``predict_proba`` weighs every answer with its worker's full message: the two
        then agree on the labels, not on the numbers.
    invariance_atol : float
        Absolute tolerance of the check that renaming or reordering tasks, workers and
        classes permutes the posteriors and changes nothing else.
    identifiable : bool
        Learners: fitted confusions are comparable with planted ones without a class
        permutation.
    confusion_tol : float
        Learners: bound on the mean absolute error of recovered planted confusions.
    """

    kind: str = "classification"
    answer_type: str = "categorical"
    requires_features: bool = False
    binary_only: bool = False
    accepts_init: bool = False
    accepts_gold: bool = True
    stochastic: bool = False
    has_worker_model: bool = False
    predict_matches_fit: bool = True
    invariance_atol: float = 1e-6
    identifiable: bool = True
    confusion_tol: float = 0.25

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown method kind {self.kind!r}; known kinds: {', '.join(KINDS)}")


class CrowdEstimator(BaseEstimator):
    """Base of every crowdlearn method (aggregators, learners, MMLC).

    Subclasses declare their capabilities by overriding ``__crowd_tags__`` and amending the
    parent's record, so a tag set on a base class is inherited unless changed::

        def __crowd_tags__(self):
            return dataclasses.replace(super().__crowd_tags__(), accepts_init=True)

    The tags of an instance may depend on its parameters (e.g. a selector's worker model is
    that of the estimator it selects); :func:`get_tags` of a class uses a default instance.
    """

    def __crowd_tags__(self) -> Tags:
        return Tags()


class AnswerEstimator(CrowdEstimator):
    """Base of the methods of the answer kinds beyond class labels (continuous, multi-label,
    pairwise, similarity; ordinal methods are aggregators over ordered classes).

    The contract, on top of :class:`CrowdEstimator`'s:

    * ``fit(answers, **options)`` takes the kind's answer table (or a DataFrame it is built
      from), never mutates it, and returns ``self``;
    * :meth:`result_frame` is the fitted result as one table, one row per unit (a task, or an
      item for pairwise and similarity answers) with the unit id as first column (grouped
      comparisons: the (group, item) pair as the first two), every unit of the input exactly
      once, in the input's order, no NaN: the table ``crowdlearn aggregate`` writes;
    * before ``fit``, :meth:`result_frame` raises ``NotFittedError``.

    Subclasses set ``_result_attr``, the name of the fitted attribute whose presence means
    fitted, and implement :meth:`_result_frame`.
    """

    _result_attr: str = ""

    def __sklearn_is_fitted__(self) -> bool:
        return bool(self._result_attr) and hasattr(self, self._result_attr)

    def result_frame(self):
        """The fitted result, one row per unit (see the class docstring)."""
        check_fitted(self)
        return self._result_frame()

    def _result_frame(self):
        raise NotImplementedError


def get_tags(est_or_class: Any) -> Tags:
    """The :class:`Tags` of an estimator instance or class.

    A class is asked through an instance built with its default parameters (scikit-learn
    estimators are constructible without arguments); objects that are not a
    :class:`CrowdEstimator` get the default tags.
    """
    if isinstance(est_or_class, type):
        if not issubclass(est_or_class, CrowdEstimator):
            return Tags()
        try:
            est = est_or_class()
        except TypeError:  # required constructor arguments: tags must not read parameters
            est = object.__new__(est_or_class)
        return est.__crowd_tags__()
    if isinstance(est_or_class, CrowdEstimator):
        return est_or_class.__crowd_tags__()
    return Tags()


def check_fitted(est: Any, attributes: Any = None) -> None:
    """Raise :class:`sklearn.exceptions.NotFittedError` unless ``est`` has been fitted.

    Delegates to :func:`sklearn.utils.validation.check_is_fitted`: an estimator that defines
    ``__sklearn_is_fitted__`` decides itself, otherwise the presence of fitted (trailing
    underscore) attributes, or of the given ``attributes``, counts.  (An object without a
    ``fit`` method is not an estimator: TypeError.)
    """
    msg = (f"This {type(est).__name__} instance is not fitted yet; call 'fit' with "
           "appropriate arguments before using this estimator.")
    check_is_fitted(est, attributes=attributes, msg=msg)


def resolve_random_state(random_state: Any) -> np.random.RandomState:
    """The ``numpy.random.RandomState`` a ``random_state`` parameter stands for.

    Parameters
    ----------
    random_state : None, int, RandomState or Generator
        ``int``: a new generator seeded with it (same seed, same stream);
        ``None``: a new generator seeded from fresh OS entropy, so results are *not*
        reproducible (scikit-learn's meaning of ``None``; it does not touch numpy's global
        generator); ``RandomState``: itself; ``Generator``: a ``RandomState`` drawing from the
        generator's own bit generator, so both advance the same stream.

    Raises
    ------
    ValueError
        For anything else (booleans included).
    """
    if random_state is None:
        return np.random.RandomState()
    if isinstance(random_state, np.random.RandomState):
        return random_state
    if isinstance(random_state, np.random.Generator):
        return np.random.RandomState(random_state.bit_generator)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, (bool, np.bool_)):
        return np.random.RandomState(int(random_state))
    raise ValueError(
        f"random_state must be None, an int, a numpy RandomState or Generator; got {random_state!r}"
    )


def resolve_generator(random_state: Any) -> np.random.Generator:
    """The ``numpy.random.Generator`` a ``random_state`` parameter stands for.

    Same meaning as :func:`resolve_random_state` for methods written against the newer numpy
    API: ``int`` -> ``numpy.random.default_rng(seed)``, ``None`` -> fresh entropy,
    ``Generator`` -> itself, ``RandomState`` -> a ``Generator`` over its bit generator.
    """
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.Generator(random_state._bit_generator)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, (bool, np.bool_)):
        return np.random.default_rng(int(random_state))
    raise ValueError(
        f"random_state must be None, an int, a numpy RandomState or Generator; got {random_state!r}"
    )



def resolve_seed(random_state: Any) -> int:
    """One integer seed (for torch and other seed-only APIs) standing for ``random_state``.

    An integer is returned as it is (so a seeded fit is reproducible and unchanged);
    ``None`` draws a seed from fresh entropy; a ``RandomState`` or ``Generator`` gives one
    draw from its stream.  Same meaning as :func:`resolve_random_state`.
    """
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, (bool, np.bool_)):
        return int(random_state)
    return int(resolve_random_state(random_state).randint(0, 2**31 - 1))
