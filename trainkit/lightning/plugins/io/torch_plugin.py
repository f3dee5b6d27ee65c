"""Lightning's ``lightning.pytorch.plugins.io.torch_plugin`` path, served by trainkit."""

from __future__ import annotations

from trainkit.lightning.plugins.io import TorchCheckpointIO

__all__ = ["TorchCheckpointIO"]
