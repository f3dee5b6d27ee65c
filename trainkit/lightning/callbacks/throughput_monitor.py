"""Lightning's ``lightning.pytorch.callbacks.throughput_monitor`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import ThroughputMonitor

__all__ = ["ThroughputMonitor"]
