"""Lightning's ``lightning.pytorch.loggers.logger`` names, served by trainkit."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from trainkit.loggers import DummyLogger, Logger
from trainkit.loggers.dummy import DummyExperiment

__all__ = ["DummyExperiment", "DummyLogger", "Logger", "rank_zero_experiment"]


def rank_zero_experiment(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Wrap a custom logger's ``experiment`` property: the real one on global rank 0 only.

    Elsewhere the property gives a :class:`~trainkit.loggers.dummy.DummyExperiment`,
    whose every method does nothing, so the run is created by rank 0 alone.

    Example:
        >>> class MyLogger(Logger):
        ...     @property
        ...     @rank_zero_experiment
        ...     def experiment(self):
        ...         return "the run"
    """
    from trainkit.utilities.rank_zero import global_rank

    @functools.wraps(fn)
    def experiment(self: Any) -> Any:
        if global_rank() > 0:
            return DummyExperiment()
        return fn(self)

    return experiment
