"""The Trainer's read-only views: its options, the run's state, ranks and callbacks, by name.

Ported code reads ``trainer.max_epochs``, ``trainer.training``,
``trainer.checkpoint_callback`` or ``trainer.world_size`` as Lightning names
them. Each such name is a property here that reads the object owning the
value (the option groups, the run state, the strategy, the callback list);
nothing here stores anything, but for two things of launching an entry point:
a model that ``torch.compile`` returned is taken apart (the run trains the
module it wraps, compiled with that call's settings), and through the
launcher rank 0's run may end in another process (``ddp_spawn``), whose report
the Trainer adopts (the launcher writes nothing to the Trainer). The Trainer
(``trainkit/trainer/trainer.py``) inherits these views and keeps the entry
points and the set-up.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import signal
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from torch import nn

from trainkit import loggers
from trainkit.callbacks import defaults
from trainkit.callbacks.slots import clip_settings
from trainkit.checkpoint.callback_state import callback_state, load_callback_state
from trainkit.core.data import shut_down_workers
from trainkit.launch.outcome import RankZeroReport
from trainkit.loops.schedule import batches_between_checks, sanity_batches
from trainkit.loops.state import RunningStage, TrainerStatus
from trainkit.trainer import lightning_parts
from trainkit.trainer.accelerators import Accelerator, accelerator_for
from trainkit.trainer.evaluation_loops import (
    EvaluationLoop,
    PredictionLoop,
    evaluation_inference_mode,
    evaluation_loops,
    set_evaluation_loop,
)
from trainkit.trainer.fit_loop import FitLoop, change_options
from trainkit.trainer.options import DEFAULT_MAX_EPOCHS
from trainkit.trainer.step_settings import change_step_options
from trainkit.utilities.compile import CompileContext, compiled_parts

if TYPE_CHECKING:
    from trainkit.callbacks.base import Callback
    from trainkit.callbacks.slots import StepSlots
    from trainkit.checkpoint.preemption import Preemption
    from trainkit.core.module import Module
    from trainkit.core.optim import LRSchedulerConfig
    from trainkit.launch import Launcher
    from trainkit.loggers import Logger
    from trainkit.loops.results import Results
    from trainkit.loops.state import RunState
    from trainkit.loops.step import Optimization
    from trainkit.strategies import Strategy
    from trainkit.trainer.data_source import AttachedData
    from trainkit.trainer.options import HardwareOptions, LoopOptions, OutputOptions, StepOptions

T = TypeVar("T")


def _count(total: float) -> int | float:
    """A batch count as Lightning reports it: an int, or ``inf`` when unknown."""
    return int(total) if math.isfinite(total) else total


class TrainerViews:
    """Lightning-named, read-only properties of a Trainer."""

    # Set by the Trainer's constructor.
    hardware: HardwareOptions
    options: LoopOptions
    step_options: StepOptions
    output: OutputOptions
    state: RunState
    results: Results
    strategy: Strategy
    callbacks: list[Callback]
    launcher: Launcher | None
    preemption: Preemption
    step_slots: StepSlots
    default_root_dir: str
    _module: Module | None
    _optimization: Optimization | None
    warn: Callable[[str], None]  # from rank 0 (trainer/checkpointing.py)
    #: The context of the ``torch.compile(module)`` call whose result the last entry
    #: point was given (None: it was given a module), with which runs compile it.
    _compiled_with: CompileContext | None = None
    #: What the last entry point was given (the loops' ``_data_source`` reads it).
    _attached: AttachedData | None = None
    _loggers: list[Logger]
    lr_scheduler_configs: list[LRSchedulerConfig]
    train_dataloader: Any
    val_dataloaders: Any
    test_dataloaders: Any
    predict_dataloaders: Any
    #: The entry-point groups whose callbacks factories add to every Trainer.
    _callback_groups: tuple[str, ...] = (defaults.CALLBACKS_FACTORY,)
    #: What the default NonFiniteLoss does at a NaN or infinite loss.
    _nonfinite_action = "raise"

    # ------------------------------------------------------------ launching
    def _launch(self, function: Callable[..., T], model: Any, *args: Any) -> T:
        model = self._take_compiled(model)
        # Through the launcher when this process must start the job's ranks first.
        if self.launcher is None:
            return function(model, *args)
        outcome = self.launcher.launch(function, model, *args, report=self._rank_zero_report)
        if outcome.report is not None:  # rank 0 ran in a process this one started
            self._adopt(outcome.report, model if model is not None else self._module)
        return outcome.value

    def _take_compiled(self, model: Any) -> Any:
        # Lightning's way of compiling, trainer.fit(torch.compile(module)): the run
        # trains the module itself (parameter names without torch's "_orig_mod."),
        # whose forward it compiles with the same context as Trainer(compile=...)
        # would with options. model=None (the last fit's module) keeps fit's choice.
        if model is None:
            return model
        parts = compiled_parts(model)
        self._compiled_with = None if parts is None else parts[1]
        if parts is None:
            return model
        if self.hardware.compile_options is not None:
            raise ValueError(
                f"The model is already compiled (torch.compile returned it for your "
                f"{type(parts[0]).__name__}), and Trainer(compile=...) would compile it a "
                "second time. Pass the module itself to keep Trainer(compile=...), or build "
                "the Trainer without compile to keep your torch.compile settings."
            )
        return parts[0]

    def _compile_spec(self) -> Mapping[str, Any] | CompileContext | None:
        """How runs compile the module's forward (None: they do not); see ``_take_compiled``."""
        return self._compiled_with or self.hardware.compile_options

    def _rank_zero_report(self) -> RankZeroReport:
        # Read on rank 0, in a process the launcher started, for the caller's Trainer.
        module = self._module
        weights = module.state_dict() if module is not None else {}
        return RankZeroReport(
            module_state={name: value.detach().cpu() for name, value in weights.items()},
            run_state=self.state.state_dict(),
            callback_metrics={k: v.detach().cpu() for k, v in self.callback_metrics.items()},
            logged_metrics=dict(self.logged_metrics),
            callback_states=[callback_state(callback) for callback in self.callbacks],
            preempted=self.state.preempted,
            status=self.state.status,
            stop_signal=self.preemption.stopped_by,
            fit_ended=self.state.fit_ended,
        )

    def _adopt(self, report: RankZeroReport, module: Module | None) -> None:
        # Make the caller's module and Trainer look as if the run had happened here.
        if module is not None:
            module.load_state_dict(report.module_state)
        self.state.load_state_dict(report.run_state)
        self.state.preempted = report.preempted
        self.state.status = TrainerStatus(report.status)
        self.state.fit_ended = report.fit_ended
        self.preemption.stopped_by = report.stop_signal
        self.results.adopt(report.callback_metrics, report.logged_metrics)
        for callback, state in zip(self.callbacks, report.callback_states, strict=True):
            if state:
                load_callback_state(callback, state)

    # ------------------------------------------------------------ the run
    @property
    def accelerator(self) -> Accelerator:
        """What this process computes on: a ``CPUAccelerator`` or a ``CUDAAccelerator``."""
        return accelerator_for(self.strategy.root_device.type)

    @property
    def current_epoch(self) -> int:
        """The current epoch, counted from 0."""
        return self.state.epoch

    @property
    def global_step(self) -> int:
        """Optimizer steps taken so far (every optimizer's, in manual optimization)."""
        return self.state.global_step

    @property
    def is_last_batch(self) -> bool:
        """Whether the training batch running now is the epoch's last."""
        return self.state.is_last_batch

    @property
    def interrupted(self) -> bool:
        """Whether the last run ended by an exception or Ctrl-C."""
        return self.state.status == "interrupted"

    def _set_stage(self, stage: RunningStage, value: bool) -> None:
        # Lightning's setters of the stage flags: True makes ``stage`` the one running now
        # (code that drives hooks by hand, a test), False clears it if it was.
        if value:
            self.state.stage = stage
        elif self.state.stage == stage:
            self.state.stage = None

    @property
    def training(self) -> bool:
        """Whether training batches run now."""
        return self.state.stage == "train"

    @training.setter
    def training(self, value: bool) -> None:
        self._set_stage(RunningStage.TRAINING, value)

    @property
    def sanity_checking(self) -> bool:
        """True while the pre-training validation sanity check runs."""
        return self.state.stage == "sanity_check"

    @sanity_checking.setter
    def sanity_checking(self, value: bool) -> None:
        self._set_stage(RunningStage.SANITY_CHECKING, value)

    @property
    def validating(self) -> bool:
        """Whether validation runs now (inside fit or from ``validate``)."""
        return self.state.stage == "validate"

    @validating.setter
    def validating(self, value: bool) -> None:
        self._set_stage(RunningStage.VALIDATING, value)

    @property
    def testing(self) -> bool:
        """Whether ``test`` runs now."""
        return self.state.stage == "test"

    @testing.setter
    def testing(self, value: bool) -> None:
        self._set_stage(RunningStage.TESTING, value)

    @property
    def predicting(self) -> bool:
        """Whether ``predict`` runs now."""
        return self.state.stage == "predict"

    @predicting.setter
    def predicting(self, value: bool) -> None:
        self._set_stage(RunningStage.PREDICTING, value)

    @property
    def evaluating(self) -> bool:
        """Whether evaluation batches run now: validation, the sanity check or ``test``."""
        return self.state.stage in ("validate", "test", "sanity_check")

    @property
    def received_sigterm(self) -> bool:
        """Whether this fit got SIGTERM (it then stops at the next resume point and saves)."""
        return self.preemption.signal == signal.SIGTERM

    @property
    def scaler(self) -> torch.amp.GradScaler | None:
        """The float16 gradient scaler while fit runs with ``precision="16-mixed"``, else None."""
        precision = self.step_slots.precision
        return precision.scaler if precision is not None else None

    @property
    def precision_plugin(self) -> Any:
        """Lightning's precision plugin for this Trainer's precision (``Precision``,
        ``MixedPrecision`` with the run's scaler, ...; see ``trainkit.lightning.plugins``),
        made when asked for: the Trainer's ``precision`` option is what sets precision."""
        return lightning_parts.precision_plugin(self)

    @property
    def distributed_sampler_kwargs(self) -> dict[str, int] | None:
        """How training batches are shared out over the processes: ``num_replicas`` and
        ``rank`` for a ``DistributedSampler`` (None with one process)."""
        return self.strategy.distributed_sampler_kwargs

    @property
    def lightning_module(self) -> Module | None:
        """The user's Module of the current (or last) run; Lightning's name."""
        return self._module

    @property
    def model(self) -> nn.Module | None:
        """The user's Module of the current (or last) run; while a run is on, as Lightning's,
        the strategy's wrapper of it if any (``DistributedDataParallel`` under DDP)."""
        return self.strategy.model if self.strategy.model is not None else self._module

    @property
    def module(self) -> Module:
        """The user's Module being run."""
        if self._module is None:
            raise RuntimeError("No Module is attached: call fit/validate/test/predict first.")
        return self._module

    @property
    def optimization(self) -> Optimization:
        """How the running fit updates parameters (what manual optimization calls)."""
        if self._optimization is None:
            raise RuntimeError(
                "Optimizers are set up only while fit runs: call self.optimizers() and "
                "self.manual_backward() from training_step or a training hook."
            )
        return self._optimization

    @property
    def num_training_batches(self) -> int | float:
        """Batches per training epoch (after ``limit_train_batches``): an int, or ``inf``
        when unknown (a loader without a length)."""
        return _count(self.state.num_training_batches)

    @property
    def val_check_batch(self) -> int | float:
        """Training batches from one validation to the next (Lightning's name): the
        ``val_check_interval`` as a batch count; ``inf`` when the epoch's length is
        unknown (validation at its end)."""
        between = batches_between_checks(self.options, self.state.num_training_batches)
        return between or math.inf

    @property
    def num_val_batches(self) -> list[int | float]:
        """Batches run from each validation dataloader (ints; ``inf`` when unknown)."""
        return [_count(total) for total in self.state.num_val_batches]

    @property
    def num_sanity_val_batches(self) -> list[int | float]:
        """Batches the sanity check runs from each validation dataloader."""
        totals = sanity_batches(self.state.num_val_batches, self.options.num_sanity_val_steps)
        return [_count(total) for total in totals]

    @property
    def num_test_batches(self) -> list[int | float]:
        """Batches run from each test dataloader (ints; ``inf`` when unknown)."""
        return [_count(total) for total in self.state.num_test_batches]

    @property
    def num_predict_batches(self) -> list[int | float]:
        """Batches run from each prediction dataloader (ints; ``inf`` when unknown)."""
        return [_count(total) for total in self.state.num_predict_batches]

    @property
    def estimated_stepping_batches(self) -> int:
        """Optimizer steps the whole fit will take, for schedules such as OneCycleLR.

        Available from ``configure_optimizers`` on: the training dataloader's length
        (after ``limit_train_batches``) times the epochs, capped by ``max_steps``.
        """
        steps_in_epoch = self.step_slots.steps_in_epoch  # one per accumulation window
        return self.options.estimated_steps(self.state.num_training_batches, steps_in_epoch)

    @property
    def should_stop(self) -> bool:
        """Set to True to stop training after the current batch."""
        return self.state.should_stop

    @should_stop.setter
    def should_stop(self, value: bool) -> None:
        self.state.should_stop = value

    @property
    def preempted(self) -> bool:
        """True after fit stopped because of a preemption signal."""
        return self.state.preempted

    @property
    def log_dir(self) -> str | None:
        """Where to save a run's files, as Lightning documents it.

        The first logger's versioned folder for a TensorBoard or CSV logger, the
        first logger's ``save_dir`` for any other (None for a logger that writes
        no files, such as a fast dev run's), ``default_root_dir`` without loggers.
        """
        if not self.loggers:
            return self.default_root_dir
        first = self.loggers[0]
        versioned = isinstance(first, (loggers.TensorBoardLogger, loggers.CSVLogger))
        return first.log_dir if versioned else first.save_dir

    @property
    def train_metrics(self) -> Any:
        """The values logged in the current training epoch (the results store's)."""
        return self.results.train

    # ------------------------------------------------------------ metrics
    @property
    def callback_metrics(self) -> dict[str, torch.Tensor]:
        """Latest value of every logged metric (epoch results and current step values)."""
        return self.results.callback_metrics

    @property
    def logged_metrics(self) -> dict[str, torch.Tensor]:
        """The latest value written to the loggers, by name."""
        return self.results.logged_metrics

    @property
    def progress_bar_metrics(self) -> dict[str, float]:
        """Every prog_bar metric (and, while fit runs, the loss), as floats; kept after a run."""
        state = self.state
        return self.results.progress_bar_metrics(
            fitting=state.fn == "fit", running=state.status == "running"
        )

    # ------------------------------------------------------------ processes
    @property
    def global_rank(self) -> int:
        """This process's rank among all processes."""
        return self.strategy.global_rank

    @property
    def local_rank(self) -> int:
        """This process's rank on its machine."""
        return self.strategy.local_rank

    @property
    def node_rank(self) -> int:
        """This machine's rank in the job (from torchrun or SLURM; 0 on one machine)."""
        for name in ("NODE_RANK", "GROUP_RANK", "SLURM_NODEID"):
            if os.environ.get(name, "").isdigit():
                return int(os.environ[name])
        return 0

    @property
    def use_distributed_sampler(self) -> bool:
        """Whether the dataloaders get a ``DistributedSampler`` under data-parallel strategies
        (the ``use_distributed_sampler`` option). Settable, as Lightning's
        ``trainer._accelerator_connector.use_distributed_sampler``: a DataModule's
        ``setup`` may turn it off for loaders that split the data themselves; it holds
        for the loaders asked for after the assignment."""
        return self.hardware.use_distributed_sampler

    @use_distributed_sampler.setter
    def use_distributed_sampler(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"use_distributed_sampler must be True or False, not {value!r}.")
        self.hardware = replace(self.hardware, use_distributed_sampler=value)
        run = getattr(self, "_current", None)
        if run is not None:
            run.hardware = self.hardware

    @property
    def _accelerator_connector(self) -> lightning_parts.AcceleratorConnector:
        """Lightning's private ``trainer._accelerator_connector``, which projects read."""
        return lightning_parts.AcceleratorConnector(self)

    @property
    def _checkpoint_connector(self) -> lightning_parts.CheckpointConnector:
        """Lightning's private ``trainer._checkpoint_connector``, whose ``dump_checkpoint``
        projects call."""
        return lightning_parts.CheckpointConnector(self)  # type: ignore[arg-type]

    @property
    def world_size(self) -> int:
        """The number of processes in the job (also in the process that starts them, before
        it has, as in Lightning: what the launcher will start, on every machine)."""
        size = self.strategy.world_size
        if size == 1 and self.launcher is not None:
            return self.launcher.num_processes * self.hardware.num_nodes
        return size

    @property
    def num_nodes(self) -> int:
        """The ``num_nodes`` option: machines in the job."""
        return self.hardware.num_nodes

    @property
    def num_devices(self) -> int:
        """Devices each machine runs on."""
        return max(1, self.world_size // self.hardware.num_nodes)

    @property
    def device_ids(self) -> list[int]:
        """The indices of this machine's devices, as in Lightning: ``[0, ..., n - 1]`` for a
        process per device (each process runs on its local rank's), else the one in use."""
        devices = self.num_devices
        if devices > 1:
            return list(range(devices))
        index = self.strategy.root_device.index
        return [index if index is not None else 0]

    @property
    def is_global_zero(self) -> bool:
        """Whether this process is global rank 0 (the one that logs and writes)."""
        return self.strategy.is_global_zero

    # ------------------------------------------------------------ callbacks
    @property
    def checkpoint_callbacks(self) -> list[Any]:
        """Every ModelCheckpoint among the callbacks."""
        return defaults.checkpoint_callbacks(self.callbacks)

    @property
    def checkpoint_callback(self) -> Any:
        """The first ModelCheckpoint, or None."""
        found = self.checkpoint_callbacks
        return found[0] if found else None

    @property
    def early_stopping_callbacks(self) -> list[Any]:
        """Every EarlyStopping among the callbacks."""
        return defaults.early_stopping_callbacks(self.callbacks)

    @property
    def early_stopping_callback(self) -> Any:
        """The first EarlyStopping, or None."""
        found = self.early_stopping_callbacks
        return found[0] if found else None

    @property
    def progress_bar_callback(self) -> Any:
        """The progress bar callback, or None."""
        return defaults.progress_bar_callback(self.callbacks)

    # ------------------------------------------------------------ loggers
    @property
    def loggers(self) -> list[Logger]:
        """The loggers, written from global rank 0; settable, as in Lightning (an empty
        list or None: no logger), from the next value written on."""
        return self._loggers

    @loggers.setter
    def loggers(self, loggers: list[Logger] | None) -> None:
        self._loggers = loggers if loggers else []
        # Everything that writes holds the same list (the results, the run in progress).
        if (results := getattr(self, "results", None)) is not None:
            results.loggers = self._loggers
        if (run := getattr(self, "_current", None)) is not None:
            run.loggers = self._loggers

    @property
    def logger(self) -> Logger | None:
        """The first logger, or None; setting it replaces every logger (None: no logger)."""
        return self.loggers[0] if self.loggers else None

    @logger.setter
    def logger(self, logger: Logger | None) -> None:
        self.loggers = [] if logger is None else [logger]

    # ------------------------------------------------------------ options
    # The loop options Lightning keeps as plain Trainer attributes are settable here
    # too (trainer.limit_val_batches = 0); change_options says when a running fit
    # reads each.
    #: Whether a fit started on this Trainer: an unset ``max_epochs`` reads as the
    #: limit in force from then on (before, as in Lightning, as None).
    _epoch_limit_resolved = False

    @property
    def max_epochs(self) -> int | None:
        """The epoch limit, as Lightning reports it: the option as given; when it was
        not given, None until the first ``fit`` starts, then -1 when ``max_steps`` or
        ``max_time`` limits the run, else the default (1000)."""
        options = self.options
        if options.max_epochs is not None or not self._epoch_limit_resolved:
            return options.max_epochs
        limited = options.max_steps != -1 or options.max_time is not None
        return -1 if limited else DEFAULT_MAX_EPOCHS

    def _resolve_epoch_limit(self) -> None:
        # A fit starts (before any hook): an unset max_epochs takes the limit in force,
        # and the default of 1000 epochs is said once, in Lightning's words.
        if self._epoch_limit_resolved:
            return
        self._epoch_limit_resolved = True
        if self.options.max_epochs is None and self.max_epochs == DEFAULT_MAX_EPOCHS:
            self.warn(
                f"`max_epochs` was not set. Setting it to {DEFAULT_MAX_EPOCHS} epochs. To train "
                "without an epoch limit, set `max_epochs=-1`."
            )

    def _fitted_module(self, fn: str) -> Module:
        # validate/test/predict without a model: the one the last run used.
        if self._module is None:
            raise ValueError(
                f"trainer.{fn}() needs a model: pass one, e.g. trainer.{fn}(model, "
                "dataloaders), or call it after trainer.fit(model, ...) on this Trainer."
            )
        return self._module

    @property
    def fit_loop(self) -> FitLoop:
        """Lightning's ``trainer.fit_loop``: the fit's limits (settable: ``max_epochs``,
        ``epoch_loop.max_steps``, ...) and its progress, read from this Trainer."""
        return FitLoop(self)

    @functools.cached_property
    def _evaluation_loops(self) -> dict[str, EvaluationLoop]:
        # Made once: a setting made on a loop view holds for later runs.
        return evaluation_loops(self)

    @property
    def validate_loop(self) -> EvaluationLoop:
        """Lightning's ``trainer.validate_loop``: its ``inference_mode`` (settable)."""
        return self._evaluation_loops["validate"]

    @validate_loop.setter
    def validate_loop(self, loop: EvaluationLoop) -> None:
        set_evaluation_loop(self._evaluation_loops, "validate", loop)

    @property
    def test_loop(self) -> EvaluationLoop:
        """Lightning's ``trainer.test_loop``: its ``inference_mode`` (settable); the loop
        itself may be replaced by one printing the results its own way."""
        return self._evaluation_loops["test"]

    @test_loop.setter
    def test_loop(self, loop: EvaluationLoop) -> None:
        set_evaluation_loop(self._evaluation_loops, "test", loop)

    @property
    def predict_loop(self) -> PredictionLoop:
        """Lightning's ``trainer.predict_loop``: ``inference_mode``, ``predictions``,
        ``current_batch_indices``, ``num_dataloaders``, ``return_predictions``."""
        loop = self._evaluation_loops["predict"]
        assert isinstance(loop, PredictionLoop)
        return loop

    def _inference_mode_for(self, fn: str) -> bool:
        # Whether a run of fn evaluates under torch.inference_mode: its loop view's setting.
        return evaluation_inference_mode(self._evaluation_loops, self.options, fn)

    @property
    def min_epochs(self) -> int | None:
        """The ``min_epochs`` option."""
        return self.options.min_epochs

    @property
    def max_steps(self) -> int:
        """The ``max_steps`` option."""
        return self.options.max_steps

    @property
    def min_steps(self) -> int | None:
        """The ``min_steps`` option."""
        return self.options.min_steps

    @property
    def limit_train_batches(self) -> int | float:
        """The ``limit_train_batches`` option (after ``overfit_batches``)."""
        return self.options.limit_train_batches

    @limit_train_batches.setter
    def limit_train_batches(self, value: int | float) -> None:
        change_options(self, limit_train_batches=value)

    @property
    def limit_val_batches(self) -> int | float:
        """The ``limit_val_batches`` option (after ``overfit_batches``)."""
        return self.options.limit_val_batches

    @limit_val_batches.setter
    def limit_val_batches(self, value: int | float) -> None:
        change_options(self, limit_val_batches=value)

    @property
    def limit_test_batches(self) -> int | float:
        """The ``limit_test_batches`` option."""
        return self.options.limit_test_batches

    @limit_test_batches.setter
    def limit_test_batches(self, value: int | float) -> None:
        change_options(self, limit_test_batches=value)

    @property
    def limit_predict_batches(self) -> int | float:
        """The ``limit_predict_batches`` option."""
        return self.options.limit_predict_batches

    @limit_predict_batches.setter
    def limit_predict_batches(self, value: int | float) -> None:
        change_options(self, limit_predict_batches=value)

    @property
    def overfit_batches(self) -> int | float:
        """The ``overfit_batches`` option."""
        return self.options.overfit_batches

    @property
    def val_check_interval(self) -> int | float:
        """The ``val_check_interval`` option."""
        return self.options.val_check_interval

    @val_check_interval.setter
    def val_check_interval(self, value: int | float) -> None:
        change_options(self, val_check_interval=value)

    @property
    def check_val_every_n_epoch(self) -> int | None:
        """The ``check_val_every_n_epoch`` option."""
        return self.options.check_val_every_n_epoch

    @check_val_every_n_epoch.setter
    def check_val_every_n_epoch(self, value: int | None) -> None:
        change_options(self, check_val_every_n_epoch=value)

    @property
    def num_sanity_val_steps(self) -> float:
        """The ``num_sanity_val_steps`` option; ``inf`` for -1 (every batch), as Lightning
        reads it, so that ``trainer.num_sanity_val_steps > 0`` says whether one runs."""
        steps = self.options.num_sanity_val_steps
        return math.inf if steps == -1 else steps

    @num_sanity_val_steps.setter
    def num_sanity_val_steps(self, value: float) -> None:
        change_options(self, num_sanity_val_steps=-1 if value == math.inf else value)

    @property
    def log_every_n_steps(self) -> int:
        """Step metrics are written to loggers every this many optimizer steps."""
        return self.options.log_every_n_steps

    @log_every_n_steps.setter
    def log_every_n_steps(self, value: int) -> None:
        change_options(self, log_every_n_steps=value)

    @property
    def barebones(self) -> bool:
        """The ``barebones`` option."""
        return self.output.barebones

    @property
    def enable_autolog_hparams(self) -> bool:
        """The ``enable_autolog_hparams`` option."""
        return self.output.enable_autolog_hparams

    @property
    def reload_dataloaders_every_n_epochs(self) -> int:
        """The ``reload_dataloaders_every_n_epochs`` option."""
        return self.options.reload_dataloaders_every_n_epochs

    @reload_dataloaders_every_n_epochs.setter
    def reload_dataloaders_every_n_epochs(self, value: int) -> None:
        change_options(self, reload_dataloaders_every_n_epochs=value)

    @contextlib.contextmanager
    def _in_trial(
        self, optimization: Optimization, lr_scheduler_configs: list[LRSchedulerConfig] | None
    ) -> Iterator[None]:
        # While a tuner's trial trains: self.optimizers() is the trial's (so its manual
        # steps count), and lr_schedulers() the trial's when given (the learning rate
        # finder's sweep, as Lightning swaps its own in).
        saved = self._optimization, self.lr_scheduler_configs
        self._optimization = optimization
        if lr_scheduler_configs is not None:
            self.lr_scheduler_configs = lr_scheduler_configs
        try:
            yield
        finally:
            self._optimization, self.lr_scheduler_configs = saved

    def _end_dataloader_workers(self) -> None:
        # When a run ends: no dataloader worker outlives it (persistent_workers=True
        # keeps them between epochs), as Lightning ends them when its loops end.
        loaders = [self.train_dataloader, self.val_dataloaders, self.test_dataloaders]
        shut_down_workers([*loaders, self.predict_dataloaders])

    @property
    def accumulate_grad_batches(self) -> int:
        """Batches per optimizer step in the current epoch (from the option or a callback).

        Settable, as Lightning's attribute (an int, or trainkit's schedule
        ``{first_epoch: k}``): see ``trainkit/trainer/step_settings.py``.
        """
        accumulation = self.step_slots.accumulation
        return 1 if accumulation is None else accumulation.batches_for_epoch(self.current_epoch)

    @accumulate_grad_batches.setter
    def accumulate_grad_batches(self, value: int | dict[int, int]) -> None:
        change_step_options(self, accumulate_grad_batches=value)

    @property
    def gradient_clip_val(self) -> float | None:
        """The clipping threshold: ``gradient_clip_val``, or a GradientClipping callback's.

        Settable, as Lightning's attribute: see ``trainkit/trainer/step_settings.py``.
        """
        if self.step_slots.clipping is None:
            return self.step_options.gradient_clip_val  # None, or 0 (no clipping either)
        return clip_settings(self.step_slots.clipping)[0]

    @gradient_clip_val.setter
    def gradient_clip_val(self, value: float | None) -> None:
        change_step_options(self, gradient_clip_val=value)

    @property
    def gradient_clip_algorithm(self) -> str:
        """``"norm"`` or ``"value"``: the option's, or a GradientClipping callback's; settable."""
        if self.step_slots.clipping is None:
            return self.step_options.gradient_clip_algorithm
        return clip_settings(self.step_slots.clipping)[1]

    @gradient_clip_algorithm.setter
    def gradient_clip_algorithm(self, value: str | None) -> None:
        change_step_options(self, gradient_clip_algorithm="norm" if value is None else value)

    @property
    def precision(self) -> str:
        """The precision's canonical name, e.g. "32-true" or "bf16-mixed"."""
        return self.step_options.canonical_precision

    @property
    def enable_validation(self) -> bool:
        """Whether fit may validate (``limit_val_batches`` is not 0)."""
        return self.options.limit_val_batches != 0
