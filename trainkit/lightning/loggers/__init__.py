"""Lightning's ``lightning.pytorch.loggers`` names, served by trainkit's loggers.

The TensorBoard and CSV loggers write to ``lightning_logs`` by default, as Lightning's do
(trainkit's own: ``logs``), and the W&B logger's default project is ``lightning_logs``
(trainkit's own: ``trainkit_logs``).
"""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import submodule_or_missing
from trainkit.lightning.loggers.csv_logs import CSVLogger
from trainkit.lightning.loggers.tensorboard import TensorBoardLogger
from trainkit.lightning.loggers.wandb import WandbLogger
from trainkit.loggers import Logger, MLflowLogger

#: Lightning's spelling of the MLflow logger's name.
MLFlowLogger = MLflowLogger

__all__ = ["CSVLogger", "Logger", "MLFlowLogger", "TensorBoardLogger", "WandbLogger"]


def __getattr__(name: str) -> Any:
    return submodule_or_missing(__name__, name, __all__)
