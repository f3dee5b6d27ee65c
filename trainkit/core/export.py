"""Exporting a Module for inference: TorchScript and ONNX (``Module.to_torchscript``, ``to_onnx``).

Both run the module in eval mode and give every submodule its own mode back
afterwards; while they run, ``module.trainer`` reads as None instead of
raising, because TorchScript reads every attribute. ``TensorBoardLogger``'s
graph tracing runs the same way.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from trainkit.core.module import Module


def to_torchscript(
    module: Module, file_path: str | os.PathLike[str] | None, method: str, **kwargs: Any
) -> Any:
    """What ``module.to_torchscript`` does (see it for the arguments).

    Args:
        module: the module to compile.
        file_path: also save it there.
        method: "script" or "trace".
        **kwargs: passed to ``torch.jit.script`` / ``torch.jit.trace``.
    """
    with exporting(module):
        if method == "script":
            compiled = torch.jit.script(module, **kwargs)
        elif method == "trace":
            inputs = kwargs.pop("example_inputs", module.example_input_array)
            if inputs is None:
                raise ValueError(  # Lightning's words first
                    "Choosing method=`trace` requires either `example_inputs` or "
                    "`model.example_input_array` to be defined: pass "
                    "to_torchscript(method='trace', example_inputs=...) or set "
                    "self.example_input_array."
                )
            compiled = torch.jit.trace(module, example_inputs=inputs, **kwargs)  # type: ignore[no-untyped-call]
        else:
            raise ValueError(  # Lightning's words
                "The 'method' parameter only supports 'script' or 'trace', but value given was: "
                f"{method}"
            )
    if file_path is not None:
        torch.jit.save(compiled, os.fspath(file_path))
    return compiled


def to_onnx(
    module: Module, file_path: str | os.PathLike[str], input_sample: Any, **kwargs: Any
) -> None:
    """What ``module.to_onnx`` does (see it for the arguments).

    Args:
        module: the module to export.
        file_path: the ``.onnx`` file to write.
        input_sample: an input for the export (None: ``example_input_array``).
        **kwargs: passed to ``torch.onnx.export``.
    """
    sample = input_sample if input_sample is not None else module.example_input_array
    if sample is None:
        raise ValueError(
            "to_onnx needs an input: pass input_sample=... or set self.example_input_array."
        )
    with exporting(module):
        torch.onnx.export(module, sample, os.fspath(file_path), **kwargs)


@contextmanager
def exporting(module: torch.nn.Module) -> Iterator[None]:
    """``module`` in eval mode, its Modules detached from their Trainer for the while.

    TorchScript reads every attribute, ``self.trainer`` included, and the properties
    that read the Trainer (``global_step``, ``device``, ...): each Module's ``trainer``
    reads None instead of raising, and its link to a Trainer (which TorchScript
    cannot hold, after a fit) is set aside and put back afterwards. Afterwards every
    submodule is also back in its own mode (a frozen part may have been in eval mode).

    Args:
        module: the module to export or trace (any ``nn.Module``).
    """
    modes = [(part, part.training) for part in module.modules()]
    # trainkit Modules (this module does not import their class: module.py imports it)
    flagged: list[Any] = [part for part in module.modules() if hasattr(type(part), "_exporting")]
    trainers = [flag._trainer for flag in flagged]
    module.eval()
    for flag in flagged:
        flag._exporting, flag._trainer = True, None
    try:
        yield
    finally:
        for flag, trainer in zip(flagged, trainers, strict=True):
            flag._exporting, flag._trainer = False, trainer
        for part, training in modes:
            part.training = training
