"""Lightning's ``lightning.pytorch.callbacks.checkpoint`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import Checkpoint

__all__ = ["Checkpoint"]
