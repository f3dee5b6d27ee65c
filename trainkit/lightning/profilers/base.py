"""Lightning's ``lightning.pytorch.profilers.base`` names, served by trainkit."""

from __future__ import annotations

from trainkit.profilers import PassThroughProfiler

__all__ = ["PassThroughProfiler"]
