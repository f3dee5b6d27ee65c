"""Lightning's ``lightning.pytorch.trainer`` names, served by trainkit."""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import submodule_or_missing
from trainkit.lightning._seed import seed_everything
from trainkit.lightning.trainer.trainer import Trainer

__all__ = ["Trainer", "seed_everything"]


def __getattr__(name: str) -> Any:
    # Lightning's submodules reached as attributes, as after importing Lightning.
    return submodule_or_missing(__name__, name, __all__)
