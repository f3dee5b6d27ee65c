"""Sizes and FLOPs for a model summary, from one forward pass of ``example_input_array``.

A Module that sets ``example_input_array`` gets three more columns in its
summary, as in Lightning: each listed layer's FLOPs (forward, as
``torch.utils.flop_counter`` counts them), its input sizes and its output sizes
(``[2, 100]``; several as a list of sizes, keyword arguments after positional
ones; ``?`` for what is not a tensor, a scalar or no input at all, or for a
layer the pass does not reach), and a "Total Flops" line. The pass runs in
eval mode without gradients, then puts back each submodule's mode and the random
state: the training that follows is the one without a summary.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainkit.core.batches import move_data_to_device
from trainkit.utilities.seed import isolated_rng

#: What a size cell shows for a value that is not a tensor, or a layer not run.
UNKNOWN = "?"


@dataclass
class ForwardColumns:
    """What the forward pass adds to the summary of the listed layers.

    Args:
        flops: each layer's forward FLOPs.
        in_sizes: each layer's input sizes, as printed.
        out_sizes: each layer's output sizes, as printed.
        total_flops: the whole model's forward FLOPs.
        input_shapes: each layer's input sizes as lists (:func:`sizes`; ``"?"``: not run).
        output_shapes: each layer's output sizes as lists.
        flop_counts: each layer's FLOPs by operator (``torch.utils.flop_counter``'s).
    """

    flops: list[int]
    in_sizes: list[str]
    out_sizes: list[str]
    total_flops: int
    input_shapes: list[Any]
    output_shapes: list[Any]
    flop_counts: list[dict[Any, int]]


def sizes(value: Any) -> Any:
    """The size of a tensor (a list), of each item of a list or tuple, else ``"?"``.

    Example:
        >>> sizes((torch.zeros(2, 3), [torch.zeros(4)], 7))
        [[2, 3], [[4]], '?']
    """
    if isinstance(value, torch.Tensor):
        return list(value.shape)
    if isinstance(value, (list, tuple)):
        return [sizes(item) for item in value]
    return UNKNOWN


def forward_columns(
    module: nn.Module, layers: list[tuple[str, nn.Module]]
) -> ForwardColumns | None:
    """Run ``module.example_input_array`` through ``module``; None when it has none.

    A failing pass is a warning (the summary then has no such columns), never an
    error: the summary must not stop a run.

    Args:
        module: the model; its ``example_input_array`` is a tensor (one argument), a
            tuple or list (positional arguments) or a dict (keyword arguments).
        layers: the listed submodules, with their names.

    Example:
        >>> model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
        >>> model.example_input_array = torch.zeros(2, 3)
        >>> columns = forward_columns(model, list(model.named_children()))
        >>> columns.in_sizes, columns.out_sizes, columns.flops
        (['[2, 3]', '[2, 4]', '[2, 4]'], ['[2, 4]', '[2, 4]', '[2, 1]'], [48, 0, 16])
    """
    example = getattr(module, "example_input_array", None)
    if example is None:
        return None
    from torch.utils.flop_counter import FlopCounterMode

    seen: dict[str, tuple[Any, Any]] = {}

    def recorder(name: str) -> Any:
        def record(
            layer: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any
        ) -> None:
            if name not in seen:  # a layer called twice shows its first call
                inputs = (*args, *kwargs.values())  # keyword arguments count in their order
                shapes = sizes(inputs[0] if len(inputs) == 1 else inputs), sizes(output)
                # No input, or a scalar, has no size to show: "?", as in Lightning's table.
                seen[name] = (shapes[0] or UNKNOWN, shapes[1] or UNKNOWN)

        return record

    modes = [(submodule, submodule.training) for submodule in module.modules()]
    handles = [
        layer.register_forward_hook(recorder(name), with_kwargs=True)
        for name, layer in layers
        if not isinstance(layer, torch.jit.ScriptModule)  # takes no hooks: sizes unknown
    ]
    counter = FlopCounterMode(display=False)
    try:
        first = next(module.parameters(), None)
        if first is not None:
            example = move_data_to_device(example, first.device)
        module.eval()
        with isolated_rng(include_cuda=True), torch.no_grad(), counter:
            if isinstance(example, (list, tuple)):
                module(*example)
            elif isinstance(example, dict):
                module(**example)
            else:
                module(example)
    except Exception as error:  # the summary must not stop the run
        warnings.warn(
            f"The model summary could not run example_input_array through "
            f"{type(module).__name__} ({type(error).__name__}: {error}); it shows no sizes "
            "or FLOPs. Fix the example input, or set example_input_array = None.",
            stacklevel=3,
        )
        return None
    finally:
        for handle in handles:
            handle.remove()
        for submodule, training in modes:
            submodule.training = training
    counts = counter.get_flop_counts()
    root = type(module).__name__
    by_layer = [dict(counts.get(f"{root}.{name}", {})) for name, _ in layers]
    inputs = [seen[name][0] if name in seen else UNKNOWN for name, _ in layers]
    outputs = [seen[name][1] if name in seen else UNKNOWN for name, _ in layers]
    return ForwardColumns(
        flops=[sum(layer.values()) for layer in by_layer],
        in_sizes=[str(shape) for shape in inputs],
        out_sizes=[str(shape) for shape in outputs],
        total_flops=counter.get_total_flops(),
        input_shapes=inputs,
        output_shapes=outputs,
        flop_counts=by_layer,
    )
