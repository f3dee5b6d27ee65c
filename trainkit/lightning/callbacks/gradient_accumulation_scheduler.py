"""Lightning's ``lightning.pytorch.callbacks.gradient_accumulation_scheduler`` names."""

from __future__ import annotations

from trainkit.callbacks import GradientAccumulationScheduler

__all__ = ["GradientAccumulationScheduler"]
