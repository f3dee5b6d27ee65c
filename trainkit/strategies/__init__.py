"""Strategies, and turning ``Trainer(accelerator=, devices=, strategy=)`` into one.

:func:`plan_devices` checks what was asked for against this machine;
:func:`build_strategy` builds the strategy for a plan. Neither starts a
process: launching is chosen separately (``trainkit.launch.select_launcher``)
and happens when an entry point runs.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, cast

import torch

from trainkit.launch import Launcher, select_launcher
from trainkit.messages import did_you_mean
from trainkit.options import HardwareOptions
from trainkit.strategies.base import Strategy
from trainkit.strategies.single import SingleDeviceStrategy

if TYPE_CHECKING:
    from trainkit.launch.environment import ClusterEnvironment
    from trainkit.strategies.ddp import DDPStrategy

__all__ = [
    "STRATEGY_NAMES",
    "DevicePlan",
    "SingleDeviceStrategy",
    "Strategy",
    "build_strategy",
    "launcher_for",
    "plan_devices",
    "resolve_strategy",
]

#: The names ``Trainer(strategy=...)`` takes.
STRATEGY_NAMES = ("auto", "single_device", "ddp", "ddp_spawn", "dp", "hybrid", "fsdp")


@dataclass(frozen=True)
class DevicePlan:
    """What ``accelerator``, ``devices`` and ``strategy`` ask for, checked against this machine.

    Attributes:
        strategy: the strategy's name ("auto" resolved).
        device_type: "cpu" or "cuda".
        indices: the device indices (on the CPU, one per process).
    """

    strategy: str
    device_type: str
    indices: tuple[int, ...]

    @property
    def processes(self) -> int:
        """How many processes the strategy runs on this machine.

        Example:
            >>> DevicePlan("hybrid", "cuda", (0, 1, 2, 3)).processes
            2
        """
        if self.strategy in ("ddp", "ddp_spawn", "fsdp"):
            return len(self.indices)
        if self.strategy == "hybrid":
            # Each process runs two stages: on CUDA, `devices` counts GPUs, two per process.
            return (
                max(len(self.indices) // 2, 1) if self.device_type == "cuda" else len(self.indices)
            )
        return 1


def plan_devices(strategy: str, accelerator: str, devices: int | list[int] | str) -> DevicePlan:
    """Check the requested strategy, accelerator and devices, and resolve "auto".

    Args:
        strategy: a strategy name (see :data:`STRATEGY_NAMES`).
        accelerator: "auto", "cpu", "cuda" (or its alias "gpu").
        devices: "auto", a device count, or a list of CUDA device indices.

    Example:
        >>> plan_devices("auto", "cpu", 2)
        DevicePlan(strategy='ddp', device_type='cpu', indices=(0, 1))
    """
    if not isinstance(strategy, str):
        raise TypeError(
            f"strategy must be a name or a Strategy instance, got {type(strategy).__name__}."
        )
    HardwareOptions(accelerator=accelerator, devices=devices)  # names and forms
    device_type = _device_type(accelerator)
    indices = _device_indices(device_type, devices)
    name = strategy
    if name == "auto":
        name = "single_device" if len(indices) == 1 else "ddp"
    if name not in STRATEGY_NAMES:
        hint = did_you_mean(name, STRATEGY_NAMES)
        raise ValueError(
            f"Unknown strategy {strategy!r}; valid strategies are {list(STRATEGY_NAMES)}.{hint}"
        )
    if name == "single_device" and len(indices) != 1:
        raise ValueError(
            f"strategy='single_device' runs on one device, but devices={devices!r} asks for "
            f"{len(indices)}. Pass devices=1."
        )
    return DevicePlan(name, device_type, tuple(indices))


def build_strategy(
    plan: DevicePlan,
    *,
    timeout: timedelta = timedelta(minutes=30),
    environment: ClusterEnvironment | None = None,
) -> Strategy:
    """The strategy a plan asks for. Starts nothing.

    Args:
        plan: from :func:`plan_devices`.
        timeout: how long collectives wait for other processes (multi-process strategies).
        environment: this process's place in the job, when a launcher decided it
            (default: read from the environment when the strategy sets up).
    """
    if plan.strategy in ("ddp", "ddp_spawn"):
        from trainkit.strategies.ddp import DDPStrategy

        return DDPStrategy(plan.device_type, timeout=timeout, environment=environment)
    if plan.strategy == "fsdp":
        from trainkit.strategies.fsdp import FSDPStrategy

        return FSDPStrategy(plan.device_type, timeout=timeout, environment=environment)
    if plan.strategy == "hybrid":
        from trainkit.strategies.hybrid import HybridStrategy

        return HybridStrategy(timeout=timeout, environment=environment)
    if plan.strategy == "dp":
        return _data_parallel(plan.device_type, list(plan.indices))
    index = plan.indices[0]
    device = torch.device("cuda", index) if plan.device_type == "cuda" else torch.device("cpu")
    return SingleDeviceStrategy(device)


def launcher_for(
    strategy: Strategy, accelerator: str, devices: int | list[int] | str
) -> Launcher | None:
    """The launcher that starts the processes ``devices`` asks of a strategy instance.

    ``Trainer(strategy=FSDPStrategy(...), devices=4)`` runs four processes, as
    ``strategy="fsdp", devices=4`` does (and as Lightning does with an
    instance); this process becomes rank 0. Nothing is launched for
    ``devices="auto"``, under torchrun or SLURM, or for an instance given its
    rank and world size.

    Args:
        strategy: the instance passed to the Trainer.
        accelerator: "auto", "cpu", "cuda" (or its alias "gpu").
        devices: "auto", a device count, or a list of CUDA device indices.
    """
    if devices == "auto" or strategy.name not in ("ddp", "fsdp", "hybrid"):
        return None
    plan = plan_devices(strategy.name, accelerator, devices)
    launcher = select_launcher(plan.strategy, plan.processes)
    if launcher is None or launcher.environment is None:
        return None
    # The three names are the DDP strategy and its subclasses.
    return launcher if cast("DDPStrategy", strategy).join_as(launcher.environment) else None


def resolve_strategy(
    strategy: str | Strategy,
    accelerator: str = "auto",
    devices: int | list[int] | str = "auto",
    timeout: timedelta = timedelta(minutes=30),
) -> Strategy:
    """A Strategy instance as it is, else the strategy the arguments ask for. Starts nothing.

    Args:
        strategy: a Strategy instance, "auto", or a strategy name.
        accelerator: "auto", "cpu", "cuda" (or its alias "gpu").
        devices: "auto", a device count, or a list of CUDA device indices.
        timeout: how long collectives wait for other processes (multi-process strategies).

    Example:
        >>> resolve_strategy("auto", "cpu", 1).root_device
        device(type='cpu')
    """
    if isinstance(strategy, Strategy):
        return strategy
    return build_strategy(plan_devices(strategy, accelerator, devices), timeout=timeout)


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


def _device_type(accelerator: str) -> str:
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
    # The forms were checked by HardwareOptions; here they meet this machine.
    available = torch.cuda.device_count() if device_type == "cuda" else None
    if devices == "auto":
        return [0]
    if isinstance(devices, (list, tuple)):
        indices = list(devices)
        if device_type == "cpu":
            raise ValueError(
                f"devices={devices!r} lists device indices, which only CUDA devices have. On "
                "the CPU pass a number of processes, e.g. devices=1."
            )
    else:
        assert isinstance(devices, int)
        indices = list(range(devices))
    if available is not None and (len(indices) > available or max(indices) >= available):
        raise ValueError(
            f"devices={devices!r} asks for CUDA devices this machine does not have: "
            f"{available} visible (indices 0..{available - 1}). Ask for fewer devices."
        )
    return indices
