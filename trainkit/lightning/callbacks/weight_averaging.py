"""Lightning's ``lightning.pytorch.callbacks.weight_averaging`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import EMAWeightAveraging, WeightAveraging

__all__ = ["EMAWeightAveraging", "WeightAveraging"]
