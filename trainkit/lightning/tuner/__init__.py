"""Lightning's ``lightning.pytorch.tuner`` names, served by trainkit's tuner."""

from __future__ import annotations

from trainkit.lightning.tuner import lr_finder
from trainkit.tuner import Tuner

__all__ = ["Tuner", "lr_finder"]
