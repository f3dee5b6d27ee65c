"""Lightning's ``lightning.pytorch.accelerators`` names, served by trainkit."""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import submodule_or_missing
from trainkit.trainer.accelerators import (
    Accelerator,
    CPUAccelerator,
    CUDAAccelerator,
    MPSAccelerator,
    find_usable_cuda_devices,
)

__all__ = [
    "Accelerator",
    "CPUAccelerator",
    "CUDAAccelerator",
    "MPSAccelerator",
    "find_usable_cuda_devices",
]


def __getattr__(name: str) -> Any:
    return submodule_or_missing(__name__, name, __all__)
