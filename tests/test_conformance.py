"""The shared conformance suite over every registered method, of every kind.

The registry (``crowdlearn.methods()``) is the only list: a newly registered method is
checked without editing this file; its tags choose the data and the applicable checks.
"""

from __future__ import annotations

import pytest

import crowdlearn
from crowdlearn.testing import parametrize_with_checks

# checks that fail today for a known reason, to be removed once the fix is merged:
# {(registry name, check name): reason}
KNOWN_FAILURES: dict[tuple[str, str], str] = {}


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny torch nets are many times slower when intra-op threads oversubscribe the cores."""
    try:
        import torch
    except ImportError:
        yield
        return
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _name_of(estimator) -> str:
    for name, cls in crowdlearn.methods().items():
        if type(estimator) is cls:
            return name
    return type(estimator).__name__


@parametrize_with_checks(list(crowdlearn.methods()))
def test_conformance(estimator, check, request):
    reason = KNOWN_FAILURES.get((_name_of(estimator), check.__name__))
    if reason is not None:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))
    check(estimator)
