"""Lightning's ``lightning.pytorch.profilers`` names, served by trainkit's profilers."""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import submodule_or_missing
from trainkit.profilers import (
    AdvancedProfiler,
    PassThroughProfiler,
    Profiler,
    PyTorchProfiler,
    SimpleProfiler,
)

__all__ = [
    "AdvancedProfiler",
    "PassThroughProfiler",
    "Profiler",
    "PyTorchProfiler",
    "SimpleProfiler",
]


def __getattr__(name: str) -> Any:
    return submodule_or_missing(__name__, name, __all__)
