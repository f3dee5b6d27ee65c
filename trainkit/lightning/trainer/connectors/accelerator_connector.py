"""``_AcceleratorConnector``: ``accelerator`` and ``devices`` resolved as a Trainer resolves them.

A private Lightning class that projects use on its own to learn which device a
run would use. trainkit resolves the same arguments with
:func:`trainkit.strategies.plan_devices` (so ``devices="auto"`` is one device,
as for trainkit's Trainer); the other arguments of Lightning's constructor are
accepted and not used.
"""

from __future__ import annotations

from typing import Any

from trainkit.strategies import plan_devices
from trainkit.trainer.accelerators import Accelerator, accelerator_for

__all__ = ["_AcceleratorConnector"]


class _AcceleratorConnector:
    """The accelerator and devices ``Trainer(accelerator=..., devices=...)`` would use.

    Args:
        devices: "auto", a device count, or a list of CUDA device indices.
        num_nodes: accepted (one node's devices are resolved).
        accelerator: "auto", "cpu", "cuda" or "gpu", or an Accelerator.
        strategy: "auto" or a strategy name, checked against the devices.
        **others: Lightning's other arguments (plugins, precision, ...), not used.

    Example:
        >>> connector = _AcceleratorConnector(accelerator="cpu", devices=2)
        >>> connector._accelerator_flag, connector._devices_flag
        ('cpu', 2)
    """

    def __init__(
        self,
        devices: int | list[int] | str = "auto",
        num_nodes: int = 1,
        accelerator: str | Accelerator = "auto",
        strategy: str = "auto",
        **others: Any,
    ) -> None:
        del num_nodes, others
        name = accelerator.name() if isinstance(accelerator, Accelerator) else accelerator
        plan = plan_devices(strategy, name, devices)
        #: "cpu" or "cuda": the accelerator ``"auto"`` (or "gpu") resolves to.
        self._accelerator_flag = plan.device_type
        #: The devices: a count, or the CUDA indices when a list was given.
        self._devices_flag: int | list[int] = (
            list(plan.indices) if isinstance(devices, (list, tuple)) else len(plan.indices)
        )
        #: The strategy's name ("auto" resolved).
        self._strategy_flag = plan.strategy

    @property
    def accelerator(self) -> Accelerator:
        """The Accelerator for the resolved device type."""
        return accelerator_for(self._accelerator_flag)
