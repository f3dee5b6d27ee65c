"""Lightning's ``lightning.pytorch.core.module`` names, served by trainkit."""

from __future__ import annotations

from trainkit.lightning.core import LightningModule

__all__ = ["LightningModule"]
