"""Lightning's ``lightning.pytorch.loggers`` names, served by trainkit's loggers."""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import missing
from trainkit.loggers import CSVLogger, Logger, TensorBoardLogger

__all__ = ["CSVLogger", "Logger", "TensorBoardLogger"]


def __getattr__(name: str) -> Any:
    raise missing(__name__, name, __all__)
