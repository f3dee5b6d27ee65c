"""Lightning's ``lightning.pytorch.strategies.strategy`` names, served by trainkit."""

from __future__ import annotations

from trainkit.strategies.base import Strategy

__all__ = ["Strategy"]
