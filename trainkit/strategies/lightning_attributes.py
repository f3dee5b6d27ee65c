"""Lightning's ``Strategy`` attributes, answered by trainkit's strategies.

Lightning code reads parts of a run through ``trainer.strategy``: its
``precision_plugin`` (a loss scaler, a step's autocast context), its
``accelerator``, ``checkpoint_io``, ``launcher`` and ``optimizers``, and on
parallel strategies ``num_nodes``, ``node_rank``, ``num_processes`` and
``parallel_devices``. In
trainkit the Trainer owns those parts; it connects them to its strategy
(:meth:`LightningAttributes.connect_parts`) and the strategy answers from them.
A strategy not connected to a Trainer answers for one process on one machine,
and None for the parts only a Trainer has.

Each strategy answers all of them, where Lightning's single-device strategy
has no ``num_nodes``, ``node_rank``, ``num_processes`` or ``parallel_devices``.
"""

from __future__ import annotations

import inspect
import warnings
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn
from torch.optim import Optimizer

from trainkit.checkpoint import sharded
from trainkit.strategies.lightning_hooks import UNCALLED_HOOKS

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from trainkit.launch.environment import ClusterEnvironment

__all__ = ["LightningAttributes", "RunParts"]


class RunParts(Protocol):
    """What a strategy's Lightning attributes read from the Trainer that owns it."""

    @property
    def accelerator(self) -> Any: ...
    @property
    def precision_plugin(self) -> Any: ...
    @property
    def checkpoint_io(self) -> Any: ...
    @property
    def optimizers(self) -> Sequence[Optimizer]: ...
    @property
    def num_nodes(self) -> int: ...
    @property
    def node_rank(self) -> int: ...
    @property
    def device_ids(self) -> list[int]: ...
    @property
    def launcher(self) -> Any: ...
    def cluster_environment(self, process: Callable[[], ClusterEnvironment]) -> Any: ...


class LightningAttributes:
    """Lightning's ``Strategy`` and ``ParallelStrategy`` attributes (a base of ``Strategy``)."""

    _parts: RunParts | None = None
    # Strategy's own, which the methods below read.
    model: nn.Module | None = None
    lightning_module: nn.Module | None = None

    if TYPE_CHECKING:

        @property
        def root_device(self) -> torch.device: ...
        @property
        def is_global_zero(self) -> bool: ...
        def setup_module(self, module: nn.Module) -> nn.Module: ...

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # A strategy written for Lightning may override hooks Lightning's Trainer calls and
        # trainkit's does not: say so where the class is defined, not silently skip them.
        super().__init_subclass__(**kwargs)
        if cls.__module__.startswith("trainkit."):
            return

        def own(name: str) -> bool:  # defined by this class, not inherited
            return getattr(cls, name, None) is not getattr(super(cls, cls), name, None)

        uncalled = [name for name in UNCALLED_HOOKS if own(name)]
        setup_optimizers = cls.setup_optimizers  # type: ignore[attr-defined]  # Strategy's
        if own("setup_optimizers") and "trainer" in inspect.signature(setup_optimizers).parameters:
            uncalled.append("setup_optimizers(trainer)")  # Lightning's, not trainkit's
        if uncalled:
            warnings.warn(
                f"{cls.__name__} overrides {', '.join(uncalled)}: Lightning's Trainer calls "
                "these Strategy methods, trainkit's does not. trainkit calls setup(trainer), "
                "configure_ddp() (DDP, when fitting), process_dataloader(dataloader), "
                "setup_environment(), batch_to_device(batch) and teardown(); move the work "
                "there (docs/porting.md, strategies).",
                UserWarning,
                stacklevel=2,
            )

    def setup(self, trainer: Any) -> None:
        """Set the Module up for the run: Lightning's ``Strategy.setup(trainer)``.

        The Trainer calls it once a run, after the callbacks' and the Module's ``setup``
        and ``configure_model``, with :attr:`model` the user's Module (also
        :attr:`lightning_module`); after it, :attr:`model` is what the step methods run
        through (the Module moved to its device, or the strategy's wrapper of it). A
        subclass may override it, calling ``super().setup(trainer)``, to work before or
        after that.

        Args:
            trainer: the Trainer whose run starts (None: set up as for ``fit``).
        """
        assert self.model is not None
        self.model = self.setup_module(self.model)

    def process_dataloader(self, dataloader: Any) -> Any:
        """Lightning's hook for each dataloader a run loads, after the strategy has given it
        its sampler; returns the loader to use (the same one by default).

        Args:
            dataloader: the loader (training, validation, test or prediction).
        """
        return dataloader

    def connect_parts(self, parts: RunParts) -> None:
        """Answer Lightning's attributes from ``parts`` (the Trainer that owns this
        strategy calls this with its own parts).

        Args:
            parts: the owning Trainer's parts.
        """
        self._parts = parts

    @property
    def accelerator(self) -> Any:
        """The Trainer's ``accelerator`` object (None before a Trainer has this strategy)."""
        return self._parts.accelerator if self._parts is not None else None

    @property
    def precision_plugin(self) -> Any:
        """The Trainer's ``precision_plugin`` (None before a Trainer has this strategy)."""
        return self._parts.precision_plugin if self._parts is not None else None

    @property
    def launcher(self) -> Any:
        """What starts the job's other processes from this one (a
        :class:`~trainkit.launch.launcher.Launcher`, the Trainer's ``launcher``); None
        where this process starts none: one process, or ranks torchrun or SLURM started."""
        return self._parts.launcher if self._parts is not None else None

    @property
    def checkpoint_io(self) -> Any:
        """A ``TorchCheckpointIO``: trainkit writes ``torch.save`` files, atomically.

        None before a Trainer has this strategy.
        """
        return self._parts.checkpoint_io if self._parts is not None else None

    @property
    def optimizers(self) -> list[Optimizer]:
        """The current run's optimizers (the Trainer's ``optimizers``)."""
        return list(self._parts.optimizers) if self._parts is not None else []

    @property
    def num_nodes(self) -> int:
        """Machines in the job (the Trainer's ``num_nodes``)."""
        return self._parts.num_nodes if self._parts is not None else 1

    @property
    def node_rank(self) -> int:
        """This machine's index in the job (0 on one machine)."""
        return self._parts.node_rank if self._parts is not None else 0

    @property
    def cluster_environment(self) -> Any:
        """Lightning's cluster environment plugin for this process, answering from it.

        ``TorchElasticEnvironment`` under torchrun, ``SLURMEnvironment`` under SLURM
        (``auto_requeue=False``: trainkit does not requeue), ``LightningEnvironment``
        otherwise; its ``global_rank()``, ``world_size()``, ``local_rank()``,
        ``node_rank()``, ``main_address`` and ``main_port`` are this process's. None
        before a Trainer has this strategy.
        """
        if self._parts is None:
            return None
        return self._parts.cluster_environment(self.process_environment)

    def process_environment(self) -> ClusterEnvironment:
        """Who this process is in the job (one process on one machine; a process group's
        strategies answer with the environment they joined)."""
        from trainkit.launch.environment import ClusterEnvironment  # not loaded by strategies

        return ClusterEnvironment(0, 0, 1, "127.0.0.1", 29500, "local")

    @property
    def num_processes(self) -> int:
        """Processes on this machine: one per device."""
        return len(self.parallel_devices)

    @property
    def parallel_devices(self) -> list[torch.device]:
        """The devices of this machine's processes, in local-rank order (the Trainer's
        ``device_ids``; as many CPUs as processes on the CPU)."""
        device = self.root_device
        if self._parts is None:
            return [device]
        indices = self._parts.device_ids
        if device.type == "cpu":
            return [device] * len(indices)
        return [torch.device(device.type, index) for index in indices]

    def connect(self, model: nn.Module) -> None:
        """Keep ``model`` as :attr:`lightning_module` and :attr:`model`, as Lightning's
        ``Strategy.connect`` does: no device move or wrapping (each run sets it up).

        Args:
            model: the user's Module (projects connect one they predict with untrained).
        """
        self.lightning_module = model
        self.model = model

    def model_to_device(self) -> None:
        """Move :attr:`model` to :attr:`root_device` (set up already moves it)."""
        if self.model is None:
            raise RuntimeError(
                "strategy.model_to_device() needs a model: call it during a run (the "
                "Trainer sets the strategy's model up when fit, validate, test or predict starts)."
            )
        self.model.to(self.root_device)

    def lightning_module_state_dict(self) -> dict[str, Any]:
        """The user's Module's ``state_dict()``, as a checkpoint stores it."""
        if self.lightning_module is None:
            raise RuntimeError(
                "strategy.lightning_module_state_dict() needs a Module: call it during or "
                "after a run, when the Trainer has connected the Module to its strategy."
            )
        return self.lightning_module.state_dict()

    def optimizer_state(self, optimizer: Optimizer) -> dict[str, Any]:
        """``optimizer``'s ``state_dict()`` (Lightning's wrapped optimizers too)."""
        inner = getattr(optimizer, "optimizer", optimizer)  # a LightningOptimizer's own
        state: dict[str, Any] = inner.state_dict()
        return state

    def remove_checkpoint(self, filepath: Any) -> None:
        """Delete the checkpoint file or folder at ``filepath`` from global rank 0.

        Args:
            filepath: the checkpoint to remove (a missing one is not an error).
        """
        if self.is_global_zero:
            sharded.remove(filepath)
