"""Lightning's ``lightning.pytorch.core`` names, served by trainkit's classes."""

from __future__ import annotations

from typing import Any

from trainkit.core.data import DataModule as LightningDataModule
from trainkit.core.module import Module as LightningModule
from trainkit.lightning._missing import submodule_or_missing

__all__ = ["LightningDataModule", "LightningModule"]


def __getattr__(name: str) -> Any:
    return submodule_or_missing(__name__, name, __all__)
