"""Lightning's ``lightning.pytorch.plugins.precision.amp`` path, served by trainkit."""

from __future__ import annotations

from trainkit.lightning.plugins.precision import MixedPrecision

__all__ = ["MixedPrecision"]
