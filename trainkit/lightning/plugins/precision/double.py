"""Lightning's ``lightning.pytorch.plugins.precision.double`` path, served by trainkit."""

from __future__ import annotations

from trainkit.lightning.plugins.precision import DoublePrecision

__all__ = ["DoublePrecision"]
