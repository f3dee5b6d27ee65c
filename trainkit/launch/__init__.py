"""Where this process stands in a distributed job, and starting the job's processes.

Launching is chosen apart from the strategy: :func:`select_launcher` decides,
from the strategy's name and the number of processes it needs, whether this
process must start others, and how. Building a launcher starts nothing.
"""

from __future__ import annotations

from trainkit.launch.environment import ClusterEnvironment, detect_environment
from trainkit.launch.launcher import Launcher, ScriptLauncher


def select_launcher(strategy: str, processes: int) -> Launcher | None:
    """The launcher that starts this job's processes, or None when there is nothing to start.

    Nothing is started under torchrun or SLURM (the ranks exist already: trainkit
    joins them), nor for a single process. ``"ddp_spawn"`` starts its ranks from
    inside fit/validate/test/predict (for notebooks); ``"ddp"``, ``"fsdp"`` and ``"hybrid"``
    in a plain ``python`` process re-run its command for the other ranks.

    Args:
        strategy: the strategy's name ("single_device", "ddp", "ddp_spawn", "dp", "hybrid").
        processes: how many processes the strategy runs on this machine.

    Example:
        >>> select_launcher("single_device", 1) is None
        True
    """
    if detect_environment().source != "local":
        return None
    if strategy == "ddp_spawn":
        from trainkit.launch.spawn import SpawnLauncher  # torch.multiprocessing, when needed

        return SpawnLauncher(processes)
    if strategy in ("ddp", "hybrid", "fsdp") and processes > 1:
        return ScriptLauncher(processes)
    return None


__all__ = [
    "ClusterEnvironment",
    "Launcher",
    "ScriptLauncher",
    "detect_environment",
    "select_launcher",
]
