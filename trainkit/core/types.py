"""Type aliases for what a user's Module methods return and take (Lightning's names).

Annotations only: trainkit checks these values at run time where it reads them.

Example:
    >>> from trainkit.core.types import OptimizerLRScheduler, STEP_OUTPUT
    >>> class Net(trainkit.Module):  # doctest: +SKIP
    ...     def training_step(self, batch, batch_idx) -> STEP_OUTPUT: ...
    ...     def configure_optimizers(self) -> OptimizerLRScheduler: ...
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from torch import Tensor
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler, ReduceLROnPlateau
from typing_extensions import NotRequired, Required

from trainkit.core.optim import LRSchedulerConfig

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

#: What ``training_step`` (and the evaluation steps) return: a loss, a dict holding
#: ``"loss"`` and other values, or None (skip the step).
STEP_OUTPUT = Tensor | Mapping[str, Any] | None
#: Training data: a DataLoader, any iterable of batches, or a list/dict of DataLoaders.
TRAIN_DATALOADERS = Any
#: Evaluation data: a DataLoader, any iterable of batches, or several of them.
EVAL_DATALOADERS = Any

LRSchedulerTypeUnion = LRScheduler | ReduceLROnPlateau
LRSchedulerType = type[LRScheduler] | type[ReduceLROnPlateau]
LRSchedulerPLType = LRScheduler | ReduceLROnPlateau


class LRSchedulerConfigType(TypedDict, total=False):
    """A scheduler as ``configure_optimizers`` may describe it in a dict."""

    scheduler: Required[LRSchedulerTypeUnion]
    name: str | None
    interval: str
    frequency: int
    reduce_on_plateau: bool
    monitor: str | None
    strict: bool


class OptimizerConfig(TypedDict):
    """``{"optimizer": ...}``."""

    optimizer: Optimizer


class OptimizerLRSchedulerConfig(TypedDict):
    """``{"optimizer": ..., "lr_scheduler": ..., "monitor": ...}``."""

    optimizer: Optimizer
    lr_scheduler: LRSchedulerTypeUnion | LRSchedulerConfigType
    monitor: NotRequired[str]


#: Every form ``configure_optimizers`` may return.
OptimizerLRScheduler = (
    Optimizer
    | Sequence[Optimizer]
    | tuple[Sequence[Optimizer], Sequence[LRSchedulerTypeUnion | LRSchedulerConfig]]
    | OptimizerConfig
    | OptimizerLRSchedulerConfig
    | Sequence[OptimizerConfig]
    | Sequence[OptimizerLRSchedulerConfig]
    | None
)
