"""Lightning's ``lightning.pytorch.core.datamodule`` names, served by trainkit."""

from __future__ import annotations

from trainkit.lightning.core import LightningDataModule

__all__ = ["LightningDataModule"]
