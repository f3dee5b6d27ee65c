"""trainkit: a Lightning-style training framework on PyTorch.

The public API is importable from here: ``trainkit.Trainer``, ``trainkit.Module``,
``from trainkit import Callback``. Each name is imported on first use (PEP 562),
so that importing one of trainkit's lower layers (``trainkit.loops.state``,
``trainkit.strategies.base``) does not load the Trainer and everything above it,
and ``import trainkit`` costs little more than ``import torch``. Heavy optional
packages (tensorboard, omegaconf, tqdm) are likewise imported only when a
feature that needs them is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from trainkit.utilities.rank_zero import share_rank_with_lightning_utilities
from trainkit.version import __version__

if TYPE_CHECKING:
    from trainkit.callbacks.base import Callback
    from trainkit.checkpoint.files import CheckpointError, consolidate_checkpoint
    from trainkit.core.data import DataModule
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer
    from trainkit.utilities.rank_zero import rank_zero_only, rank_zero_print, rank_zero_warn
    from trainkit.utilities.seed import seed_everything

#: Public name -> the module that defines it.
_PUBLIC = {
    "Callback": "trainkit.callbacks.base",
    "CheckpointError": "trainkit.checkpoint.files",
    "consolidate_checkpoint": "trainkit.checkpoint.files",
    "DataModule": "trainkit.core.data",
    "Module": "trainkit.core.module",
    "Trainer": "trainkit.trainer.trainer",
    "rank_zero_only": "trainkit.utilities.rank_zero",
    "rank_zero_print": "trainkit.utilities.rank_zero",
    "rank_zero_warn": "trainkit.utilities.rank_zero",
    "seed_everything": "trainkit.utilities.seed",
}

__all__ = [
    "Callback",
    "CheckpointError",
    "DataModule",
    "Module",
    "Trainer",
    "__version__",
    "consolidate_checkpoint",
    "rank_zero_only",
    "rank_zero_print",
    "rank_zero_warn",
    "seed_everything",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module (or a subpackage: ``trainkit.callbacks``) on first use."""
    module = _PUBLIC.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
    else:
        try:
            value = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise  # the submodule exists, and something it imports is missing
            raise AttributeError(f"module 'trainkit' has no attribute {name!r}") from None
    globals()[name] = value  # later lookups do not come here again
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))


# Libraries that log through lightning_utilities need its rank set (as Lightning does).
share_rank_with_lightning_utilities()
