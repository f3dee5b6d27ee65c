"""Lightning's ``lightning.pytorch.callbacks.progress`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import ProgressBar, RichProgressBar, TQDMProgressBar

__all__ = ["ProgressBar", "RichProgressBar", "TQDMProgressBar"]
