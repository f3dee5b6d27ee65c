"""Lightning's ``lightning.pytorch.accelerators.cpu`` path, served by trainkit."""

from __future__ import annotations

from trainkit.trainer.accelerators import CPUAccelerator

__all__ = ["CPUAccelerator"]
