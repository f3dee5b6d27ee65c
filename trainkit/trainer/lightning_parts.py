"""The Trainer's parts in Lightning's terms: ``trainer.precision_plugin``, and what the
Trainer's strategy answers for Lightning's ``Strategy`` attributes.

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

from torch.optim import Optimizer

from trainkit.trainer.accelerators import Accelerator

if TYPE_CHECKING:
    from trainkit.launch.environment import ClusterEnvironment
    from trainkit.trainer.properties import TrainerViews
    from trainkit.trainer.trainer import Trainer

__all__ = ["StrategyParts", "precision_plugin"]


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

    def cluster_environment(self, process: Callable[[], ClusterEnvironment]) -> Any:
        from trainkit.lightning.plugins.environments import environment_plugin

        return environment_plugin(process, lambda: self._trainer.node_rank)
