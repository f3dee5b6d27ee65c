"""Loggers: where the Trainer writes scalar metrics and hyperparameters.

Importing this package is cheap: tensorboard and yaml are imported only when a
logger first writes.
"""

from trainkit.loggers.base import Logger
from trainkit.loggers.csv import CSVLogger
from trainkit.loggers.tensorboard import TensorBoardLogger

__all__ = ["CSVLogger", "Logger", "TensorBoardLogger"]
