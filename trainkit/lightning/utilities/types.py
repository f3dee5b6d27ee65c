"""Lightning's ``lightning.pytorch.utilities.types`` names, served by trainkit."""

from __future__ import annotations

from trainkit.core.types import (
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

__all__ = [
    "EVAL_DATALOADERS",
    "STEP_OUTPUT",
    "TRAIN_DATALOADERS",
    "LRSchedulerConfig",
    "LRSchedulerConfigType",
    "LRSchedulerPLType",
    "LRSchedulerType",
    "LRSchedulerTypeUnion",
    "OptimizerConfig",
    "OptimizerLRScheduler",
    "OptimizerLRSchedulerConfig",
]
