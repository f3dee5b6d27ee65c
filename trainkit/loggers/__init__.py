"""Loggers: where the Trainer writes scalar metrics and hyperparameters.

Importing this package is cheap: tensorboard, yaml, mlflow and wandb are
imported only when a logger first writes. MLflow and Weights & Biases are
optional: ``pip install "trainkit[mlflow]"`` / ``"trainkit[wandb]"``.
"""

from trainkit.loggers.base import Logger
from trainkit.loggers.csv import CSVLogger
from trainkit.loggers.mlflow import MLflowLogger
from trainkit.loggers.tensorboard import TensorBoardLogger
from trainkit.loggers.wandb import WandbLogger

__all__ = [
    "CSVLogger",
    "Logger",
    "MLflowLogger",
    "TensorBoardLogger",
    "WandbLogger",
    "build_loggers",
]


def build_loggers(logger: bool | Logger | list[Logger] | None, root_dir: str) -> list[Logger]:
    """The loggers ``Trainer(logger=...)`` asks for.

    Args:
        logger: True for a TensorBoard logger under ``root_dir``, False or None for
            none, or a Logger / list of Loggers.
        root_dir: the Trainer's ``default_root_dir``.
    """
    if logger is True:
        return [TensorBoardLogger(root_dir)]
    if logger is None or logger is False:
        return []
    loggers = [logger] if isinstance(logger, Logger) else list(logger)
    for item in loggers:
        if not isinstance(item, Logger):
            raise TypeError(f"logger must be a trainkit Logger, got {type(item).__name__}.")
    return loggers
