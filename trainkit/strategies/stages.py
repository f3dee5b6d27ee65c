"""What the hybrid strategy needs from the user's module: the layers to cut, and checks."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from trainkit.module import Module


def stages_of(module: Module) -> tuple[nn.Sequential, Callable[[nn.Module], Callable[[], None]]]:
    """The layers to split, and how to put a split version of them in the module's place.

    Args:
        module: the user's module, whose ``configure_stages()`` names the layers.

    Returns:
        The layers as an ``nn.Sequential``, and a function that installs a split
        version in the module and returns the function that takes it out again.
    """
    stages = module.configure_stages()
    if stages is None:
        raise ValueError(
            f"The hybrid strategy splits the layers {type(module).__name__}.configure_stages() "
            "returns, but it returns None. Return the nn.Sequential your forward runs (or a "
            "list of layers in order)."
        )
    if not isinstance(stages, nn.Sequential):
        layers = nn.Sequential(*stages)

        def run_list(split: nn.Module) -> Callable[[], None]:
            module.__dict__["_stage_runner"] = split  # not registered: names stay as they are

            return lambda: module.__dict__.pop("_stage_runner", None)

        return layers, run_list
    path = next((p for p, m in module.named_modules() if m is stages and p), None)
    if path is None:
        raise ValueError(
            f"{type(module).__name__}.configure_stages() returned an nn.Sequential that is "
            "not an attribute of the module. Return the Sequential your forward runs (e.g. "
            "`return self.layers`)."
        )
    parent_path, _, attribute = path.rpartition(".")
    parent = module.get_submodule(parent_path)

    def replace(split: nn.Module) -> Callable[[], None]:
        setattr(parent, attribute, split)
        return lambda: setattr(parent, attribute, stages)

    return stages, replace


def refuse_step_shaping(module: Module) -> None:
    """Refuse callbacks that act on the loss or the gradient norm around backward.

    Across processes the pipeline runs backward itself, so a loss scale applied
    by the loop would never reach the gradients, and a norm would see one stage.

    Args:
        module: the user's module (its Trainer holds the callbacks).
    """
    from trainkit.callbacks.accumulation import GradientAccumulation
    from trainkit.callbacks.clipping import GradientClipping
    from trainkit.callbacks.precision import MixedPrecision

    for callback in module.trainer.callbacks:
        problem = None
        if isinstance(callback, MixedPrecision) and callback.precision == "16-mixed":
            problem = "fp16 mixed precision scales the loss before backward"
        elif isinstance(callback, GradientAccumulation) and max(callback.schedule.values()) > 1:
            problem = "gradient accumulation scales the loss before backward"
        elif isinstance(callback, GradientClipping) and callback.max_norm is not None:
            problem = "clipping by norm would see only this process's stage"
        if problem:
            raise ValueError(
                f"HybridStrategy(pipeline_size>1) runs backward inside the pipeline, and "
                f"{problem}. Use pipeline_size=1 (stages inside each process) for this, or "
                "drop the option (bf16-mixed precision and clipping by value work)."
            )
