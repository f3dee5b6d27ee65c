"""Lightning Fabric's ``lightning.fabric.loggers.logger`` names, served by trainkit."""

from __future__ import annotations

from trainkit.lightning.loggers.logger import rank_zero_experiment
from trainkit.loggers.base import BaseLogger as Logger
from trainkit.loggers.dummy import DummyExperiment as _DummyExperiment

__all__ = ["Logger", "_DummyExperiment", "rank_zero_experiment"]
