"""Lightning's ``lightning.pytorch.loggers.logger`` names, served by trainkit."""

from __future__ import annotations

from trainkit.loggers import DummyLogger, Logger

__all__ = ["DummyLogger", "Logger"]
