"""Lightning's ``lightning.pytorch.trainer.trainer`` names, served by trainkit."""

from __future__ import annotations

from trainkit.trainer.trainer import Trainer

__all__ = ["Trainer"]
