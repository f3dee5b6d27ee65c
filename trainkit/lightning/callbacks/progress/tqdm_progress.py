"""Lightning's ``lightning.pytorch.callbacks.progress.tqdm_progress`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import TQDMProgressBar

__all__ = ["TQDMProgressBar"]
