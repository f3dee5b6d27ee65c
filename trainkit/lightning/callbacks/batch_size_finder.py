"""Lightning's ``lightning.pytorch.callbacks.batch_size_finder`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import BatchSizeFinder

__all__ = ["BatchSizeFinder"]
