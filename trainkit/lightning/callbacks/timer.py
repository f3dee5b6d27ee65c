"""Lightning's ``lightning.pytorch.callbacks.timer`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import Timer
from trainkit.lightning.utilities.enums import LightningEnum

__all__ = ["Interval", "Timer"]


class Interval(LightningEnum):
    """When a :class:`Timer` checks the time (``Timer(interval=...)``); equal to the strings."""

    step = "step"
    epoch = "epoch"
