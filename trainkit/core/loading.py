"""Building a Module from a checkpoint file: ``Module.load_from_checkpoint``.

The module is built with the hyperparameters the checkpoint saved, then its
weights are loaded; the file format itself is ``trainkit.checkpoint.files``'s.
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any, TypeVar

import torch

from trainkit.checkpoint.files import load
from trainkit.checkpoint.weights import init_arguments, load_module_state

if TYPE_CHECKING:
    from trainkit.core.module import Module

ModuleT = TypeVar("ModuleT", bound="Module")


def load_from_checkpoint(
    cls: type[ModuleT],
    checkpoint_path: str | os.PathLike[str],
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
        weights_only: False is refused with a warning (trainkit always loads
            with ``weights_only=True``).
        overrides: ``__init__`` arguments that replace the saved ones.
    """
    # stacklevel=3: the warnings name the line that called load_from_checkpoint.
    if weights_only is False:
        warnings.warn(
            "load_from_checkpoint(weights_only=False): trainkit always loads checkpoints "
            "with weights_only=True, so no code stored in the file runs; a file that "
            "needs unpickling of arbitrary objects cannot be loaded.",
            stacklevel=3,
        )
    checkpoint = load(checkpoint_path, map_location=map_location)
    arguments = init_arguments(cls.__init__, checkpoint, overrides, hparams_file)
    try:
        module = cls(**arguments)
    except TypeError as error:
        raise TypeError(
            f"{cls.__name__}({', '.join(sorted(arguments))}) failed: {error}. The "
            f"checkpoint {checkpoint_path} saved these hyperparameters; pass the missing "
            "or renamed ones as keyword overrides, e.g. load_from_checkpoint(path, x=...)."
        ) from error
    module.configure_model()  # layers built late must exist to load into
    own_strict = getattr(module, "strict_loading", None)
    if own_strict is not None and strict is not None and strict != own_strict:
        raise ValueError(
            f"load_from_checkpoint(..., strict={strict!r}) contradicts "
            f"{cls.__name__}.strict_loading={own_strict!r}; set the same value for both, "
            "or leave strict out."
        )
    strict = (own_strict if own_strict is not None else True) if strict is None else strict
    module.on_load_checkpoint(checkpoint)
    state = checkpoint["state_dict"]
    load_module_state(module, state, str(checkpoint_path), strict=bool(strict))
    device = next((t.device for t in state.values() if isinstance(t, torch.Tensor)), None)
    if device is None:
        warnings.warn(f"The checkpoint {checkpoint_path} holds no parameters.", stacklevel=3)
    else:
        module.to(device)
    warnings.warn(
        f"{cls.__name__}.load_from_checkpoint returns the module in eval mode (Lightning "
        "returns it in train mode); call .train() on it to train it further.",
        stacklevel=3,
    )
    return module.eval()
