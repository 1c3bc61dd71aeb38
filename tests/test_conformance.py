"""The shared conformance suite over every registered truth-inference method."""

import pytest

from crowdlearn.registry import REGISTRY, get_method
from crowdlearn.testing import CHECKS


def _available():
    out = []
    for name in REGISTRY:
        try:
            cls = get_method(name)
        except ImportError:
            continue
        if getattr(cls, "_requires_features", False):
            continue  # toy crowds carry no features; covered by a features variant (tests/test_mmlc.py)
        out.append(name)
    return out


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", _available())
def test_conformance(name, check):
    check(name)
