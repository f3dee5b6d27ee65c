"""Lightning's ``lightning.pytorch.plugins.precision.half`` path, served by trainkit."""

from __future__ import annotations

from trainkit.lightning.plugins.precision import HalfPrecision

__all__ = ["HalfPrecision"]
