"""Strategies, and turning ``Trainer(accelerator=, devices=, strategy=)`` into one."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

import torch

from trainkit.messages import did_you_mean
from trainkit.strategies.base import Strategy
from trainkit.strategies.single import SingleDeviceStrategy

if TYPE_CHECKING:
    from trainkit.launch.spawn import SpawnLauncher

__all__ = ["SingleDeviceStrategy", "Strategy", "resolve_launcher", "resolve_strategy"]

ACCELERATORS = ("auto", "cpu", "cuda", "gpu")


# Strategy name -> factory taking the chosen device. Each distributed strategy
# registers itself here when it lands.
def _ddp(device: torch.device) -> Strategy:
    return _ddp_for(device.type, 1, timedelta(minutes=30))


def _ddp_for(
    device_type: str, num_processes: int, timeout: timedelta, hybrid: bool = False
) -> Strategy:
    """DDP (or hybrid) over this job's processes; in a plain process, start the others first."""
    from trainkit.launch.environment import detect_environment
    from trainkit.launch.launcher import launch_local_workers
    from trainkit.strategies.ddp import DDPStrategy

    environment = detect_environment()
    if not environment.launched_externally and num_processes > 1:
        environment = launch_local_workers(num_processes)
    if hybrid:
        from trainkit.strategies.hybrid import HybridStrategy

        return HybridStrategy(environment=environment, timeout=timeout)
    return DDPStrategy(device_type, environment=environment, timeout=timeout)


STRATEGIES: dict[str, Callable[[torch.device], Strategy]] = {
    "single_device": SingleDeviceStrategy,
    "ddp": _ddp,
    "ddp_spawn": _ddp,
    "dp": lambda device: _data_parallel(device.type, [device.index or 0]),
    "hybrid": _ddp,
}


def resolve_strategy(
    strategy: str | Strategy,
    accelerator: str,
    devices: int | list[int] | str,
    timeout: timedelta = timedelta(minutes=30),
) -> Strategy:
    """Build the strategy for the requested accelerator, devices and strategy name.

    Args:
        strategy: a Strategy instance, "auto", or a registered name.
        accelerator: "auto", "cpu", "cuda" (or its alias "gpu").
        devices: "auto", a device count, or a list of CUDA device indices.
        timeout: how long collectives wait for other processes (multi-process strategies).

    Example:
        >>> resolve_strategy("auto", "cpu", 1).root_device
        device(type='cpu')
    """
    if isinstance(strategy, Strategy):
        return strategy
    if not isinstance(strategy, str):
        raise TypeError(
            f"strategy must be a name or a Strategy instance, got {type(strategy).__name__}."
        )
    device_type = _device_type(accelerator)
    indices = _device_indices(device_type, devices)
    name = strategy
    if name == "auto":
        name = "single_device" if len(indices) == 1 else "ddp"
    if name not in STRATEGIES:
        valid = ["auto", *STRATEGIES]
        hint = did_you_mean(name, valid)
        if name != strategy:  # "auto" picked a multi-device strategy that does not exist
            raise ValueError(
                f"devices={devices!r} asks for {len(indices)} devices, which needs a "
                f"multi-process strategy; available strategies are {valid}. Use devices=1."
            )
        raise ValueError(f"Unknown strategy {strategy!r}; valid strategies are {valid}.{hint}")
    if name == "single_device" and len(indices) != 1:
        raise ValueError(
            f"strategy='single_device' runs on one device, but devices={devices!r} asks for "
            f"{len(indices)}. Pass devices=1."
        )
    if name == "ddp":
        return _ddp_for(device_type, len(indices), timeout)
    if name == "hybrid":
        # Each process runs two stages: on CUDA, `devices` counts GPUs, two per process.
        processes = max(len(indices) // 2, 1) if device_type == "cuda" else len(indices)
        return _ddp_for(device_type, processes, timeout, hybrid=True)
    if name == "dp":
        return _data_parallel(device_type, indices)
    if name == "ddp_spawn":
        from trainkit.strategies.ddp import DDPStrategy

        # Until the launcher starts the ranks, this process is no rank of the job.
        return DDPStrategy(device_type, timeout=timeout)
    device = torch.device(device_type, indices[0]) if device_type == "cuda" else torch.device("cpu")
    return STRATEGIES[name](device)


def _data_parallel(device_type: str, indices: list[int]) -> Strategy:
    if device_type == "cuda" and len(indices) >= 2:
        from trainkit.strategies.dp import DataParallelStrategy

        return DataParallelStrategy(indices)
    device = torch.device("cuda", indices[0]) if device_type == "cuda" else torch.device("cpu")
    warnings.warn(
        f"strategy='dp' splits each batch over two or more CUDA devices, but this run has "
        f"{len(indices) if device_type == 'cuda' else 0} ({device_type}); training on one "
        f"device ({device}) instead. Ask for devices=2 or more on a machine with several "
        "GPUs, or use strategy='ddp' (recommended even there).",
        stacklevel=4,
    )
    return SingleDeviceStrategy(device)


def resolve_launcher(
    strategy: str | Strategy, accelerator: str, devices: int | list[int] | str
) -> SpawnLauncher | None:
    """The launcher that starts the ranks from inside ``Trainer.fit`` (``strategy="ddp_spawn"``).

    Args:
        strategy: as given to the Trainer.
        accelerator: as given to the Trainer.
        devices: as given to the Trainer.

    Returns:
        None for every other strategy, and when this process already is a rank
        (under torchrun or SLURM, or started by a launcher).

    Example:
        >>> resolve_launcher("ddp_spawn", "cpu", 2).num_processes
        2
    """
    if strategy != "ddp_spawn":
        return None
    from trainkit.launch.environment import detect_environment
    from trainkit.launch.spawn import SpawnLauncher

    if detect_environment().source != "local":
        return None
    indices = _device_indices(_device_type(accelerator), devices)
    return SpawnLauncher(len(indices))


def _device_type(accelerator: str) -> str:
    if accelerator not in ACCELERATORS:
        hint = did_you_mean(str(accelerator), ACCELERATORS)
        raise ValueError(
            f"Unknown accelerator {accelerator!r}; valid accelerators are "
            f"{list(ACCELERATORS)}.{hint}"
        )
    if accelerator == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if accelerator in ("cuda", "gpu"):
        if not torch.cuda.is_available():
            raise RuntimeError(
                f"accelerator={accelerator!r} was requested, but CUDA is not available on "
                "this machine (no GPU, or a CPU-only torch build). Use accelerator='cpu' or "
                "'auto'."
            )
        return "cuda"
    return "cpu"


def _device_indices(device_type: str, devices: int | list[int] | str) -> list[int]:
    available = torch.cuda.device_count() if device_type == "cuda" else None
    if devices == "auto":
        return [0]
    if isinstance(devices, (list, tuple)):
        indices = list(devices)
        if not indices or not all(isinstance(i, int) and not isinstance(i, bool) for i in indices):
            raise ValueError(f"devices={devices!r} must be a non-empty list of device indices.")
        if device_type == "cpu":
            raise ValueError(
                f"devices={devices!r} lists device indices, which only CUDA devices have. On "
                "the CPU pass a number of processes, e.g. devices=1."
            )
    elif isinstance(devices, int) and not isinstance(devices, bool):
        if devices < 1:
            raise ValueError(f"devices={devices} must be at least 1.")
        indices = list(range(devices))
    else:
        raise TypeError(f"devices must be 'auto', an int or a list of ints, got {devices!r}.")
    if available is not None and (len(indices) > available or max(indices) >= available):
        raise ValueError(
            f"devices={devices!r} asks for CUDA devices this machine does not have: "
            f"{available} visible (indices 0..{available - 1}). Ask for fewer devices."
        )
    return indices
