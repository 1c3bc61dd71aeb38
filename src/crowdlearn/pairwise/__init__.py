"""Pairwise comparisons and preferences: which of two items is better, or a tie.

Answer table :class:`~crowdlearn.pairwise.data.Comparisons`; methods (registered under kind
``"pairwise"``): ``bt`` (:class:`~crowdlearn.pairwise.bt.BradleyTerry`), ``thurstone``,
``crowd-bt``, ``noisy-bt``.  Preference annotations for model alignment (prompt, two
responses, a/b/tie) and their DPO export: :mod:`crowdlearn.pairwise.preferences`.
"""

from .data import Comparisons, read_truth

__all__ = ["Comparisons", "read_truth"]
