"""Lightning's ``lightning.pytorch.callbacks.model_checkpoint`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import ModelCheckpoint

__all__ = ["ModelCheckpoint"]
