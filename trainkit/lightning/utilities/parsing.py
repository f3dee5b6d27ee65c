"""Lightning's ``lightning.pytorch.utilities.parsing`` names, served by trainkit."""

from __future__ import annotations

from trainkit.core.hyperparameters import AttributeDict

__all__ = ["AttributeDict"]
