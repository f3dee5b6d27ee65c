"""Lightning's ``lightning.pytorch.trainer`` names, served by trainkit."""

from __future__ import annotations

from trainkit.seed import seed_everything
from trainkit.trainer import Trainer

__all__ = ["Trainer", "seed_everything"]
