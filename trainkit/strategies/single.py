"""Training on one device (the CPU or one CUDA device) in one process."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import torch

from trainkit.strategies.base import ReduceOp, Strategy

if TYPE_CHECKING:
    from trainkit.launch.environment import ClusterEnvironment
    from trainkit.strategies.registry import DevicePlan

T = TypeVar("T")


class SingleDeviceStrategy(Strategy):
    """One process, one device. Collectives return their input.

    Args:
        device: the device to train on, e.g. ``"cpu"`` or ``"cuda:0"``.

    Example:
        >>> strategy = SingleDeviceStrategy("cpu")
        >>> strategy.root_device
        device(type='cpu')
    """

    name = "single_device"
    names: ClassVar[tuple[str, ...]] = ("single_device",)

    def __init__(self, device: torch.device | str = "cpu") -> None:
        self._device = torch.device(device)

    @classmethod
    def from_plan(
        cls,
        plan: DevicePlan,
        *,
        timeout: timedelta = timedelta(minutes=30),
        environment: ClusterEnvironment | None = None,
        **init_params: Any,
    ) -> SingleDeviceStrategy:
        # One process: the timeout and environment of a job of several do not apply.
        index = plan.indices[0]
        cuda = plan.device_type == "cuda"
        return cls(torch.device("cuda", index) if cuda else torch.device("cpu"), **init_params)

    @property
    def root_device(self) -> torch.device:
        return self._device

    def setup_environment(self) -> None:
        if self._device.type == "cuda":
            # Make later bare .cuda() calls in user code land on our device.
            torch.cuda.set_device(self._device)

    def all_reduce(self, tensor: torch.Tensor, op: ReduceOp = "mean") -> torch.Tensor:
        return tensor

    def all_gather(
        self, tensor: torch.Tensor, group: Any = None, sync_grads: bool = False
    ) -> torch.Tensor:
        return tensor  # one process: the tensor as it is, no new dimension (as Lightning)

    def broadcast(self, obj: T, src: int = 0) -> T:
        return obj

    def barrier(self, name: str | None = None) -> None:
        return None

    def reduce_boolean_decision(
        self, decision: bool, all: bool = True, point: str = "a decision"
    ) -> bool:
        return decision

    def reduce_logged(
        self,
        values: Sequence[tuple[str, torch.Tensor, ReduceOp]],
        point: str,
        *,
        always: bool = False,
    ) -> list[torch.Tensor]:
        return [value for _, value, _ in values]
