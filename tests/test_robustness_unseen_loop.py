"""Robustness on unseen data: fairness, active labelling, online EM and the report (QA loop)."""

import numpy as np
import pandas as pd
import pytest

from crowdlearn import CrowdLabels
from crowdlearn.fairness import group_report, worker_bias_table


def test_positive_class_spelt_as_a_number_against_text_labels_is_refused():
    """positive=1 (the default) against labels '0'/'1' read from a file counted no positive:
    every positive rate 0 and every TPR NaN, without a word."""
    data = CrowdLabels.from_frame(pd.DataFrame({"task": ["a", "a", "b", "b"], "worker": ["u", "v"] * 2,
                                                "label": ["0", "0", "1", "1"]}))
    pred = pd.Series(["0", "1"], index=["a", "b"])
    groups = pd.Series(["x", "y"], index=["a", "b"])
    with pytest.raises(ValueError, match="pass positive='1'"):
        group_report(pred, pred, groups)
    with pytest.raises(ValueError, match="pass positive='1'"):
        worker_bias_table(data, pred, groups)
    assert group_report(pred, pred, groups, positive="1")["positive_rate"].tolist() == [0.0, 1.0]
    # a positive class nobody predicted stays legal
    assert group_report(pred, None, groups, positive="2")["positive_rate"].tolist() == [0.0, 0.0]
