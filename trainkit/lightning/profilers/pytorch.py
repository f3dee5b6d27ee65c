"""Lightning's ``lightning.pytorch.profilers.pytorch`` module names."""

from trainkit.profilers import PyTorchProfiler, RegisterRecordFunction

__all__ = ["PyTorchProfiler", "RegisterRecordFunction"]
