"""Lightning's ``lightning.pytorch.callbacks.on_exception_checkpoint`` names, served by trainkit."""

from __future__ import annotations

from trainkit.callbacks import OnExceptionCheckpoint

__all__ = ["OnExceptionCheckpoint"]
