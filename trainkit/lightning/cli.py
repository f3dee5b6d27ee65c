"""Lightning's ``lightning.pytorch.cli``: ``from trainkit.lightning.cli import LightningCLI``.

Built on jsonargparse, a dependency of trainkit; importing works without it, and
constructing a LightningCLI then says what to install.
"""

from typing import Any, Union

from torch.optim.lr_scheduler import LRScheduler

from trainkit.cli import lightning_cli
from trainkit.cli.lightning_cli import ArgsType, SaveConfigCallback
from trainkit.cli.lightning_parser import (
    LR_SCHEDULER_TYPES,
    LightningArgumentParser,
    LRSchedulerCallable,
    OptimizerCallable,
    ReduceLROnPlateau,
)
from trainkit.cli.optimizers import instantiate_class
from trainkit.core.loading import PORTED_INSTANTIATOR, instantiate_module
from trainkit.lightning.trainer.trainer import Trainer

__all__ = [
    "ArgsType",
    "LRSchedulerCallable",
    "LRSchedulerType",
    "LRSchedulerTypeTuple",
    "LRSchedulerTypeUnion",
    "LightningArgumentParser",
    "LightningCLI",
    "OptimizerCallable",
    "ReduceLROnPlateau",
    "SaveConfigCallback",
    "instantiate_class",
    "instantiate_module",
]

#: The LR scheduler base classes ``--lr_scheduler`` takes (Lightning's names for them).
LRSchedulerTypeTuple = LR_SCHEDULER_TYPES
LRSchedulerTypeUnion = Union[LRScheduler, ReduceLROnPlateau]  # noqa: UP007 (a runtime alias)
LRSchedulerType = Union[type[LRScheduler], type[ReduceLROnPlateau]]  # noqa: UP007
#: Lightning's flag for jsonargparse with signature support: trainkit requires jsonargparse.
_JSONARGPARSE_SIGNATURES_AVAILABLE = True


class LightningCLI(lightning_cli.LightningCLI):
    """trainkit's LightningCLI, building ``trainkit.lightning.Trainer`` unless told otherwise.

    As with Lightning's, the default logger then writes to ``lightning_logs/``. The
    arguments are those of :class:`trainkit.cli.lightning_cli.LightningCLI`.
    """

    # Lightning's name for the function, under the ported prefix (the same function).
    _instantiator_path = PORTED_INSTANTIATOR

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(args) < 5:  # trainer_class is the fifth positional argument
            kwargs.setdefault("trainer_class", Trainer)
        super().__init__(*args, **kwargs)
