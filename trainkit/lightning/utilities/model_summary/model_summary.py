"""Lightning's ``lightning.pytorch.utilities.model_summary.model_summary``, on trainkit's summary.

``ModelSummary(model, max_depth=1)`` prints the table ``Trainer.fit`` prints (str()),
and answers Lightning's questions about it: the listed layers' names, types and
parameter counts, and the totals. ``summarize(module, max_depth)`` returns one.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import nn

from trainkit.callbacks.model_summary import (
    format_table,
    human_readable_count,
    summarized_modules,
    summary_table,
)
from trainkit.callbacks.summary_forward import UNKNOWN

__all__ = [
    "LayerSummary",
    "ModelSummary",
    "get_formatted_model_size",
    "get_human_readable_count",
    "summarize",
]


def _size(value: Any) -> Any:
    # A tensor's shape as a list; several, as a list of those; "?" for anything else.
    if isinstance(value, torch.Tensor):
        return list(value.shape)
    if isinstance(value, (list, tuple)):
        return [_size(item) for item in value]
    return UNKNOWN


class LayerSummary:
    """One layer of a summary: its type, parameter count, mode, and input and output sizes.

    The sizes are those of the first call of ``module`` after this object is made
    (a forward hook records them, then goes), ``"?"`` before one.

    Example:
        >>> layer = LayerSummary(torch.nn.Conv2d(3, 8, 3))
        >>> layer.layer_type, layer.num_parameters, layer.in_size
        ('Conv2d', 224, '?')
        >>> _ = layer._module(torch.rand(1, 3, 5, 5))
        >>> layer.in_size, layer.out_size
        ([1, 3, 5, 5], [1, 8, 3, 3])
    """

    def __init__(self, module: nn.Module) -> None:
        self._module = module
        self._in_size: Any = UNKNOWN
        self._out_size: Any = UNKNOWN
        scripted = isinstance(module, torch.jit.ScriptModule)  # takes no hooks: sizes unknown
        self._hook_handle: Any = None if scripted else module.register_forward_hook(self._record)

    def _record(self, module: nn.Module, inputs: Any, output: Any) -> None:
        self._in_size = _size(inputs[0] if len(inputs) == 1 else list(inputs))
        self._out_size = _size(output)
        self.detach_hook()

    def detach_hook(self) -> None:
        """Stop recording sizes (the hook is removed after the first call anyway)."""
        if self._hook_handle is not None:
            self._hook_handle.remove()  # the handle stays, as Lightning's: removing is idempotent

    @property
    def in_size(self) -> Any:
        return self._in_size

    @property
    def out_size(self) -> Any:
        return self._out_size

    @property
    def layer_type(self) -> str:
        return type(self._module).__name__

    @property
    def num_parameters(self) -> int:
        return sum(p.numel() for p in self._module.parameters())

    @property
    def training(self) -> bool:
        return self._module.training


class ModelSummary:
    """The summary of ``model``'s layers down to ``max_depth`` (-1: all; 0: totals only).

    Example:
        >>> import torch
        >>> summary = ModelSummary(torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.ReLU()))
        >>> summary.layer_names, summary.layer_types, summary.param_nums
        (['0', '1'], ['Linear', 'ReLU'], [10, 0])
        >>> summary.total_parameters, summary.trainable_parameters
        (10, 10)
    """

    def __init__(self, model: nn.Module, max_depth: int = 1) -> None:
        self._model = model
        self._max_depth = max_depth
        self._table = summary_table(model, max_depth)

    def _counted(self, count: int) -> int:
        # A parameter count read while lazy parameters count 0 warns: Lightning's words first.
        if self._table.note is not None:
            warnings.warn(
                "The total number of parameters detected may be inaccurate because the model "
                "contains an instance of `UninitializedParameter`. To get an accurate number, set "
                f"`self.example_input_array` in your LightningModule. {self._table.note}",
                UserWarning,
                stacklevel=3,
            )
        return count

    @property
    def max_depth(self) -> int:
        return self._max_depth

    @property
    def named_modules(self) -> list[tuple[str, nn.Module]]:
        """The listed submodules, with their names."""
        return summarized_modules(self._model, self._max_depth)

    @property
    def layer_names(self) -> list[str]:
        return [name for name, _ in self.named_modules]

    @property
    def layer_types(self) -> list[str]:
        return [type(module).__name__ for _, module in self.named_modules]

    @property
    def param_nums(self) -> list[int]:
        return [sum(p.numel() for p in module.parameters()) for _, module in self.named_modules]

    @property
    def training_modes(self) -> list[bool]:
        return [module.training for _, module in self.named_modules]

    @property
    def total_parameters(self) -> int:
        return self._counted(self._table.total_parameters)

    @property
    def trainable_parameters(self) -> int:
        return self._counted(self._table.trainable_parameters)

    @property
    def total_layer_params(self) -> int:
        return sum(self.param_nums)

    @property
    def model_size(self) -> float:
        """The parameters' size in MB."""
        return self._table.model_size

    @property
    def total_flops(self) -> int:
        """The forward FLOPs on the model's ``example_input_array`` (0 without one)."""
        return self._table.total_flops or 0

    @property
    def in_sizes(self) -> list[Any]:
        """Each listed layer's input sizes in the pass of ``example_input_array``
        (``[3, 4]``; several as a list; ``"?"`` without an example or where not run)."""
        forward = self._table.forward
        return list(forward.input_shapes) if forward else [UNKNOWN] * len(self.named_modules)

    @property
    def out_sizes(self) -> list[Any]:
        """Each listed layer's output sizes in that pass (as :attr:`in_sizes`)."""
        forward = self._table.forward
        return list(forward.output_shapes) if forward else [UNKNOWN] * len(self.named_modules)

    @property
    def flop_counts(self) -> dict[str, dict[Any, int]]:
        """Each listed layer's forward FLOPs by operator (empty without an example)."""
        forward = self._table.forward
        counts = forward.flop_counts if forward else [{} for _ in self.named_modules]
        return dict(zip(self.layer_names, counts, strict=True))

    @property
    def _layer_summary(self) -> dict[str, LayerSummary]:
        # Lightning's private table of the listed layers, which projects read.
        layers = {}
        for (name, module), in_size, out_size in zip(
            self.named_modules, self.in_sizes, self.out_sizes, strict=True
        ):
            layer = LayerSummary(module)
            layer.detach_hook()
            layer._in_size, layer._out_size = in_size, out_size
            layers[name] = layer
        return layers

    def summarize(self) -> dict[str, LayerSummary]:
        """The listed layers by name, each a :class:`LayerSummary` with its sizes."""
        return self._layer_summary

    def _get_summary_data(self) -> list[tuple[str, list[str]]]:
        # Lightning's private name for the table by column, (name, cells), which custom
        # summaries read: every cell a string, the "other params" row included.
        return self._table.summary_data

    @property
    def total_training_modes(self) -> dict[str, int]:
        """How many submodules are in train and in eval mode: ``{"train": n, "eval": m}``."""
        return dict(self._table.training_modes)

    def __str__(self) -> str:
        return format_table(self._table)

    def __repr__(self) -> str:
        return str(self)


def get_human_readable_count(number: int) -> str:
    """``number`` with a K, M, B or T suffix, as the summary shows parameter counts."""
    return human_readable_count(number)


def get_formatted_model_size(total_model_size: float) -> str:
    """A size in MB as the summary prints it: three decimals, thousands separated.

    Args:
        total_model_size: the size in MB (``ModelSummary.model_size``).

    Example:
        >>> get_formatted_model_size(1234.56789)
        '1,234.568'
    """
    return f"{total_model_size:,.3f}"


def summarize(lightning_module: nn.Module, max_depth: int = 1) -> ModelSummary:
    """The summary of ``lightning_module``'s layers down to ``max_depth`` (print it for the table).

    Args:
        lightning_module: the model to describe.
        max_depth: how deep to list submodules (1: direct children; -1: all; 0: totals only).

    Example:
        >>> import torch
        >>> summary = summarize(torch.nn.Sequential(torch.nn.Linear(4, 2)))
        >>> summary.total_parameters, "Total params" in str(summary)
        (10, True)
    """
    return ModelSummary(lightning_module, max_depth=max_depth)
