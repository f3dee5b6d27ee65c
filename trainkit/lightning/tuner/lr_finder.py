"""Lightning's ``lightning.pytorch.tuner.lr_finder`` names."""

from __future__ import annotations

from trainkit.tuner.lr_finder import LRFinder, _LRFinder

__all__ = ["LRFinder", "_LRFinder"]
