"""Where this process stands in a distributed job, and starting the job's processes.

Launching is chosen apart from the strategy: :func:`select_launcher` decides,
from how the strategy's class says its processes start (its ``launch_mode``, read
through ``trainkit.strategies.StrategyRegistry``) and how many it needs, whether
this process must start others, and how. Building a launcher starts nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainkit.launch.environment import ClusterEnvironment, detect_environment
from trainkit.launch.launcher import Launcher, ScriptLauncher

if TYPE_CHECKING:
    from trainkit.strategies import Strategy
    from trainkit.strategies.registrable import LaunchMode


def select_launcher(strategy: str, processes: int) -> Launcher | None:
    """The launcher that starts this job's processes, or None when there is nothing to start.

    Nothing is started under torchrun or SLURM (the ranks exist already: trainkit
    joins them), nor for a single process. ``"ddp_spawn"`` starts its ranks from
    inside fit/validate/test/predict (for notebooks); ``"ddp"``, ``"fsdp"`` and
    ``"hybrid"`` in a plain ``python`` process re-run its command for the other
    ranks (each strategy class's ``launch_mode`` says which).

    Args:
        strategy: a registered strategy name ("single_device", "ddp", "ddp_spawn",
            "dp", "hybrid", "fsdp", or one added with ``StrategyRegistry.register``).
        processes: how many processes the strategy runs on this machine.

    Example:
        >>> select_launcher("single_device", 1) is None
        True
    """
    # Imported here: the strategies import this package's environment module.
    from trainkit.strategies.registry import StrategyRegistry

    return _launcher(StrategyRegistry.launch_mode(strategy), processes)


def launcher_for(
    strategy: Strategy, accelerator: str, devices: int | list[int] | str
) -> Launcher | None:
    """The launcher that starts the processes ``devices`` asks of a strategy instance.

    ``Trainer(strategy=FSDPStrategy(...), devices=4)`` runs four processes, as
    ``strategy="fsdp", devices=4`` does (and as Lightning does with an
    instance); this process becomes rank 0. Nothing is launched for
    ``devices="auto"``, under torchrun or SLURM, or for an instance given its
    rank and world size (it refuses the launcher's place: ``join_as``).

    Args:
        strategy: the instance passed to the Trainer.
        accelerator: "auto", "cpu", "cuda" (or its alias "gpu").
        devices: "auto", a device count, or a list of CUDA device indices.
    """
    from trainkit.strategies import plan_devices

    kind = type(strategy)
    if devices == "auto" or kind.launch_mode(strategy.name) is None:
        return None
    plan = plan_devices(strategy, accelerator, devices)
    launcher = _launcher(kind.launch_mode(strategy.name), kind.processes(plan))
    if launcher is None:
        return None
    return launcher if strategy.join_as(launcher.environment) else None


def _launcher(mode: LaunchMode | None, processes: int) -> Launcher | None:
    if mode is None or detect_environment().source != "local":
        return None
    if mode == "spawn":
        from trainkit.launch.spawn import SpawnLauncher  # torch.multiprocessing, when needed

        return SpawnLauncher(processes)
    return ScriptLauncher(processes) if processes > 1 else None


__all__ = [
    "ClusterEnvironment",
    "Launcher",
    "ScriptLauncher",
    "detect_environment",
    "launcher_for",
    "select_launcher",
]
