"""What the hybrid strategy needs from the user's module: the layers to cut, and checks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

from trainkit.core.module import Module
from trainkit.pipelining.balance import Partition, balance_layers

if TYPE_CHECKING:
    from trainkit.callbacks.slots import StepSlots


def stages_of(module: Module) -> tuple[nn.Sequential, Callable[[nn.Module], Callable[[], None]]]:
    """The layers to split, and how to put a split version of them in the module's place.

    Args:
        module: the user's module, whose ``configure_stages()`` names the layers.

    Returns:
        The layers as an ``nn.Sequential``, and a function that installs a split
        version in the module and returns the function that takes it out again.
    """
    name = type(module).__name__
    stages = module.configure_stages()
    if stages is None:
        raise ValueError(
            f"The hybrid strategy splits the layers {name}.configure_stages() returns, but it "
            "returns None. Return the nn.Sequential your forward runs (or a list of layers in "
            "order)."
        )
    if not isinstance(stages, nn.Sequential):
        if type(module).forward is not Module.forward:
            raise ValueError(
                f"{name}.configure_stages() returns a list of layers, and {name} also defines "
                "forward(). The hybrid strategy runs the listed layers in order in place of "
                "forward, so whatever forward adds (a skip connection, a reshape) would be "
                "dropped and a different model trained. Drop forward() if the listed layers in "
                "order are the whole model, or keep it and return from configure_stages() the "
                "nn.Sequential attribute it runs (e.g. `return self.layers`)."
            )
        layers = nn.Sequential(*stages)
        split = module.stage_split

        def run_list(runner: nn.Module) -> Callable[[], None]:
            # Not registered as a submodule: the state_dict names stay the model's own.
            split.runner = runner

            def restore() -> None:
                split.runner = None

            return restore

        return layers, run_list
    path = next((p for p, m in module.named_modules() if m is stages and p), None)
    if path is None:
        raise ValueError(
            f"{name}.configure_stages() returned an nn.Sequential that is not an attribute of "
            "the module. Return the Sequential your forward runs (e.g. `return self.layers`)."
        )
    parent_path, _, attribute = path.rpartition(".")
    parent = module.get_submodule(parent_path)

    def replace(runner: nn.Module) -> Callable[[], None]:
        setattr(parent, attribute, runner)
        return lambda: setattr(parent, attribute, stages)

    return stages, replace


def refuse_step_shaping(slots: StepSlots) -> None:
    """Refuse step options that act on the loss or the gradient norm around backward.

    Across processes the pipeline computes the loss together with its gradients,
    so a loss scale applied by the step would never reach the gradients, and a
    norm would see one stage.

    Args:
        slots: what the step does (the step hands them to the strategy).
    """
    problem = None
    if slots.scales_loss:
        problem = "fp16 mixed precision scales the loss before backward"
    elif slots.accumulates:
        problem = "gradient accumulation scales the loss before backward"
    elif slots.clips_by_norm:
        problem = "clipping by norm would see only this process's stage"
    if problem:
        raise ValueError(
            f"HybridStrategy(pipeline_size>1) runs backward inside the pipeline, and "
            f"{problem}. Use pipeline_size=1 (stages inside each process) for this, or "
            "drop the option (bf16-mixed precision and clipping by value work)."
        )


def choose_partition(
    module: Module,
    layers: nn.Sequential,
    stages: int,
    balance: str | Sequence[int],
    device: torch.device,
    decides: bool,
    share: Callable[[Partition | None], Partition | None],
) -> Partition:
    """Cut ``layers`` into ``stages`` as ``balance`` asks; every process gets the same cut.

    Timings differ between processes, so one process decides and tells the others.

    Args:
        module: the user's module (``balance="time"`` times the layers on its
            ``example_input_array``).
        layers: the layers to cut (from :func:`stages_of`).
        stages: how many stages.
        balance: ``"time"``, ``"params"`` or the layer counts per stage.
        device: where the layers are timed.
        decides: whether this process decides (global rank 0).
        share: sends the deciding process's partition to every process (a broadcast).
    """
    sample = module.example_input_array
    if balance == "time" and sample is None:
        raise ValueError(
            "HybridStrategy(balance='time') times each layer on "
            f"{type(module).__name__}.example_input_array, which is not set. Set it to "
            "one input batch in __init__, or use balance='params' or a list of layer "
            "counts per stage."
        )
    partition = None
    if decides:
        if sample is not None:
            sample = sample.to(device)
        partition = balance_layers(list(layers), stages, balance, sample)
    chosen = share(partition)
    assert chosen is not None
    return chosen
