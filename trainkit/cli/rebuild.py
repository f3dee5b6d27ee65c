"""Modules built from a config save that config, so ``load_from_checkpoint`` rebuilds them.

A Module whose ``__init__`` takes classes given in the config as ``class_path``
entries (an encoder, a loss) receives objects, which a checkpoint cannot keep;
``save_hyperparameters()`` would record them or, ignored, leave
``load_from_checkpoint`` unable to build the module. While LightningCLI
(``load_from_checkpoint_support=True``, the default) or the ``trainkit`` command
builds the Module or DataModule its config names, ``save_hyperparameters()``
records the config's arguments instead (the ``class_path`` entries as written)
and ``_instantiator`` (``trainkit.core.loading.instantiate_module``), as Lightning's
LightningCLI records them. ``Module.load_from_checkpoint`` sees
``_instantiator`` and calls it, which builds the classes again through jsonargparse.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from trainkit.core.hyperparameters import given_hyperparameters
from trainkit.core.loading import INSTANTIATOR


def class_path(cls: type) -> str:
    """``package.module.Class`` of ``cls``."""
    return f"{cls.__module__}.{cls.__qualname__}"


def names_class(path: str, cls: type) -> bool:
    """Whether the config's ``path`` names ``cls``: the path of the module defining it, or
    of a package that re-exports it (``package.Class`` for ``package.module.Class``).

    Example:
        >>> from collections import OrderedDict
        >>> names_class("collections.OrderedDict", OrderedDict)
        True
        >>> names_class("collections.abc.Mapping", OrderedDict)
        False
    """
    if path == class_path(cls):
        return True
    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name, None) is cls
    except (ImportError, ValueError):  # not a module path
        return False


def build_recording(
    cls: type,
    init_args: dict[str, Any],
    build: Callable[[], Any] | None = None,
    instantiator: str = INSTANTIATOR,
) -> Any:
    """Build ``cls`` (``build()``, or ``cls(**init_args)``) recording the config's arguments.

    Args:
        cls: the class to build.
        init_args: its arguments as the config gives them (plain containers).
        build: how to build it, when not ``cls(**init_args)`` (e.g. with the
            ``class_path`` arguments already built into objects).
        instantiator: the import path recorded as ``_instantiator`` (one of
            ``trainkit.core.loading.KNOWN_INSTANTIATORS``).
    """
    with given_hyperparameters(cls, {**init_args, "_instantiator": instantiator}):
        return build() if build is not None else cls(**init_args)
