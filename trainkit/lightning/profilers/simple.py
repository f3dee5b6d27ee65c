"""Lightning's ``lightning.pytorch.profilers.simple`` module name."""

from trainkit.profilers import SimpleProfiler

__all__ = ["SimpleProfiler"]
