"""The Trainer and its options: ``from trainkit.trainer import Trainer``.

``trainer.py`` builds a run's parts from its options and runs fit / validate /
test / predict; ``properties.py`` holds its read-only views; ``options.py`` the
option dataclasses every argument is checked by. The option dataclasses sit low
in the layers (callbacks read them), so ``Trainer`` is imported on first use, as
``trainkit``'s own public names are: ``import trainkit.trainer.options`` does not
load the Trainer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainkit.trainer.trainer import Trainer

__all__ = ["Trainer"]


def __getattr__(name: str) -> Any:
    if name == "Trainer":
        value = importlib.import_module("trainkit.trainer.trainer").Trainer
        globals()[name] = value
        return value
    raise AttributeError(f"module 'trainkit.trainer' has no attribute {name!r}")
