"""Lightning's ``lightning.pytorch.loggers.mlflow`` names, served by trainkit."""

from __future__ import annotations

from trainkit.lightning.loggers import MLFlowLogger

__all__ = ["MLFlowLogger"]
