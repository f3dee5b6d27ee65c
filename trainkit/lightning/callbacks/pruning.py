"""Lightning's ``lightning.pytorch.callbacks.pruning`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import ModelPruning

__all__ = ["ModelPruning"]
