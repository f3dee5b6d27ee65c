"""Lightning's ``lightning.pytorch.accelerators.cpu`` path, served by trainkit.

``get_cpu_stats()`` is the system-wide CPU, memory and swap use in percent
(``cpu_percent``, ``cpu_vm_percent``, ``cpu_swap_percent``) that
``DeviceStatsMonitor`` logs on the CPU; it needs psutil (the ``psutil`` extra).
"""

from __future__ import annotations

from trainkit.callbacks.device_stats import cpu_stats as get_cpu_stats
from trainkit.trainer.accelerators import CPUAccelerator

__all__ = ["CPUAccelerator", "get_cpu_stats"]
