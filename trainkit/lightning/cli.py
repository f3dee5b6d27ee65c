"""Lightning's ``lightning.pytorch.cli``: ``from trainkit.lightning.cli import LightningCLI``.

Built on jsonargparse, a dependency of trainkit; importing works without it, and
constructing a LightningCLI then says what to install.
"""

from trainkit.cli.lightning_cli import LightningCLI, SaveConfigCallback
from trainkit.cli.lightning_parser import (
    LightningArgumentParser,
    LRSchedulerCallable,
    OptimizerCallable,
    ReduceLROnPlateau,
)
from trainkit.cli.optimizers import instantiate_class

__all__ = [
    "LRSchedulerCallable",
    "LightningArgumentParser",
    "LightningCLI",
    "OptimizerCallable",
    "ReduceLROnPlateau",
    "SaveConfigCallback",
    "instantiate_class",
]
