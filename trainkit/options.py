"""``trainkit.options``, kept for the import paths the docs show.

Its home is :mod:`trainkit.trainer.options`."""

from trainkit.trainer.options import HardwareOptions, LoopOptions, OutputOptions, StepOptions

__all__ = ["HardwareOptions", "LoopOptions", "OutputOptions", "StepOptions"]
