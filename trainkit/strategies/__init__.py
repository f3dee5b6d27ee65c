"""Strategies, and turning ``Trainer(accelerator=, devices=, strategy=)`` into one.

:func:`plan_devices` checks what was asked for against this machine;
:func:`build_strategy` builds the strategy for a plan. Which names exist and
what each builds is :data:`StrategyRegistry`'s business (``strategies/registry.py``).
Neither starts a process: launching is chosen separately, by ``trainkit.launch``
from what the registry says, and happens when an entry point runs.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import torch

from trainkit.strategies.base import Strategy
from trainkit.strategies.registry import BUILT_IN, DevicePlan, StrategyRegistry
from trainkit.strategies.single import SingleDeviceStrategy
from trainkit.trainer.options import HardwareOptions

if TYPE_CHECKING:
    from trainkit.launch.environment import ClusterEnvironment

__all__ = [
    "STRATEGY_NAMES",
    "DevicePlan",
    "SingleDeviceStrategy",
    "Strategy",
    "StrategyRegistry",
    "build_strategy",
    "plan_devices",
    "resolve_strategy",
]

#: The built-in names ``Trainer(strategy=...)`` takes (``StrategyRegistry`` may hold more).
STRATEGY_NAMES = ("auto", *BUILT_IN)


def plan_devices(
    strategy: str | Strategy, accelerator: str, devices: int | list[int] | str
) -> DevicePlan:
    """Check the requested strategy, accelerator and devices, and resolve "auto".

    Args:
        strategy: a registered name (see :data:`StrategyRegistry`) or "auto"; or a
            Strategy instance, whose own ``name`` the plan carries unchecked.
        accelerator: "auto", "cpu", "cuda" (or its alias "gpu").
        devices: "auto", a device count, or a list of CUDA device indices.

    Example:
        >>> plan_devices("auto", "cpu", 2)
        DevicePlan(strategy='ddp', device_type='cpu', indices=(0, 1))
    """
    if not isinstance(strategy, (str, Strategy)):
        raise TypeError(
            f"strategy must be a name or a Strategy instance, got {type(strategy).__name__}."
        )
    devices = HardwareOptions(accelerator=accelerator, devices=devices).devices  # forms read
    device_type = _device_type(accelerator)
    indices = _device_indices(device_type, devices)
    if isinstance(strategy, Strategy):
        return DevicePlan(strategy.name, device_type, tuple(indices))
    name = strategy
    if name == "auto":
        name = "single_device" if len(indices) == 1 else "ddp"
    StrategyRegistry.entry(name)  # an unknown name fails here, naming the valid ones
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
    """The strategy a plan asks for (its registered class builds it). Starts nothing.

    Args:
        plan: from :func:`plan_devices`.
        timeout: how long collectives wait for other processes (multi-process strategies).
        environment: this process's place in the job, when a launcher decided it
            (default: read from the environment when the strategy sets up).
    """
    return StrategyRegistry.build(plan, timeout=timeout, environment=environment)


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
    elif devices == -1:  # every GPU, as in Lightning
        if available is None:
            raise ValueError(
                "devices=-1 asks for every GPU, and this run computes on the CPU. Pass a "
                "number of processes, e.g. devices=2, or accelerator='gpu' on a GPU machine."
            )
        indices = list(range(available))
    else:
        assert isinstance(devices, int)
        indices = list(range(devices))
    if available is not None and (len(indices) > available or max(indices) >= available):
        raise ValueError(
            f"devices={devices!r} asks for CUDA devices this machine does not have: "
            f"{available} visible (indices 0..{available - 1}). Ask for fewer devices."
        )
    return indices
