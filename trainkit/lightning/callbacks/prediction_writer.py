"""Lightning's ``lightning.pytorch.callbacks.prediction_writer`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import BasePredictionWriter
from trainkit.callbacks.prediction_writer import WriteInterval

__all__ = ["BasePredictionWriter", "WriteInterval"]
