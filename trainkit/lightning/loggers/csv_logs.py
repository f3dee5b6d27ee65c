"""Lightning's ``lightning.pytorch.loggers.csv_logs`` names, served by trainkit."""

from __future__ import annotations

from trainkit.loggers import CSVLogger
from trainkit.loggers.csv import ExperimentWriter

__all__ = ["CSVLogger", "ExperimentWriter"]
