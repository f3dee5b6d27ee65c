"""Cutting a model into pipeline stages: partitioning, balancing, the in-process and
cross-rank pipelines."""
