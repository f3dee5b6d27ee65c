"""Lightning's ``lightning.pytorch.cli``: ``from trainkit.lightning.cli import LightningCLI``.

Built on jsonargparse, a dependency of trainkit; importing works without it, and
constructing a LightningCLI then says what to install.
"""

from typing import Any

from trainkit.cli import lightning_cli
from trainkit.cli.lightning_cli import ArgsType, SaveConfigCallback
from trainkit.cli.lightning_parser import (
    LightningArgumentParser,
    LRSchedulerCallable,
    OptimizerCallable,
    ReduceLROnPlateau,
)
from trainkit.cli.optimizers import instantiate_class
from trainkit.lightning.trainer.trainer import Trainer

__all__ = [
    "ArgsType",
    "LRSchedulerCallable",
    "LightningArgumentParser",
    "LightningCLI",
    "OptimizerCallable",
    "ReduceLROnPlateau",
    "SaveConfigCallback",
    "instantiate_class",
]


class LightningCLI(lightning_cli.LightningCLI):
    """trainkit's LightningCLI, building ``trainkit.lightning.Trainer`` unless told otherwise.

    As with Lightning's, the default logger then writes to ``lightning_logs/``. The
    arguments are those of :class:`trainkit.cli.lightning_cli.LightningCLI`.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(args) < 5:  # trainer_class is the fifth positional argument
            kwargs.setdefault("trainer_class", Trainer)
        super().__init__(*args, **kwargs)
