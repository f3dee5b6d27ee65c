"""Lightning's ``lightning.pytorch.trainer`` names, served by trainkit."""

from __future__ import annotations

from trainkit.trainer.trainer import Trainer
from trainkit.utilities.seed import seed_everything

__all__ = ["Trainer", "seed_everything"]
