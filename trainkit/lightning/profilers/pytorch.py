"""Lightning's ``lightning.pytorch.profilers.pytorch`` module name."""

from trainkit.profilers import PyTorchProfiler

__all__ = ["PyTorchProfiler"]
