"""Lightning's ``lightning.pytorch.plugins.precision.precision`` path, served by trainkit."""

from __future__ import annotations

from trainkit.lightning.plugins.precision import Precision

__all__ = ["Precision"]
