"""Lightning's ``lightning.pytorch.callbacks.spike`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks.spike import SpikeDetection, TrainingSpikeException

__all__ = ["SpikeDetection", "TrainingSpikeException"]
