"""Lightning's ``lightning.pytorch.plugins.io.checkpoint_plugin`` path, served by trainkit."""

from __future__ import annotations

from trainkit.lightning.plugins.io import CheckpointIO

__all__ = ["CheckpointIO"]
