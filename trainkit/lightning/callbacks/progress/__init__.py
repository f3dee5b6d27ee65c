"""Lightning's ``lightning.pytorch.callbacks.progress`` names, served by trainkit."""

from __future__ import annotations

from typing import Any

from trainkit.callbacks import ProgressBar, RichProgressBar, TQDMProgressBar
from trainkit.lightning._missing import submodule_or_missing

__all__ = ["ProgressBar", "RichProgressBar", "TQDMProgressBar"]


def __getattr__(name: str) -> Any:
    # Lightning's submodules reached as attributes, as after importing Lightning.
    return submodule_or_missing(__name__, name, __all__)
