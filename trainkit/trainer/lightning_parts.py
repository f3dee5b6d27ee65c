"""The Trainer's parts in Lightning's terms: ``trainer.precision_plugin``, what the
Trainer's strategy answers for Lightning's ``Strategy`` attributes, and
``trainer._accelerator_connector`` and ``trainer._checkpoint_connector``.

Lightning builds a precision plugin and a checkpoint-IO plugin into every Trainer;
trainkit sets precision with an option and writes its own checkpoint files, so
these objects are made when asked for, from the Trainer's settings, with the
classes ``trainkit.lightning.plugins`` gives Lightning's names (imported then:
the Lightning names are the package above this one, and a run that never asks
never loads them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch.optim import Optimizer

from trainkit.trainer.accelerators import Accelerator

if TYPE_CHECKING:
    from trainkit.launch.environment import ClusterEnvironment
    from trainkit.trainer.properties import TrainerViews
    from trainkit.trainer.trainer import Trainer

__all__ = ["AcceleratorConnector", "CheckpointConnector", "StrategyParts", "precision_plugin"]


def precision_plugin(trainer: TrainerViews) -> Any:
    """The Lightning precision plugin that stands for ``trainer``'s precision.

    ``Precision`` for "32-true", ``MixedPrecision`` for "16-mixed" and
    "bf16-mixed" (with the run's ``GradScaler`` while fit runs with "16-mixed"),
    ``HalfPrecision`` for "16-true" and "bf16-true", ``DoublePrecision`` for
    "64-true"; ``FSDPPrecision`` under the FSDP strategy, as in Lightning.

    Args:
        trainer: the Trainer.
    """
    from trainkit.lightning.plugins import precision as plugins

    precision, scaler = trainer.precision, trainer.scaler
    if trainer.strategy.name == "fsdp":
        return plugins.FSDPPrecision(precision, scaler=scaler)
    if precision in ("16-mixed", "bf16-mixed"):
        return plugins.MixedPrecision(precision, trainer.strategy.root_device.type, scaler)
    if precision in ("16-true", "bf16-true"):
        return plugins.HalfPrecision(precision)
    if precision == "64-true":
        return plugins.DoublePrecision()
    return plugins.Precision()


class StrategyParts:
    """What the Trainer's strategy reads for Lightning's attributes (see
    :class:`~trainkit.strategies.lightning_attributes.RunParts`).

    Args:
        trainer: the Trainer that owns the strategy.
    """

    def __init__(self, trainer: Trainer) -> None:
        self._trainer = trainer

    @property
    def accelerator(self) -> Accelerator:
        return self._trainer.accelerator

    @property
    def precision_plugin(self) -> Any:
        return precision_plugin(self._trainer)

    @property
    def checkpoint_io(self) -> Any:
        from trainkit.lightning.plugins.io import TorchCheckpointIO

        return TorchCheckpointIO()

    @property
    def optimizers(self) -> Sequence[Optimizer]:
        return self._trainer.optimizers

    @property
    def num_nodes(self) -> int:
        return self._trainer.num_nodes

    @property
    def node_rank(self) -> int:
        return self._trainer.node_rank

    @property
    def device_ids(self) -> list[int]:
        return self._trainer.device_ids

    @property
    def launcher(self) -> Any:
        return self._trainer.launcher

    def cluster_environment(self, process: Callable[[], ClusterEnvironment]) -> Any:
        from trainkit.lightning.plugins.environments import environment_plugin

        return environment_plugin(process, lambda: self._trainer.node_rank)


class AcceleratorConnector:
    """``trainer._accelerator_connector``: what the Trainer made of its ``accelerator``,
    ``devices``, ``num_nodes``, ``strategy`` and ``precision`` arguments.

    A private part of Lightning's Trainer that projects read (``is_distributed``,
    ``use_distributed_sampler``, ``cluster_environment``) and set
    (``use_distributed_sampler = False``, from a DataModule's ``setup``, to keep
    their own samplers); each answer is read from the Trainer when asked.

    Args:
        trainer: the Trainer.
    """

    def __init__(self, trainer: TrainerViews) -> None:
        self._trainer = trainer

    @property
    def strategy(self) -> Any:
        """The Trainer's strategy."""
        return self._trainer.strategy

    @property
    def accelerator(self) -> Accelerator:
        """The Trainer's accelerator."""
        return self._trainer.accelerator

    @property
    def precision_plugin(self) -> Any:
        """The Trainer's ``precision_plugin``."""
        return self._trainer.precision_plugin

    @property
    def checkpoint_io(self) -> Any:
        """The strategy's ``checkpoint_io``."""
        return self._trainer.strategy.checkpoint_io

    @property
    def cluster_environment(self) -> Any:
        """Lightning's cluster environment plugin for this process (see the strategy's)."""
        return self._trainer.strategy.cluster_environment

    @property
    def is_distributed(self) -> bool:
        """Whether the strategy runs a process per device (DDP, FSDP, model parallel,
        hybrid), even with one device, as in Lightning; else a custom strategy's own
        ``is_distributed``, if it has one."""
        from trainkit.strategies.ddp import DDPStrategy  # here: `import trainkit` skips it

        strategy = self._trainer.strategy
        if isinstance(strategy, DDPStrategy):
            return True
        return bool(getattr(strategy, "is_distributed", False))

    @property
    def use_distributed_sampler(self) -> bool:
        """The Trainer's ``use_distributed_sampler`` (settable: see the Trainer's)."""
        return self._trainer.use_distributed_sampler

    @use_distributed_sampler.setter
    def use_distributed_sampler(self, value: bool) -> None:
        self._trainer.use_distributed_sampler = value

    @property
    def _accelerator_flag(self) -> str:
        # "cpu" or "cuda": what "auto" and "gpu" resolved to
        return self._trainer.strategy.root_device.type

    @property
    def _devices_flag(self) -> int | list[int]:
        devices = self._trainer.hardware.devices
        return list(devices) if isinstance(devices, (list, tuple)) else self._trainer.num_devices

    @property
    def _strategy_flag(self) -> str:
        return str(self._trainer.strategy.name)

    @property
    def _num_nodes_flag(self) -> int:
        return self._trainer.num_nodes

    @property
    def _precision_flag(self) -> str:
        return str(self._trainer.precision)

    @property
    def _parallel_devices(self) -> list[torch.device]:
        kind = self._accelerator_flag
        if kind == "cpu":
            return [torch.device("cpu")] * self._trainer.num_devices
        return [torch.device(kind, index) for index in self._trainer.device_ids]


class CheckpointConnector:
    """``trainer._checkpoint_connector``: the part of Lightning's Trainer that builds
    checkpoints, which projects call for a checkpoint in memory (to save it elsewhere,
    or to keep the best few): ``dump_checkpoint(weights_only)``.

    Args:
        trainer: the Trainer.
    """

    def __init__(self, trainer: Trainer) -> None:
        self._trainer = trainer

    def dump_checkpoint(self, weights_only: bool = False) -> dict[str, Any]:
        """The Trainer's ``dump_checkpoint``: what ``save_checkpoint`` would write.

        Args:
            weights_only: keep only the weights and hyperparameters.
        """
        return self._trainer.dump_checkpoint(weights_only)
