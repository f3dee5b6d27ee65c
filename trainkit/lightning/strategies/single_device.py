"""Lightning's ``lightning.pytorch.strategies.single_device`` names, served by trainkit."""

from __future__ import annotations

from trainkit.strategies.single import SingleDeviceStrategy

__all__ = ["SingleDeviceStrategy"]
