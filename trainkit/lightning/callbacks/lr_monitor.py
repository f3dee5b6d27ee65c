"""Lightning's ``lightning.pytorch.callbacks.lr_monitor`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import LearningRateMonitor

__all__ = ["LearningRateMonitor"]
