"""Lightning's ``lightning.pytorch.loggers.wandb`` names, served by trainkit."""

from __future__ import annotations

from trainkit.loggers import WandbLogger

__all__ = ["WandbLogger"]
