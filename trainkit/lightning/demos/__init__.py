"""Lightning's ``lightning.pytorch.demos`` names trainkit provides: the boring classes."""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import missing
from trainkit.lightning.demos.boring_classes import BoringDataModule, BoringModel, DemoModel

__all__ = ["BoringDataModule", "BoringModel", "DemoModel"]


def __getattr__(name: str) -> Any:
    raise missing(__name__, name, __all__)
