"""Where a tuned value lives: the Module, its ``hparams``, the DataModule or its ``hparams``.

Lightning's rule (``lightning_hasattr`` / ``lightning_getattr`` / ``lightning_setattr``,
also in ``trainkit.lightning.utilities.parsing``, which use these functions): an
attribute of the Module, a key of ``model.hparams``, an attribute of the run's
DataModule, or a key of its ``hparams``, looked at in that order. The value is
read from the last place that has it (the DataModule's, which builds the
dataloaders, over the Module's) and written to every place that has it.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer


def holders(module: Any, datamodule: Any, name: str) -> list[Any]:
    """The places that hold ``name``, in lookup order (objects, or ``hparams``: mappings,
    or namespaces that answer ``in``).

    Args:
        module: the Module.
        datamodule: the run's DataModule (None: none).
        name: the attribute's name.
    """
    found: list[Any] = []
    for owner in (module, datamodule):
        if owner is None:
            continue
        if hasattr(owner, name):
            found.append(owner)
        hparams = getattr(owner, "hparams", None)
        if hparams is not None and _contains(hparams, name):
            found.append(hparams)
    return found


def _contains(hparams: Any, name: str) -> bool:
    # A mapping, or (as Lightning allows) any hparams that answers `in`: an
    # argparse.Namespace, read and written as attributes.
    try:
        return name in hparams
    except TypeError:
        return False


def held(module: Any, datamodule: Any, name: str, owner: str = "the model") -> list[Any]:
    """:func:`holders`, never empty.

    Args:
        module: the Module.
        datamodule: the run's DataModule (None: none).
        name: the attribute's name.
        owner: what was asked, for the error (e.g. the Module's class name).

    Raises:
        AttributeError: no place holds ``name`` (see :func:`missing`).
    """
    places = holders(module, datamodule, name)
    if not places:
        raise missing(name, owner)
    return places


def read(places: list[Any], name: str) -> Any:
    """The value of ``name`` in the last of ``places`` (from :func:`holders`; not empty).

    Args:
        places: where ``name`` is held.
        name: the attribute's name.
    """
    last = places[-1]
    return last[name] if isinstance(last, Mapping) else getattr(last, name)


def write(places: list[Any], name: str, value: Any) -> None:
    """Set ``name`` to ``value`` in each of ``places`` (from :func:`holders`).

    Args:
        places: where ``name`` is held.
        name: the attribute's name.
        value: the new value.
    """
    for place in places:
        if isinstance(place, MutableMapping):
            place[name] = value
        else:
            setattr(place, name, value)


def missing(name: str, owner: str = "the model") -> AttributeError:
    """The error for a ``name`` none of the places holds, saying where to put it.

    Args:
        name: the attribute's name.
        owner: what was asked (e.g. the Module's class name).
    """
    return AttributeError(  # Lightning's words first
        f"{name} is neither stored in the model namespace nor the `hparams` namespace/dict, "
        f"nor the datamodule: {name!r} is neither an attribute of {owner} nor a key of its "
        "hparams, nor an attribute or hparams key of the DataModule its Trainer runs. Store "
        f"it in one of these places (self.{name} = ... in __init__, or "
        "self.save_hyperparameters() with that argument)."
    )


def find_attribute(trainer: Trainer, module: Module, name: str) -> bool:
    """Whether the Module, the DataModule or one of their ``hparams`` holds ``name``.

    Args:
        trainer: the Trainer (its DataModule).
        module: the Module.
        name: the attribute's name.
    """
    return bool(holders(module, trainer.datamodule, name))


def get_attribute(trainer: Trainer, module: Module, name: str) -> Any:
    """The value of ``name`` from the last place that holds it.

    Args:
        trainer: the Trainer (its DataModule).
        module: the Module.
        name: the attribute's name.
    """
    return read(held(module, trainer.datamodule, name), name)


def set_attribute(trainer: Trainer, module: Module, name: str, value: Any) -> None:
    """Set ``name`` to ``value`` everywhere it is held.

    Args:
        trainer: the Trainer (its DataModule).
        module: the Module.
        name: the attribute's name.
        value: the new value.
    """
    write(held(module, trainer.datamodule, name), name, value)
