"""Active crowdsourcing: which task to label next and whom to ask, and replaying strategies on
recorded data (``crowdlearn next`` on the command line)."""

from .loop import ActiveLoop
from .replay import budget_summary, replay
from .strategies import (TASK_STRATEGIES, WORKER_STRATEGIES, expected_accuracy_gain, expected_information_gain,
                         task_scores, worker_scores)

__all__ = ["ActiveLoop", "replay", "budget_summary", "TASK_STRATEGIES", "WORKER_STRATEGIES",
           "expected_information_gain", "expected_accuracy_gain", "task_scores", "worker_scores"]
