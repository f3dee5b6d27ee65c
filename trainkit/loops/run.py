"""Run: one fit, validate, test or predict, and everything it works with.

The Trainer builds a :class:`Run` when it has set the run up (strategy, model,
callbacks) and hands it down: the fit and evaluation loops, the optimization
step and the checkpoint code (collecting and restoring a run's state) receive
it, and read the pieces they need from it rather than from the Trainer. Only
the loops write to ``state`` and ``results``; the Trainer fills ``optimizers``
and ``lr_scheduler_configs`` when fit sets them up.

``trainer`` is what callbacks' hooks receive as their first argument
(Lightning's ``(trainer, pl_module, ...)`` signatures); code below the Trainer
passes it on and never reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainkit.loops.hooks import NO_CONTEXT

if TYPE_CHECKING:
    import torch
    from torch import nn

    from trainkit.callbacks.base import Callback
    from trainkit.callbacks.slots import StepSlots
    from trainkit.core.data import DataModule
    from trainkit.core.module import Module
    from trainkit.core.optim import LRSchedulerConfig
    from trainkit.loggers.base import Logger
    from trainkit.loops.hooks import Hooks
    from trainkit.loops.results import Results
    from trainkit.loops.state import RunState
    from trainkit.strategies.base import Strategy
    from trainkit.trainer.options import HardwareOptions, LoopOptions, StepOptions

__all__ = ["Predicting", "Run"]


@dataclass(eq=False)
class Predicting:
    """A predict run's progress: what it keeps, and the batch it is at."""

    #: Whether the outputs are kept (``return_predictions``).
    keep: bool
    #: The kept outputs so far, one list per dataloader (on the CPU; none when not kept).
    kept: list[list[Any]] = field(default_factory=list)
    #: ``(dataloader_idx, batch_idx)`` of the batch running or last run (None: none yet).
    position: tuple[int, int] | None = None
    #: Whether a ``predict_step`` returned None (warned about once a run).
    returned_none: bool = False


@dataclass(eq=False)
class Run:
    """What the loops, the step and the checkpoint code work with during one run."""

    #: "fit", "validate", "test" or "predict".
    fn: str
    #: Where the run is; the loops advance it.
    state: RunState
    #: Where ``self.log`` values go, and what callbacks and loggers read.
    results: Results
    #: The Module's and callbacks' hooks.
    hooks: Hooks
    #: Devices, processes, collectives.
    strategy: Strategy
    #: The user's Module.
    module: Module
    #: The module as the strategy wrapped it (the Module itself on one device).
    model: nn.Module
    #: The run's callbacks, in order (the Trainer's plus ``configure_callbacks``').
    callbacks: list[Callback]
    #: The run's loggers (written from global rank 0).
    loggers: list[Logger]
    #: The run's DataModule, if any.
    datamodule: DataModule | None
    #: The step's shape: precision, clipping, accumulation and non-finite handling.
    step_slots: StepSlots
    #: The option groups the run was built from (recorded in checkpoints).
    hardware: HardwareOptions
    options: LoopOptions
    step_options: StepOptions
    #: What callbacks' hooks receive as ``trainer``.
    trainer: Any
    #: Warns once, from global rank 0.
    warn: Callable[[str], None]
    #: A new context to enter around each step method (autocast), or None for none.
    forward_context: Callable[[], AbstractContextManager[Any] | None]
    #: Moves a batch of dataloader ``dataloader_idx`` to the device (``hooks.batch_transfer``).
    batch_to_device: Callable[[Any, int], Any]
    #: Evaluate under torch.inference_mode (False: torch.no_grad).
    inference_mode: bool = True
    #: The optimizers as the strategy set them up (fit only).
    optimizers: list[torch.optim.Optimizer] = field(default_factory=list)
    #: The LR schedulers and when they step (fit only).
    lr_scheduler_configs: list[LRSchedulerConfig] = field(default_factory=list)
    #: The fit loop's data while fit runs (``trainer.fit_loop`` changes its limits).
    fit: Any = None
    #: A predict run's progress (``trainer.predict_loop`` reads it); None in the others.
    predicting: Predicting | None = None

    @property
    def is_global_zero(self) -> bool:
        """Whether this process is global rank 0 (the one that writes files and logs)."""
        return self.strategy.is_global_zero

    def step_context(self) -> AbstractContextManager[Any]:
        """The context around one step method (a shared null context when there is none)."""
        return self.forward_context() or NO_CONTEXT
