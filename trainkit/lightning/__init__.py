"""Lightning's names for trainkit's classes: porting is changing the import.

Replace ``import lightning.pytorch as pl`` (or ``import lightning as L``) with
``import trainkit.lightning as pl`` and ``from lightning.pytorch.callbacks import
...`` with ``from trainkit.lightning.callbacks import ...`` (``pl.pytorch`` is this
package again, for ``from lightning import pytorch as pl`` and ``L.pytorch``)::

    import trainkit.lightning as L

    class Net(L.LightningModule): ...

    trainer = L.Trainer(max_epochs=3, callbacks=[L.callbacks.EarlyStopping("val_loss")])

The classes are trainkit's own (``L.LightningModule is trainkit.Module``), but for
the Trainer and the TensorBoard and CSV loggers: subclasses that log to Lightning's
``lightning_logs`` folder by default (trainkit's write to ``logs``). What trainkit
does differently from Lightning is listed in docs/porting.md, and a
Lightning name trainkit does not have fails on import with a message saying so.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from trainkit.callbacks.base import Callback
from trainkit.core.data import DataModule as LightningDataModule
from trainkit.core.module import Module as LightningModule
from trainkit.lightning import callbacks, loggers, profilers, tuner, utilities
from trainkit.lightning._missing import LIGHTNING_API_VERSION, submodule_or_missing
from trainkit.lightning._seed import seed_everything
from trainkit.lightning.trainer.trainer import Trainer
from trainkit.loops.state import RunningStage, TrainerFn, TrainerStatus
from trainkit.version import __version__ as trainkit_version

#: The Lightning release whose API this package follows (version checks in Lightning
#: projects take its code paths); trainkit's own version is ``trainkit.__version__``.
__version__ = LIGHTNING_API_VERSION

__all__ = [
    "Callback",
    "LightningDataModule",
    "LightningModule",
    "RunningStage",
    "Trainer",
    "TrainerFn",
    "TrainerStatus",
    "__version__",
    "callbacks",
    "cli_lightning_logo",
    "loggers",
    "profilers",
    "seed_everything",
    "strategies",
    "tuner",
    "utilities",
]


def cli_lightning_logo() -> None:
    """Print trainkit's name and version (Lightning's examples print a logo first)."""
    print(f"\ntrainkit {trainkit_version}\n")


def __getattr__(name: str) -> Any:
    # Loaded on first use: the strategies bring torch.distributed with them, and
    # Lightning's other subpackages (``L.plugins``, ``L.accelerators``, ``L.core``)
    # are reached as attributes, as after ``import lightning.pytorch``.
    if name == "strategies":
        return importlib.import_module("trainkit.lightning.strategies")
    if name == "pytorch":  # `from lightning import pytorch as pl`, `L.pytorch.Trainer`
        return importlib.import_module(__name__)
    return submodule_or_missing(__name__, name, __all__)


# As Lightning's import does: POSSIBLE_USER_WARNINGS=0 (or off) silences those warnings.
if os.environ.get("POSSIBLE_USER_WARNINGS", "").lower() in ("0", "off"):
    utilities.disable_possible_user_warnings()
