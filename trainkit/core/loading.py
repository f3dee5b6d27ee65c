"""Building a Module from a checkpoint file: ``Module.load_from_checkpoint``.

The module is built with the hyperparameters the checkpoint saved, then its
weights are loaded; the file format itself is ``trainkit.checkpoint.files``'s.
"""

from __future__ import annotations

import inspect
import os
import sys
import warnings
from typing import IO, TYPE_CHECKING, Any, TypeVar

import torch

from trainkit.checkpoint.files import load, weights_only_load
from trainkit.checkpoint.weights import (
    init_arguments,
    load_hparams_file,
    load_module_state,
    saved_hyperparameters,
)
from trainkit.core.hyperparameters import CLASS_PATH_KEY
from trainkit.utilities.messages import UsageError

if TYPE_CHECKING:
    from trainkit.core.module import Module

ModuleT = TypeVar("ModuleT", bound="Module")
T = TypeVar("T")

#: The function ``load_from_checkpoint`` calls for a Module built from a config
#: (saved as ``_instantiator`` in its hyperparameters, see ``trainkit.cli.rebuild``).
INSTANTIATOR = "trainkit.core.loading.instantiate_module"
#: The ``_instantiator`` values ``load_from_checkpoint`` follows: trainkit's, and
#: Lightning's (a checkpoint its LightningCLI saved). No other import path stored in a
#: checkpoint is ever called.
#: The same function under Lightning's name with the ported prefix, which the ported
#: LightningCLI records (as ported projects' tests expect).
PORTED_INSTANTIATOR = "trainkit.lightning.cli.instantiate_module"
KNOWN_INSTANTIATORS = (
    INSTANTIATOR,
    "lightning.pytorch.cli.instantiate_module",
    PORTED_INSTANTIATOR,
)


def read_saved(
    cls: type[Any],
    checkpoint_path: str | os.PathLike[str] | IO[bytes],
    map_location: Any,
    hparams_file: str | os.PathLike[str] | None,
    weights_only: bool | None,
    overrides: dict[str, Any],
    prefix: str = "",
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A checkpoint, and what rebuilds ``cls`` (a Module, or a DataModule) from it.

    Args:
        cls: the class to build.
        checkpoint_path: a checkpoint file (trainkit's or Lightning's).
        map_location: where to load the tensors, as for ``torch.load``.
        hparams_file: a ``.yaml`` file whose hyperparameters replace the saved ones.
        weights_only: as for ``torch.load`` (None: True, unless torch's
            ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` is set); False unpickles objects.
        overrides: ``__init__`` arguments that replace the saved ones.
        prefix: ``"datamodule_"`` for a DataModule's hyperparameters.

    Returns:
        The checkpoint, the ``__init__`` arguments, and the saved hyperparameters.
    """
    safe = weights_only_load(weights_only)
    checkpoint = load(checkpoint_path, map_location, safe)
    arguments = init_arguments(
        cls.__init__, checkpoint, overrides, hparams_file, prefix, safe, checkpoint_path
    )
    return checkpoint, arguments, saved_hyperparameters(checkpoint, prefix)


def load_from_checkpoint(
    cls: type[ModuleT],
    checkpoint_path: str | os.PathLike[str] | IO[bytes],
    map_location: Any,
    hparams_file: str | os.PathLike[str] | None,
    strict: bool | None,
    weights_only: bool | None,
    overrides: dict[str, Any],
) -> ModuleT:
    """What ``cls.load_from_checkpoint`` does (see it for the arguments and errors).

    Args:
        cls: the Module class to build.
        checkpoint_path: a checkpoint file (trainkit's or Lightning's).
        map_location: where to load the tensors, as for ``torch.load``.
        hparams_file: a ``.yaml`` file whose hyperparameters replace the saved ones.
        strict: whether the ``state_dict`` keys must match (None: the module's
            ``strict_loading``, or True).
        weights_only: as for ``torch.load`` (None: True, so no code stored in the
            file runs); False, for a file you trust, unpickles any object in it.
        overrides: ``__init__`` arguments that replace the saved ones.
    """
    checkpoint, arguments, saved = read_saved(
        cls, checkpoint_path, map_location, hparams_file, weights_only, overrides
    )
    try:
        module = build_saved(cls, arguments, saved, overrides, hparams_file, checkpoint_path)
    except TypeError as error:
        raise TypeError(
            f"{cls.__name__}({', '.join(sorted(arguments))}) failed: {error}. The "
            f"checkpoint {checkpoint_path} saved these hyperparameters; pass the missing "
            "or renamed ones as keyword overrides, e.g. load_from_checkpoint(path, x=...)."
        ) from error
    module.configure_model()  # layers built late must exist to load into
    own_strict = getattr(module, "_strict_loading", None)  # None: the module did not say
    if own_strict is not None and strict is not None and strict != own_strict:
        raise ValueError(
            f"You set `.load_from_checkpoint(..., strict={strict!r})` which is in conflict "
            f"with `{cls.__name__}.strict_loading={own_strict!r}`. Please set the same value "
            "for both of them, or leave strict out."
        )
    strict = (own_strict if own_strict is not None else True) if strict is None else strict
    module.on_load_checkpoint(checkpoint)
    state = checkpoint["state_dict"]
    load_module_state(module, state, str(checkpoint_path), strict=bool(strict))
    device = next((t.device for t in state.values() if isinstance(t, torch.Tensor)), None)
    if device is None:
        warnings.warn(  # Lightning's words
            f"The state dict in {checkpoint_path!r} contains no parameters.", stacklevel=3
        )
    else:
        module.to(device)
    warnings.warn(
        f"{cls.__name__}.load_from_checkpoint returns the module in eval mode (Lightning "
        "returns it in train mode); call .train() on it to train it further.",
        stacklevel=3,
    )
    return module.eval()


def build_saved(
    cls: type[T],
    arguments: dict[str, Any],
    saved: dict[str, Any],
    overrides: dict[str, Any],
    hparams_file: str | os.PathLike[str] | None,
    path: object,
) -> T:
    """Build ``cls`` from a checkpoint's hyperparameters (a Module's or a DataModule's).

    Hyperparameters a config entry point saved (LightningCLI, the ``trainkit``
    command) hold ``_instantiator``: they are the config's arguments, built again by
    :func:`instantiate_module`. Only it (or Lightning's name for it) is called: an
    import path stored in a checkpoint is never run.

    Args:
        cls: the class to build.
        arguments: its ``__init__`` arguments from the checkpoint (``init_arguments``).
        saved: the checkpoint's hyperparameters as saved.
        overrides: keyword arguments that replace saved values.
        hparams_file: a YAML file that replaces the saved hyperparameters, if given.
        path: the checkpoint (a path or a file object), for messages.
    """
    if hparams_file is not None:
        saved = load_hparams_file(hparams_file)
    instantiator = saved.get("_instantiator")
    class_path = arguments.pop(CLASS_PATH_KEY, None)  # kept only for an __init__(**kwargs)
    arguments.pop("_instantiator", None)  # a config entry point's, not an __init__ argument
    if instantiator is None:
        return cls(**arguments)
    if instantiator not in KNOWN_INSTANTIATORS:
        warnings.warn(
            f"The checkpoint {path} names _instantiator={instantiator!r}, which trainkit "
            "does not call (only its own, or Lightning's LightningCLI's); building "
            f"{cls.__name__} from the saved hyperparameters directly.",
            stacklevel=4,
        )
        return cls(**arguments)
    given = {**saved, **overrides}
    if class_path is None and _is_framework_base(cls):
        class_path = given.get(CLASS_PATH_KEY)
    if class_path is None:  # as Lightning: only the arguments cls takes
        given = {key: value for key, value in given.items() if key in arguments}
    target = cls if class_path is None else imported_subclass(str(class_path), cls, path)
    built: T = instantiate_module(target, given)
    return built


def _is_framework_base(cls: type) -> bool:
    # trainkit's Module stands for Lightning's LightningModule, whose __init__ takes
    # **kwargs: a class that keeps that __init__ follows the saved class path too.
    init = getattr(cls, "__init__", None)
    return getattr(init, "__module__", None) == "trainkit.core.module" and (
        getattr(init, "__qualname__", None) == "Module.__init__"
    )


def imported_subclass(class_path: str, cls: type, path: object) -> type:
    """The class ``class_path`` names, which must be ``cls`` or a subclass of it, and
    already imported: no code a checkpoint names is imported or run.

    Args:
        class_path: ``module.Class``, as a config entry point saved it.
        cls: the class ``load_from_checkpoint`` was called on.
        path: the checkpoint, for messages.

    Raises:
        UsageError: no imported subclass of ``cls`` has that path.
    """
    module_name, _, name = class_path.rpartition(".")
    module = sys.modules.get(module_name)
    found = getattr(module, name, None) if module is not None else None
    if isinstance(found, type) and issubclass(found, cls):
        return found
    raise UsageError(
        f"{cls.__name__}.load_from_checkpoint: the checkpoint {path} was saved for the class "
        f"{class_path!r}, which is not an imported subclass of {cls.__name__} (trainkit "
        "builds only classes already imported; it imports no code a checkpoint names). "
        f"Import the module that defines it first, or call load_from_checkpoint on that class."
    )


def instantiate_module(cls: type, hyperparameters: dict[str, Any]) -> Any:
    """Build ``cls`` from hyperparameters a config entry point saved.

    ``load_from_checkpoint`` calls it when the hyperparameters hold ``_instantiator``:
    they are the config's arguments, so ``class_path`` entries among them are built
    into objects again (through jsonargparse, as the config was read).
    :func:`build_saved` chooses ``cls``: as Lightning, the class the saved
    ``_class_path`` names when loaded through ``Module`` itself (or a class whose
    ``__init__`` takes ``**kwargs``), else the class ``load_from_checkpoint`` was
    called on, with the arguments it takes.

    Args:
        cls: the class ``load_from_checkpoint`` was called on.
        hyperparameters: the saved hyperparameters, overrides applied.
    """
    from jsonargparse import ArgumentParser

    init_args = {k: v for k, v in hyperparameters.items() if not k.startswith("_")}
    built = cls
    parser = ArgumentParser(exit_on_error=False)
    named = inspect.signature(built).parameters
    extra = {key: init_args.pop(key) for key in list(init_args) if key not in named}
    value: dict[str, Any] = init_args
    if extra:  # values for __init__(**kwargs): a config's dict_kwargs
        parser.add_subclass_arguments(built, "module", fail_untyped=False)
        path = f"{built.__module__}.{built.__qualname__}"
        value = {"class_path": path, "init_args": init_args, "dict_kwargs": extra}
    else:
        parser.add_class_arguments(built, "module", fail_untyped=False, sub_configs=True)
    try:
        config = parser.parse_object({"module": value})
    except Exception as error:  # jsonargparse's ArgumentError: the saved arguments do not fit
        raise UsageError(
            f"{cls.__name__}.load_from_checkpoint: the saved hyperparameters do not fit "
            f"{built.__name__}'s arguments ({' '.join(str(error).split())}); pass the changed "
            "ones as keyword overrides, e.g. load_from_checkpoint(path, x=...)."
        ) from error
    return parser.instantiate(config).module
