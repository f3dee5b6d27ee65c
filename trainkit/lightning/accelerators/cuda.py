"""Lightning's ``lightning.pytorch.accelerators.cuda`` path, served by trainkit."""

from __future__ import annotations

from trainkit.trainer.accelerators import CUDAAccelerator

__all__ = ["CUDAAccelerator"]
