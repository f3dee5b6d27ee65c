"""Lightning Fabric's ``lightning.fabric.utilities.throughput`` names, served by trainkit.

``Throughput`` (samples, batches and FLOPs per second over a window),
``measure_flops`` (the FLOPs of a forward, or forward and backward, pass) and
``get_available_flops`` (a device's peak FLOPs, for the utilization): see
:mod:`trainkit.utilities.throughput`. Fabric's ``ThroughputMonitor`` needs a
Fabric, which trainkit does not have; the Trainer's is
``trainkit.lightning.callbacks.ThroughputMonitor``.
"""

from __future__ import annotations

from trainkit.utilities.throughput import Throughput, get_available_flops, measure_flops

__all__ = ["Throughput", "get_available_flops", "measure_flops"]
