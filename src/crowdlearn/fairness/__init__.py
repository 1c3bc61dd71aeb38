"""Fairness of crowd labels across groups of tasks: per-group error rates and disparities of any
aggregator's output, each worker's error rates per group, group-conditional worker models and
fair decision thresholds."""

from .methods import fair_thresholds, split_workers_by_group
from .metrics import disparities, group_report, task_groups, worker_bias_table

__all__ = ["group_report", "disparities", "worker_bias_table", "task_groups", "split_workers_by_group",
           "fair_thresholds"]
