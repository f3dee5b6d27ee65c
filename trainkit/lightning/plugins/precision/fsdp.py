"""Lightning's ``lightning.pytorch.plugins.precision.fsdp`` path, served by trainkit."""

from __future__ import annotations

from trainkit.lightning.plugins.precision import FSDPPrecision

__all__ = ["FSDPPrecision"]
