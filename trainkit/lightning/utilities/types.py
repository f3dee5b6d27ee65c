"""Lightning's ``lightning.pytorch.utilities.types`` names, served by trainkit."""

from __future__ import annotations

from trainkit.core import types
from trainkit.core.types import (  # noqa: F401 - Lightning's names, listed in types.__all__
    EVAL_DATALOADERS,
    STEP_OUTPUT,
    TRAIN_DATALOADERS,
    LRSchedulerConfig,
    LRSchedulerConfigType,
    LRSchedulerPLType,
    LRSchedulerType,
    LRSchedulerTypeUnion,
    OptimizerConfig,
    OptimizerLRScheduler,
    OptimizerLRSchedulerConfig,
)

__all__ = list(types.__all__)
