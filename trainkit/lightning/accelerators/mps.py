"""Lightning's ``lightning.pytorch.accelerators.mps`` path, served by trainkit."""

from __future__ import annotations

from trainkit.trainer.accelerators import MPSAccelerator

__all__ = ["MPSAccelerator"]
