"""The shared conformance suite over every registered truth-inference method."""

import pytest

from crowdlearn.registry import REGISTRY, get_method
from crowdlearn.testing import CHECKS


def _available():
    out = []
    for name in REGISTRY:
        try:
            get_method(name)
        except ImportError:
            continue
        out.append(name)
    return out


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", _available())
def test_conformance(name, check):
    check(name)
