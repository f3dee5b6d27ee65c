"""Lightning's ``lightning.pytorch.profilers.advanced`` module name."""

from trainkit.profilers import AdvancedProfiler

__all__ = ["AdvancedProfiler"]
