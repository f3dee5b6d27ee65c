"""Lightning's ``lightning.pytorch.plugins.io.async_plugin`` path, served by trainkit."""

from __future__ import annotations

from trainkit.lightning.plugins.io import AsyncCheckpointIO

__all__ = ["AsyncCheckpointIO"]
