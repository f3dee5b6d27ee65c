"""Lightning's ``lightning.pytorch.loggers.tensorboard`` names, served by trainkit."""

from __future__ import annotations

from trainkit.loggers import TensorBoardLogger

__all__ = ["TensorBoardLogger"]
