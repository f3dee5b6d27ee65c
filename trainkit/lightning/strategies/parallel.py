"""Lightning's ``ParallelStrategy``: what a strategy over several devices or processes is.

For ``isinstance(trainer.strategy, ParallelStrategy)``: trainkit's DDP (and FSDP and
the hybrid strategy, built on it) and DataParallel strategies count as parallel ones.
It is a marker, not a base class to implement: a new trainkit strategy subclasses
``trainkit.strategies.Strategy`` (docs/strategies.md).
"""

from __future__ import annotations

from abc import ABC

from trainkit.strategies.ddp import DDPStrategy
from trainkit.strategies.dp import DataParallelStrategy

__all__ = ["ParallelStrategy"]


class ParallelStrategy(ABC):  # noqa: B024 - a marker: isinstance() is all it answers
    """The strategies that compute on several devices or processes."""


ParallelStrategy.register(DDPStrategy)
ParallelStrategy.register(DataParallelStrategy)
