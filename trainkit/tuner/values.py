"""Where a tuned value lives: the Module, its ``hparams``, the DataModule or its ``hparams``.

Lightning's rule (``lightning_hasattr`` / ``lightning_getattr`` / ``lightning_setattr``):
an attribute of the Module, a key of ``model.hparams``, an attribute of the
run's DataModule, or a key of its ``hparams``. The value is read from the first
place that has it, in that order, and written to every place that has it.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer


def _holders(trainer: Trainer, module: Module, name: str) -> list[Any]:
    found: list[Any] = []
    owners: list[Any] = [module]
    if trainer.datamodule is not None:
        owners.append(trainer.datamodule)
    for owner in owners:
        if hasattr(owner, name):
            found.append(owner)
        hparams = getattr(owner, "hparams", None)
        if isinstance(hparams, MutableMapping) and name in hparams:
            found.append(hparams)
    return found


def find_attribute(trainer: Trainer, module: Module, name: str) -> bool:
    """Whether the Module, the DataModule or one of their ``hparams`` holds ``name``.

    Args:
        trainer: the Trainer (its DataModule).
        module: the Module.
        name: the attribute's name.
    """
    return bool(_holders(trainer, module, name))


def get_attribute(trainer: Trainer, module: Module, name: str) -> Any:
    """The value of ``name`` from the first place that holds it.

    Args:
        trainer: the Trainer (its DataModule).
        module: the Module.
        name: the attribute's name.
    """
    holders = _holders(trainer, module, name)
    if not holders:
        raise AttributeError(_missing(name))
    first = holders[0]
    return first[name] if isinstance(first, MutableMapping) else getattr(first, name)


def set_attribute(trainer: Trainer, module: Module, name: str, value: Any) -> None:
    """Set ``name`` to ``value`` everywhere it is held.

    Args:
        trainer: the Trainer (its DataModule).
        module: the Module.
        name: the attribute's name.
        value: the new value.
    """
    holders = _holders(trainer, module, name)
    if not holders:
        raise AttributeError(_missing(name))
    for holder in holders:
        if isinstance(holder, MutableMapping):
            holder[name] = value
        else:
            setattr(holder, name, value)


def _missing(name: str) -> str:
    return (
        f"{name!r} is neither an attribute of the model nor a key of model.hparams, nor "
        "an attribute or hparams key of the DataModule. Store it in one of these places "
        "(e.g. self.save_hyperparameters() with that argument)."
    )
