"""Lightning's ``lightning.pytorch.callbacks.stochastic_weight_avg`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import StochasticWeightAveraging

__all__ = ["StochasticWeightAveraging"]
