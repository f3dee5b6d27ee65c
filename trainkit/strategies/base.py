"""The Strategy ABC: how the model and data are spread over devices and processes.

It answers the loop: which device is mine, am I rank 0, how is the module wrapped, how is a
dataloader prepared, how does backward run, how do values travel between processes. On one
device the collectives return their input: the loop never asks "am I distributed?".
Launching processes is not a strategy's business (``trainkit.launch``)."""

from __future__ import annotations

import contextlib
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import torch
from torch import nn
from torch.optim import Optimizer
from torch.overrides import TorchFunctionMode
from torch.utils.data import DataLoader

from trainkit.checkpoint.files import load, save_atomic
from trainkit.core.batches import move_data_to_device
from trainkit.distributed.sampling import advise_on_loading
from trainkit.strategies.registrable import Registrable
from trainkit.utilities.compile import compile_forward

if TYPE_CHECKING:
    from trainkit.callbacks.slots import StepSlots
    from trainkit.loops.results import Results

ReduceOp = Literal["sum", "mean", "max", "min"]
_NO_SYNC_CONTEXT = nullcontext()  # a null context carries no state: one serves every step
T = TypeVar("T")


class Strategy(Registrable, ABC):
    """Base class of all strategies (its registry declarations: :class:`Registrable`)."""

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

    @contextlib.contextmanager
    def tensor_init_context(self, empty_init: bool | None = None) -> Iterator[None]:
        """Tensors made inside are made on this process's device, in the precision's dtype.

        ``Trainer.init_module()`` enters it. With ``precision="bf16-true"`` floating
        tensors are bfloat16.

        Args:
            empty_init: True leaves parameters uninitialized (``torch.nn.init``'s
                random initializers do nothing), for a model whose weights a
                checkpoint replaces at once; None or False initializes them as usual.
        """
        with skipped_init(bool(empty_init)), self.root_device, default_dtype(self.precision):
            yield

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

    # ------------------------------------------------------------ collectives
    # Every rank must call a collective at the same point, or the job hangs (trainkit does).
    @abstractmethod
    def all_reduce(self, tensor: torch.Tensor, op: ReduceOp = "mean") -> torch.Tensor:
        """Reduce ``tensor`` over all processes and return the result.

        Args:
            tensor: a tensor on ``root_device``; not modified.
            op: "sum", "mean", "max" or "min".
        """

    @abstractmethod
    def all_gather(
        self, tensor: torch.Tensor, group: Any = None, sync_grads: bool = False
    ) -> torch.Tensor:
        """Gather ``tensor`` from all processes, stacked along a new first dimension.

        Args:
            tensor: a tensor of the same shape on every process.
            group: a ``torch.distributed`` process group (None: every process).
            sync_grads: let gradients flow back to each process's ``tensor``.
        """

    @abstractmethod
    def broadcast(self, obj: T, src: int = 0) -> T:
        """Send a picklable object from rank ``src`` to all processes.

        Args:
            obj: the object (only the value on ``src`` matters).
            src: the sending rank.
        """

    @abstractmethod
    def barrier(self, name: str | None = None) -> None:
        """Wait until every process reaches this point.

        Args:
            name: a label for debugging.
        """

    def exchange(self, point: str, payload: Sequence[int] = ()) -> list[list[int]]:
        """Every process's integers, by rank, once every process has reached ``point``.

        Multi-process strategies fail naming each process's point when they differ,
        instead of pairing unrelated collectives; every process must call this.

        Args:
            point: where the processes are, in words.
            payload: this process's integers (at most 8).
        """
        return [list(payload)]

    def reduce_boolean_decision(
        self, decision: bool, all_: bool = True, point: str = "a decision"
    ) -> bool:
        """Agree on a decision across processes (for example "stop training").

        Args:
            decision: this process's decision.
            all_: True to require every process to agree, False for any.
            point: where the processes decide, in words (named if they disagree on where).
        """
        flag = torch.tensor(float(decision), device=self.root_device)
        reduced = self.all_reduce(flag, op="min" if all_ else "max")
        return bool(reduced.item())

    def reduce_logged(
        self,
        values: Sequence[tuple[str, torch.Tensor, ReduceOp]],
        point: str,
        *,
        always: bool = False,
    ) -> list[torch.Tensor]:
        """Reduce values logged with ``sync_dist=True`` across processes; the results in order.

        Multi-process strategies first check that every process reduces the same
        names at the same point, and fail naming them when not (a value logged
        on some processes only would otherwise pair with another collective).

        Args:
            values: ``(name, value, op)`` for each value, op "sum", "mean", "max" or "min".
            point: where they are reduced, in words ("the end of a training epoch").
            always: check even when there is nothing to reduce (at points every
                process reaches; a process with nothing logged must still come).
        """
        return [self.all_reduce(value, op) for _, value, op in values]

    def agree_max(self, values: Sequence[int]) -> Callable[[], list[int]]:
        """Start an element-wise maximum of ``values`` over processes, without waiting.

        The agreement travels in the background; the returned function gives the
        result, waiting only if it is still under way. The loop's preemption vote
        (``trainkit.checkpoint.preemption.StopVote``) uses it so that a signal reaching only
        some processes stops all of them at the same point. Every process must
        call this at the same points, with as many values.

        Args:
            values: this process's integers.
        """
        agreed = list(values)
        return lambda: agreed

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

    def load_checkpoint(self, path: str | os.PathLike[str]) -> dict[str, Any]:
        """Read a checkpoint (on CPU, ``weights_only=True``) in every process.

        Args:
            path: the checkpoint file.
        """
        return load(path)

    # ------------------------------------------------------------- lifecycle
    def on_fit_end(self) -> None:
        """Called on every process when ``fit`` ends without an error (may be collective)."""

    def teardown(self) -> None:
        """Release process groups and device memory at the end of a run."""

    def compile_module(self, module: nn.Module, options: Any, warn: Any) -> Callable[[], None]:
        """Compile the user's forward in ``module`` (from :meth:`setup_module`); return the undo.

        Args:
            module: the set-up module; options: ``torch.compile``'s keyword arguments;
            warn: warns once about recompilations (see ``trainkit.utilities.compile``)."""
        return compile_forward(self.unwrap(module), options, warn)

    def unwrap(self, module: nn.Module) -> nn.Module:
        """Return the user's module from the one :meth:`setup_module` returned.

        Args:
            module: a module returned by :meth:`setup_module`.
        """
        return module


class _SkipInit(TorchFunctionMode):
    # torch.nn.init's functions dispatch through __torch_function__ while a mode is
    # active: answering with the tensor as it is skips the initialization.
    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if getattr(func, "__module__", None) == "torch.nn.init":
            return kwargs["tensor"] if "tensor" in kwargs else args[0]
        return func(*args, **kwargs)


def skipped_init(enabled: bool) -> AbstractContextManager[Any]:
    """Inside, ``torch.nn.init``'s random initializers leave tensors as they are (if enabled).

    The layers of ``torch.nn`` initialize their parameters with them (``uniform_``,
    ``kaiming_uniform_``, ``normal_``, ...), so they are made without the work.

    Args:
        enabled: False returns a context that changes nothing.

    Example:
        >>> weight = torch.zeros(2, 2)
        >>> with skipped_init(True):
        ...     torch.nn.init.uniform_(weight).sum().item()
        0.0
        >>> with skipped_init(True):
        ...     layer = nn.Linear(2, 2)  # not initialized: whatever the memory held
    """
    return _SkipInit() if enabled else nullcontext()


@contextlib.contextmanager
def default_dtype(precision: str) -> Iterator[None]:
    """Inside, floating tensors are made in the dtype of a "true" precision ("bf16-true").

    Args:
        precision: the Trainer's canonical precision; any other leaves the default.
    """
    dtype = {"bf16-true": torch.bfloat16}.get(precision)
    if dtype is None:
        yield
        return
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)
