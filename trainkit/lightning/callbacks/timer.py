"""Lightning's ``lightning.pytorch.callbacks.timer`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import Timer

__all__ = ["Timer"]
