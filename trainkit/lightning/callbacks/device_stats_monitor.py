"""Lightning's ``lightning.pytorch.callbacks.device_stats_monitor`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import DeviceStatsMonitor

__all__ = ["DeviceStatsMonitor"]
