"""Lightning's ``lightning.pytorch.loggers`` names, served by trainkit's loggers."""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import submodule_or_missing
from trainkit.loggers import CSVLogger, Logger, MLflowLogger, TensorBoardLogger, WandbLogger

#: Lightning's spelling of the MLflow logger's name.
MLFlowLogger = MLflowLogger

__all__ = ["CSVLogger", "Logger", "MLFlowLogger", "TensorBoardLogger", "WandbLogger"]


def __getattr__(name: str) -> Any:
    return submodule_or_missing(__name__, name, __all__)
