"""Lightning's ``lightning.pytorch.profilers.profiler`` names, served by trainkit."""

from __future__ import annotations

from trainkit.profilers import Profiler

__all__ = ["Profiler"]
