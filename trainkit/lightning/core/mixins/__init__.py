"""Lightning's ``lightning.pytorch.core.mixins`` names, served by trainkit."""

from __future__ import annotations

from typing import Any

from trainkit.core.hyperparameters import HyperparametersMixin
from trainkit.lightning._missing import submodule_or_missing

__all__ = ["HyperparametersMixin"]


def __getattr__(name: str) -> Any:
    # Lightning's submodules reached as attributes, as after importing Lightning.
    return submodule_or_missing(__name__, name, __all__)
