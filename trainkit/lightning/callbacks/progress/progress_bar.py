"""Lightning's ``lightning.pytorch.callbacks.progress.progress_bar`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import ProgressBar

__all__ = ["ProgressBar"]
