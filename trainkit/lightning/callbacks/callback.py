"""Lightning's ``lightning.pytorch.callbacks.callback`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import Callback

__all__ = ["Callback"]
