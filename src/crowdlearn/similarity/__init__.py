"""Similarity annotations (crowdclustering): answers "do items a and b belong together?"
and the methods that recover a clustering of the items, with annotator reliabilities."""

from .data import SimilarityAnswers, as_similarity_answers

__all__ = ["SimilarityAnswers", "as_similarity_answers"]
