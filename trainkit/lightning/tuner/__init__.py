"""Lightning's ``lightning.pytorch.tuner`` names, served by trainkit's tuner."""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import submodule_or_missing
from trainkit.lightning.tuner import lr_finder
from trainkit.tuner import Tuner

__all__ = ["Tuner", "lr_finder"]


def __getattr__(name: str) -> Any:
    # Lightning's submodules reached as attributes, as after importing Lightning.
    return submodule_or_missing(__name__, name, __all__)
