"""Lightning's ``lightning.pytorch.tuner.tuning`` names, served by trainkit."""

from __future__ import annotations

from trainkit.tuner import Tuner

__all__ = ["Tuner"]
