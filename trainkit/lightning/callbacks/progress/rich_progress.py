"""Lightning's ``lightning.pytorch.callbacks.progress.rich_progress`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import RichProgressBar, RichProgressBarTheme

__all__ = ["RichProgressBar", "RichProgressBarTheme"]
