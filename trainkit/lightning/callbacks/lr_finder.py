"""Lightning's ``lightning.pytorch.callbacks.lr_finder`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import LearningRateFinder

__all__ = ["LearningRateFinder"]
