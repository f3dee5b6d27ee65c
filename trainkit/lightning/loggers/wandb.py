"""Lightning's ``lightning.pytorch.loggers.wandb`` names, served by trainkit."""

from __future__ import annotations

from trainkit.lightning.fabric.utilities.logger import (
    _add_prefix,
    _convert_json_serializable,
    _convert_params,
    _sanitize_callable_params,
)
from trainkit.lightning.loggers._folder import _LightningLogs
from trainkit.loggers import wandb


class WandbLogger(wandb.WandbLogger, _LightningLogs):
    """trainkit's :class:`~trainkit.loggers.WandbLogger` with Lightning's default project,
    ``lightning_logs`` (when neither ``project`` nor ``WANDB_PROJECT`` names one); the
    arguments are the same."""

    _default_project = "lightning_logs"


__all__ = [
    "WandbLogger",
    "_add_prefix",
    "_convert_json_serializable",
    "_convert_params",
    "_sanitize_callable_params",
]
