"""Lightning's ``lightning.pytorch.callbacks.early_stopping`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import EarlyStopping
from trainkit.callbacks.early_stopping import EarlyStoppingReason

__all__ = ["EarlyStopping", "EarlyStoppingReason"]
