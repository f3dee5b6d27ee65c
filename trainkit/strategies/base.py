"""The Strategy ABC: how the model and data are spread over devices and processes.

It answers the loop: which device is mine, am I rank 0, how is the module wrapped, how is a
dataloader prepared, how does backward run, how do values travel between processes. On one
device the collectives return their input: the loop never asks "am I distributed?".
Launching processes is not a strategy's business (``trainkit.launch``)."""

from __future__ import annotations

import contextlib
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import torch
from torch import nn
from torch.optim import Optimizer
from torch.utils.data import DataLoader

from trainkit.checkpoint.files import load, save_atomic
from trainkit.core.batches import move_data_to_device
from trainkit.distributed.collectives import Collectives, ReduceOp
from trainkit.distributed.sampling import advise_on_loading
from trainkit.strategies.lightning_attributes import LightningAttributes
from trainkit.strategies.registrable import Registrable
from trainkit.utilities.compile import compile_forward
from trainkit.utilities.tensor_init import default_dtype, skipped_init

if TYPE_CHECKING:
    from trainkit.callbacks.slots import StepSlots
    from trainkit.loops.results import Results

__all__ = ["ReduceOp", "Strategy"]

_NO_SYNC_CONTEXT = nullcontext()  # a null context carries no state: one serves every step
T = TypeVar("T")


class Strategy(LightningAttributes, Registrable, Collectives, ABC):
    """Base class of all strategies (its registry declarations: :class:`Registrable`; how
    values travel between its processes: :class:`~trainkit.distributed.collectives.Collectives`;
    Lightning's attributes: :mod:`trainkit.strategies.lightning_attributes`)."""

    #: The Trainer's precision (its canonical name, e.g. "bf16-mixed"); the Trainer sets it.
    precision: str = "32-true"

    @property
    @abstractmethod
    def root_device(self) -> torch.device:
        """The device this process computes on."""

    @property
    def global_rank(self) -> int:
        """Rank of this process among all processes (0 without distribution)."""
        return 0

    @property
    def local_rank(self) -> int:
        """Rank of this process on its node."""
        return 0

    @property
    def world_size(self) -> int:
        """Number of processes taking part."""
        return 1

    @property
    def data_parallel_size(self) -> int:
        """How many processes take different shares of each batch (their batches add up)."""
        return self.world_size

    def use_accelerator(self, accelerator: str, device_type: str) -> None:
        """Take the Trainer's accelerator; an instance passed to the Trainer gets this call.

        The default keeps the device the strategy was built with.

        Args:
            accelerator: the Trainer's ``accelerator`` as given ("auto", "cpu", "cuda", "gpu").
            device_type: what it resolves to on this machine: "cpu" or "cuda".
        """

    @contextlib.contextmanager
    def tensor_init_context(self, empty_init: bool | None = None) -> Iterator[None]:
        """Tensors made inside are made on this process's device, in the precision's dtype.

        ``Trainer.init_module()`` enters it. Under a "true" precision ("bf16-true",
        "16-true", "64-true") floating tensors are made in its dtype.

        Args:
            empty_init: True leaves parameters uninitialized (``torch.nn.init``'s
                random initializers do nothing), for a model whose weights a
                checkpoint replaces at once; None or False initializes them as usual.
        """
        empty = bool(empty_init)
        with skipped_init(empty), self.init_device(empty), default_dtype(self.precision):
            yield

    #: Whether the parameters are sharded over the processes (DTensors: FSDP, model
    #: parallel): no process holds a full copy to average, and evaluation runs under
    #: ``torch.no_grad`` (buffers made under ``torch.inference_mode`` would be inference
    #: tensors in the next fit).
    shards_parameters: ClassVar[bool] = False

    @property
    def module_device_mesh(self) -> Any:
        """The device mesh ``Module.device_mesh`` gives the Module (None: the strategy has none
        for it; ``ModelParallelStrategy`` has)."""
        return None

    def model_init_context(self) -> AbstractContextManager[Any]:
        """Where ``Module.configure_model()`` builds layers: as :meth:`tensor_init_context`
        (this process's device, the precision's dtype)."""
        return self.tensor_init_context()

    def init_device(self, empty: bool) -> AbstractContextManager[Any]:
        """Where :meth:`tensor_init_context` makes tensors: this process's device.

        Args:
            empty: whether ``empty_init=True`` was asked for.
        """
        return self.root_device

    @property
    def distributed_sampler_kwargs(self) -> dict[str, int] | None:
        """How training batches are shared out: a ``DistributedSampler``'s ``num_replicas``
        and this process's ``rank`` (None: this process takes every batch)."""
        return None

    @property
    def process_group(self) -> Any:
        """Every process's ``torch.distributed`` group, for your own collectives and
        messages (``dist.isend(tensor, dst, group=...)``); None in a single process."""
        return None

    @property
    def is_global_zero(self) -> bool:
        """Whether this process is global rank 0 (the one that logs and writes)."""
        return self.global_rank == 0

    def setup_environment(self) -> None:
        """Prepare devices and process groups; called once before the module is set up."""

    def connect_results(self, results: Results) -> None:
        """Take the run's results store (``self.log``'s); handed before :meth:`setup_module`."""

    def describe_failure(self, exception: BaseException) -> str | None:
        """What to tell the user of ``exception``, which ended the run here (None: nothing)."""
        return None

    #: Lightning's names, from the current (or last) run's set-up (None before one):
    #: what the step methods run through (the strategy's wrapper, if any), and the
    #: user's Module itself.
    model: nn.Module | None = None
    lightning_module: nn.Module | None = None

    def connect_module(self, module: nn.Module, trainer: Any = None) -> nn.Module:
        """Keep ``module`` as :attr:`lightning_module` and :attr:`model`, then set it up
        (:meth:`setup`, which calls :meth:`setup_module`); return :attr:`model`. The
        Trainer calls this, with itself."""
        self.lightning_module = self.model = module
        self.setup(trainer)
        assert self.model is not None
        return self.model

    def setup_module(self, module: nn.Module) -> nn.Module:
        """Move ``module`` to its device and wrap it if the strategy needs to.

        Args:
            module: the user's module.

        Returns:
            The module the loop calls the step methods through (itself or a wrapper).
        """
        return module.to(self.root_device)

    def setup_optimizers(self, optimizers: list[Optimizer]) -> list[Optimizer]:
        """Adapt optimizers to the wrapped module (identity by default).

        Args:
            optimizers: the optimizers returned by ``configure_optimizers``.
        """
        return optimizers

    def prepare_dataloader(self, dataloader: DataLoader[Any], *, training: bool) -> DataLoader[Any]:
        """Return the dataloader to iterate in this process (identity by default).

        Args:
            dataloader: the user's dataloader.
            training: True for the training loader, False for evaluation and prediction.
        """
        if training:
            advise_on_loading(dataloader, self.root_device, self.is_global_zero)
        return dataloader

    def step_function(self, module: nn.Module, name: str) -> Callable[..., Any]:
        """The callable that runs ``name`` ("training_step", ...) of the user's module.

        A wrapping strategy's callable goes through its wrapper (whose forward hooks must run).

        Args:
            module: the module returned by :meth:`setup_module`.
            name: the step method's name.
        """
        return getattr(self.unwrap(module), name)  # type: ignore[no-any-return]

    def batch_to_device(self, batch: T, dataloader_idx: int = 0) -> T:
        """Move a batch (tensors nested in containers) to ``root_device``.

        Args:
            batch: the batch as the dataloader yields it.
            dataloader_idx: the dataloader it comes from (the same move for each)."""
        return move_data_to_device(batch, self.root_device)

    def no_backward_sync(self, module: nn.Module) -> AbstractContextManager[Any]:
        """Context that skips gradient synchronisation during ``backward``.

        The loop enters it on micro-batches that do not step the optimizer (gradient
        accumulation): a data-parallel strategy need not all-reduce gradients it adds to.

        Args:
            module: the module returned by :meth:`setup_module`.
        """
        return _NO_SYNC_CONTEXT

    def fused_backward(self, slots: StepSlots) -> Callable[[Any, float], torch.Tensor] | None:
        """A pass computing a batch's loss with its gradients, or None: see trainkit.loops.step.

        Args:
            slots: what the step does around backward; refuse what the pass cannot honour.
        """
        return None

    # ------------------------------------------------------------ checkpoints
    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike[str]) -> None:
        """Write ``checkpoint`` atomically from global rank 0 (all wait); any strategy loads it.

        Args:
            checkpoint: the full training state.
            path: the file to write.
        """
        if self.is_global_zero:
            save_atomic(checkpoint, path)
        self.barrier("save_checkpoint")

    def load_checkpoint(
        self, path: str | os.PathLike[str], weights_only: bool = True
    ) -> dict[str, Any]:
        """Read a checkpoint (on CPU) in every process.

        Args:
            path: the checkpoint file.
            weights_only: False unpickles any object in it (a file the user trusts).
        """
        return load(path, weights_only=weights_only)

    # ------------------------------------------------------------- lifecycle
    def on_fit_end(self) -> None:
        """Called on every process when ``fit`` ends without an error (may be collective)."""

    def teardown(self) -> None:
        """Release process groups and device memory at the end of a run."""

    def end_run(self) -> None:
        """The run is over: :meth:`teardown`, and :attr:`model` is the Module again (unwrapped,
        as Lightning's after a run). The Trainer calls this."""
        self.teardown()
        self.model = self.lightning_module

    def compile_module(self, module: nn.Module, options: Any, warn: Any) -> Callable[[], None]:
        """Compile the user's forward in ``module`` (from :meth:`setup_module`); return the undo.

        Args:
            module: the set-up module; options: ``torch.compile``'s keyword arguments, or
                the context of the user's own ``torch.compile(module)`` call;
            warn: warns once about recompilations (see ``trainkit.utilities.compile``)."""
        return compile_forward(self.unwrap(module), options, warn)

    def unwrap(self, module: nn.Module) -> nn.Module:
        """Return the user's module from the one :meth:`setup_module` returned.

        Args:
            module: a module returned by :meth:`setup_module`.
        """
        return module
