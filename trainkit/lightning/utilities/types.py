"""Lightning's ``lightning.pytorch.utilities.types`` names, served by trainkit."""

from __future__ import annotations

from torch.nn.parallel import DistributedDataParallel

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

# torch's class, which Lightning's module lists among its names too.
__all__ = [*types.__all__, "DistributedDataParallel"]
