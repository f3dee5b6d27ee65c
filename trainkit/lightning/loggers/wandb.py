"""Lightning's ``lightning.pytorch.loggers.wandb`` names, served by trainkit."""

from __future__ import annotations

from trainkit.lightning.fabric.utilities.logger import (
    _add_prefix,
    _convert_json_serializable,
    _convert_params,
    _sanitize_callable_params,
)
from trainkit.loggers import WandbLogger

__all__ = [
    "WandbLogger",
    "_add_prefix",
    "_convert_json_serializable",
    "_convert_params",
    "_sanitize_callable_params",
]
