"""Lightning's ``lightning.pytorch.callbacks.progress.progress_bar`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import ProgressBar
from trainkit.callbacks.progress import standard_metrics as get_standard_metrics

__all__ = ["ProgressBar", "get_standard_metrics"]
