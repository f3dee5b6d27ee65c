"""Lightning's ``ModelParallelStrategy``: trainkit's, which takes Lightning's arguments."""

from __future__ import annotations

from trainkit.strategies.model_parallel import ModelParallelStrategy

__all__ = ["ModelParallelStrategy"]
