"""What the hybrid strategy needs from the user's module: the layers to cut, and checks."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from trainkit.core.module import Module


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


def refuse_step_shaping(module: Module) -> None:
    """Refuse step options that act on the loss or the gradient norm around backward.

    Across processes the pipeline runs backward itself, so a loss scale applied
    by the step would never reach the gradients, and a norm would see one stage.
    The step's slots say what the step does (``Trainer.step_slots``).

    Args:
        module: the user's module (its Trainer holds the step's slots).
    """
    slots = module.trainer.step_slots
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
