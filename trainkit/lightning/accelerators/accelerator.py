"""Lightning's ``lightning.pytorch.accelerators.accelerator`` path, served by trainkit."""

from __future__ import annotations

from trainkit.trainer.accelerators import Accelerator

__all__ = ["Accelerator"]
