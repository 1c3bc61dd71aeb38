"""Pairwise comparisons and preferences: Bradley-Terry, Thurstone, Crowd-BT, NoisyBT."""
