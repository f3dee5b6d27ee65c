"""Trainer: builds the strategy, callbacks and loggers, and runs fit/validate/test/predict.

The constructor turns Lightning-style keyword arguments into three things: a
:class:`~trainkit.strategies.Strategy` (devices and processes), a list of
callbacks (user callbacks plus the ones the flags ask for), and loggers. The loop
options are grouped in :class:`~trainkit.options.LoopOptions`. The loops
themselves are in ``trainkit/loop.py``.
"""

from __future__ import annotations

import math
import os
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from torch import nn

from trainkit import checkpoint as checkpoint_io
from trainkit import loop
from trainkit.callbacks.base import Callback
from trainkit.data import (
    DataModule,
    extract_batch_size,
    limit_batches,
    num_batches,
    with_worker_seeding,
)
from trainkit.loggers.base import Logger
from trainkit.metrics import MetricStore, Number, as_tensor, display_names, to_floats
from trainkit.module import Module
from trainkit.optim import LRSchedulerConfig, parse_optimizers
from trainkit.options import LoopOptions
from trainkit.preemption import Preemption, StopVote
from trainkit.seed import (
    isolated_rng,
    seed_everything,
    set_deterministic,
)
from trainkit.state import TrainState
from trainkit.strategies import Strategy, resolve_launcher, resolve_strategy

if TYPE_CHECKING:
    from trainkit.strategies.dp import ReplicaLogs

T = TypeVar("T")


class Trainer:
    """Trains, evaluates and runs a :class:`~trainkit.Module`.

    Args:
        max_epochs: stop after this many epochs (None: no limit when ``max_steps``
            is set, else 1000).
        max_steps: stop after this many optimizer steps (-1: no limit).
        accelerator: "cpu", "cuda" (alias "gpu") or "auto" (CUDA when available).
        devices: how many devices (or a list of CUDA indices); "auto" is one.
        strategy: "auto", a strategy name, or a :class:`~trainkit.strategies.Strategy`.
        process_group_timeout: seconds a collective waits for the other processes
            before the job fails with an error (instead of hanging); for
            multi-process strategies.
        precision: numeric precision; "32-true" (full float32) is the default.
        callbacks: callbacks, called in this order after the Module's own hooks.
        logger: True for a TensorBoard logger under ``default_root_dir``, False for
            none, or a Logger / list of Loggers.
        default_root_dir: where logs (and later checkpoints) go; the working
            directory by default.
        val_check_interval: validate every n training batches (int) or this
            fraction of an epoch (float).
        check_val_every_n_epoch: validate in every n-th epoch (None: count an int
            ``val_check_interval`` across epochs).
        limit_train_batches: batches per epoch (int) or fraction (float).
        limit_val_batches: validation batches per run (int) or fraction (float).
        limit_test_batches: test batches (int) or fraction (float).
        limit_predict_batches: prediction batches (int) or fraction (float).
        fast_dev_run: run n batches (True: 1) of each stage with no logging, to
            catch bugs fast.
        num_sanity_val_steps: validation batches run before training (-1: all).
        log_every_n_steps: write step metrics every n optimizer steps.
        enable_progress_bar: add a progress bar (``TQDMProgressBar``) unless one is
            among ``callbacks``.
        enable_model_summary: print a parameter table at fit start.
        enable_checkpointing: add a ModelCheckpoint (newest epoch and
            ``last.ckpt`` under ``default_root_dir/checkpoints``) unless one is
            among ``callbacks``.
        seed: seed every random generator before anything is built.
        deterministic: make torch use deterministic kernels.
        gradient_clip_val: clip gradients to this norm (None: no clipping).
        gradient_clip_algorithm: "norm" or "value".
        accumulate_grad_batches: step the optimizer every n batches.

    Example:
        >>> import trainkit
        >>> trainer = trainkit.Trainer(max_epochs=1, logger=False, enable_progress_bar=False)
        >>> trainer.max_epochs
        1
    """

    def __init__(
        self,
        *,
        max_epochs: int | None = None,
        max_steps: int = -1,
        accelerator: str = "auto",
        devices: int | list[int] | str = "auto",
        strategy: str | Strategy = "auto",
        process_group_timeout: float = 1800.0,
        precision: str | int = "32-true",
        callbacks: Callback | list[Callback] | None = None,
        logger: bool | Logger | list[Logger] | None = True,
        default_root_dir: str | os.PathLike[str] | None = None,
        val_check_interval: int | float = 1.0,
        check_val_every_n_epoch: int | None = 1,
        limit_train_batches: int | float = 1.0,
        limit_val_batches: int | float = 1.0,
        limit_test_batches: int | float = 1.0,
        limit_predict_batches: int | float = 1.0,
        fast_dev_run: bool | int = False,
        num_sanity_val_steps: int = 2,
        log_every_n_steps: int = 50,
        enable_progress_bar: bool = True,
        enable_model_summary: bool = True,
        enable_checkpointing: bool = True,
        seed: int | None = None,
        deterministic: bool = False,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str = "norm",
        accumulate_grad_batches: int | dict[int, int] = 1,
    ) -> None:
        if seed is not None:
            seed_everything(seed)
        set_deterministic(deterministic)
        self.options = LoopOptions(
            max_epochs=max_epochs,
            max_steps=max_steps,
            limit_train_batches=limit_train_batches,
            limit_val_batches=limit_val_batches,
            limit_test_batches=limit_test_batches,
            limit_predict_batches=limit_predict_batches,
            val_check_interval=val_check_interval,
            check_val_every_n_epoch=check_val_every_n_epoch,
            num_sanity_val_steps=num_sanity_val_steps,
            log_every_n_steps=log_every_n_steps,
            fast_dev_run=fast_dev_run,
        ).resolved()
        self.fast_dev_run = self.options.fast_dev_run_batches
        if not process_group_timeout > 0:
            raise ValueError(
                f"process_group_timeout={process_group_timeout!r} must be a positive number "
                "of seconds."
            )
        self.strategy = resolve_strategy(
            strategy, accelerator, devices, timeout=timedelta(seconds=process_group_timeout)
        )
        #: Starts the ranks inside fit/validate/test/predict (``ddp_spawn``);
        #: None when this process is a rank itself.
        self.launcher = resolve_launcher(strategy, accelerator, devices)
        self.default_root_dir = os.fspath(default_root_dir or os.getcwd())
        self.callbacks = _build_callbacks(
            callbacks,
            enable_progress_bar=enable_progress_bar,
            enable_model_summary=enable_model_summary and not self.fast_dev_run,
            enable_checkpointing=enable_checkpointing and not self.fast_dev_run,
            precision=precision,
            gradient_clip_val=gradient_clip_val,
            gradient_clip_algorithm=gradient_clip_algorithm,
            accumulate_grad_batches=accumulate_grad_batches,
        )
        self.loggers = [] if self.fast_dev_run else _build_loggers(logger, self.default_root_dir)

        self.state = TrainState()
        self.optimizers: list[torch.optim.Optimizer] = []
        self.lr_scheduler_configs: list[LRSchedulerConfig] = []
        self.train_metrics = MetricStore(self.strategy.all_reduce)
        self.eval_metrics = MetricStore(self.strategy.all_reduce)
        self.num_training_batches: float = 0.0
        self.num_val_batches: list[float] = []
        self.num_test_batches: list[float] = []
        self.num_predict_batches: list[float] = []
        # Loop bookkeeping (read by trainkit.loop and Module.log).
        self.logging_mode: str | None = None  # "train_step", "train_epoch", "eval" or None
        self.current_batch: Any = None
        #: Collects what ``self.log`` receives inside DataParallel's device copies.
        self.replica_logs: ReplicaLogs | None = None
        self.dataloader_suffix = ""
        self.last_loss: torch.Tensor | None = None
        self.batches_seen = 0
        #: Samples all processes take per batch (None when the loader has no batch size).
        self.samples_per_step: int | None = None
        self.has_validation = False
        self._module: Module | None = None
        self._model: nn.Module | None = None
        self._hooks: loop.Hooks | None = None
        self._val_loaders: list[Iterable[Any]] = []
        self._step_hook: Any = None
        self._callback_metrics: dict[str, Number] = {}
        self.logged_metrics: dict[str, float] = {}
        #: The DataModule of the current run, if it has one.
        self.datamodule: DataModule | None = None
        #: Identifies a training run across its resumes (saved in its checkpoints).
        self.lineage: str | None = None
        #: The resolved configuration of a run started from a config (saved in checkpoints).
        self.run_config: dict[str, Any] | None = None
        self.preemption = Preemption()
        #: Agrees across processes whether to stop for a preemption signal (set by fit).
        self.preemption_vote = StopVote(self.strategy.agree_max, spaced=False)
        #: True after fit stopped because of a preemption signal.
        self.preempted = False

    # ---------------------------------------------------------------- entry points
    def fit(
        self,
        model: Module,
        train_dataloaders: Iterable[Any] | DataModule | None = None,
        val_dataloaders: Iterable[Any] | list[Iterable[Any]] | None = None,
        datamodule: DataModule | None = None,
        ckpt_path: str | os.PathLike[str] | None = None,
    ) -> None:
        """Train ``model``, validating as configured.

        Args:
            model: the Module to train.
            train_dataloaders: the training dataloader (or a DataModule).
            val_dataloaders: validation dataloader(s).
            datamodule: a DataModule supplying the dataloaders instead.
            ckpt_path: resume from this checkpoint, exactly where it was saved;
                ``"last"`` resumes from the newest ``last.ckpt`` if there is one
                (and starts fresh if not), so the same command serves the first
                start and every restart.
        """
        if isinstance(train_dataloaders, DataModule):
            train_dataloaders, datamodule = None, train_dataloaders
        if self.launcher is not None:
            self.launcher.launch(
                self, "fit", model, train_dataloaders, val_dataloaders, datamodule, ckpt_path
            )
            return
        self._run(
            "fit",
            model,
            datamodule,
            lambda: self._fit(model, train_dataloaders, val_dataloaders, datamodule, ckpt_path),
        )
        if self.preempted:
            if self.is_global_zero:
                print(
                    f"trainkit: stopped by signal {self.preemption.signal} after saving a "
                    "checkpoint; restart with ckpt_path='last' to continue.",
                    flush=True,
                )
            raise SystemExit(0)

    def validate(
        self,
        model: Module,
        dataloaders: Iterable[Any] | list[Iterable[Any]] | DataModule | None = None,
        datamodule: DataModule | None = None,
        ckpt_path: str | os.PathLike[str] | None = None,
    ) -> list[dict[str, float]]:
        """Run one validation epoch and return its metrics, one dict per dataloader.

        Args:
            model: the Module to evaluate.
            dataloaders: validation dataloader(s) (or a DataModule).
            datamodule: a DataModule supplying ``val_dataloader`` instead.
            ckpt_path: load the model's weights from this checkpoint first.
        """
        return self._evaluate("validate", model, dataloaders, datamodule, ckpt_path)

    def test(
        self,
        model: Module,
        dataloaders: Iterable[Any] | list[Iterable[Any]] | DataModule | None = None,
        datamodule: DataModule | None = None,
        ckpt_path: str | os.PathLike[str] | None = None,
    ) -> list[dict[str, float]]:
        """Run one test epoch and return its metrics, one dict per dataloader.

        Args:
            model: the Module to evaluate.
            dataloaders: test dataloader(s) (or a DataModule).
            datamodule: a DataModule supplying ``test_dataloader`` instead.
            ckpt_path: load the model's weights from this checkpoint first.
        """
        return self._evaluate("test", model, dataloaders, datamodule, ckpt_path)

    def predict(
        self,
        model: Module,
        dataloaders: Iterable[Any] | list[Iterable[Any]] | DataModule | None = None,
        datamodule: DataModule | None = None,
        ckpt_path: str | os.PathLike[str] | None = None,
    ) -> list[Any]:
        """Run ``predict_step`` over the data and return the predictions.

        Args:
            model: the Module.
            dataloaders: prediction dataloader(s) (or a DataModule).
            datamodule: a DataModule supplying ``predict_dataloader`` instead.
            ckpt_path: load the model's weights from this checkpoint first.

        Returns:
            One entry per batch; with several dataloaders, one such list per loader.
        """
        if isinstance(dataloaders, DataModule):
            dataloaders, datamodule = None, dataloaders
        if self.launcher is not None:
            return self.launcher.launch(  # type: ignore[no-any-return]
                self, "predict", model, dataloaders, datamodule, ckpt_path
            )

        def run() -> list[Any]:
            self._load_weights(model, ckpt_path)
            loaders = self._eval_loaders("predict", model, dataloaders, datamodule)
            totals = self._limited_totals(
                loaders, self.options.limit_predict_batches, "limit_predict_batches"
            )
            self.num_predict_batches = totals
            results = loop.run_predict(self, self._require_model(), loaders, totals)
            return results[0] if len(results) == 1 else results

        return self._run("predict", model, datamodule, run)

    # ------------------------------------------------------------ state (public)
    @property
    def module(self) -> Module:
        """The user's Module being run."""
        if self._module is None:
            raise RuntimeError("No Module is attached: call fit/validate/test/predict first.")
        return self._module

    @property
    def hooks(self) -> loop.Hooks:
        """The hook table of the current run."""
        if self._hooks is None:
            raise RuntimeError("Hooks exist only while fit/validate/test/predict runs.")
        return self._hooks

    @property
    def current_epoch(self) -> int:
        """The current epoch, counted from 0."""
        return self.state.epoch

    @property
    def global_step(self) -> int:
        """Optimizer steps taken so far."""
        return self.state.global_step

    @property
    def max_epochs(self) -> int | None:
        """The ``max_epochs`` option."""
        return self.options.max_epochs

    @property
    def max_steps(self) -> int:
        """The ``max_steps`` option."""
        return self.options.max_steps

    @property
    def log_every_n_steps(self) -> int:
        """Step metrics are written to loggers every this many optimizer steps."""
        return self.options.log_every_n_steps

    @property
    def estimated_stepping_batches(self) -> int:
        """Optimizer steps the whole fit will take, for schedules such as OneCycleLR.

        Available from ``configure_optimizers`` on: the training dataloader's length
        (after ``limit_train_batches``) times the epochs, capped by ``max_steps``.
        """
        max_steps = self.options.max_steps
        batches = self.num_training_batches
        epochs = self.options.resolved_max_epochs
        if batches == math.inf or epochs == math.inf:
            if max_steps == -1:
                raise RuntimeError(
                    "The number of optimizer steps is unknown (the training dataloader has no "
                    "length, or max_epochs is unlimited); set max_steps."
                )
            return max_steps
        # With gradient accumulation an epoch takes one step per window, and the
        # window may change with the epoch.
        counters = [cb.steps_in_epoch for cb in self.callbacks if hasattr(cb, "steps_in_epoch")]
        total = 0
        for epoch in range(int(epochs)):
            steps = batches
            for steps_in_epoch in counters:
                steps = steps_in_epoch(batches, epoch)
            total += int(steps)
        return total if max_steps == -1 else min(total, max_steps)

    @property
    def should_stop(self) -> bool:
        """Set to True to stop training after the current batch."""
        return self.state.should_stop

    @should_stop.setter
    def should_stop(self, value: bool) -> None:
        self.state.should_stop = value

    @property
    def sanity_checking(self) -> bool:
        """True while the pre-training validation sanity check runs."""
        return self.state.sanity_checking

    @property
    def is_global_zero(self) -> bool:
        """Whether this process is global rank 0 (the one that logs and writes)."""
        return self.strategy.is_global_zero

    @property
    def logger(self) -> Logger | None:
        """The first logger, or None."""
        return self.loggers[0] if self.loggers else None

    @property
    def log_dir(self) -> str:
        """The first logger's folder, or ``default_root_dir`` without loggers."""
        return self.loggers[0].log_dir if self.loggers else self.default_root_dir

    @property
    def callback_metrics(self) -> dict[str, torch.Tensor]:
        """Latest value of every logged metric (epoch results and current step values)."""
        values = dict(self._callback_metrics)
        values.update(self.train_metrics.step_values(sync=False))
        return {name: as_tensor(value) for name, value in values.items()}

    @property
    def progress_bar_metrics(self) -> dict[str, float]:
        """The training loss and every prog_bar metric, as floats.

        Reading this synchronises with the device: the progress bar reads it only
        when it redraws. Training values appear only while fitting; the training
        loss is added as "loss" unless the user already shows that same value.
        """
        fitting = self.state.stage == "fit"
        keys = display_names(self.eval_metrics, prog_bar=True, logger=None)
        if fitting:
            keys |= display_names(self.train_metrics, prog_bar=True, logger=None)
        values = to_floats(self.callback_metrics, keys)
        loss = self.last_loss
        if fitting and loss is not None and "loss" not in values:
            shown = (
                entry.step_value
                for entry in self.train_metrics.entries.values()
                if entry.prog_bar and isinstance(entry.step_value, torch.Tensor)
            )
            # A detached loss shares the loss's storage: same pointer, same value.
            if not any(value.data_ptr() == loss.data_ptr() for value in shown):
                values = {"loss": float(loss.detach()), **values}
        return values

    # --------------------------------------------------- used by trainkit.loop
    def update_callback_metrics(self, values: Mapping[str, Number]) -> None:
        """Record epoch results so callbacks (early stopping, schedulers) can read them.

        Args:
            values: metric name to value.
        """
        self._callback_metrics.update(values)

    def write_to_loggers(self, values: Mapping[str, Number], keys: set[str], step: int) -> None:
        """Send the ``keys`` among ``values`` to every logger, from global rank 0 only.

        Args:
            values: metric name to value (tensors are read here).
            keys: the names to send (those logged with ``logger=True``).
            step: the global step to record them at.
        """
        if not self.loggers or not self.is_global_zero:
            return
        floats = to_floats(dict(values), keys)
        if not floats:
            return
        floats["epoch"] = float(self.state.epoch)
        self.logged_metrics.update(floats)
        for logger in self.loggers:
            logger.log_metrics(floats, step)

    def run_validation(self) -> None:
        """Run a validation epoch inside fit and write its metrics to the loggers."""
        totals = self.num_val_batches
        # Validation must not move the training's random streams (see isolated_rng).
        with isolated_rng():
            loop.run_evaluation(
                self, self._require_model(), self._val_loaders, totals, "validation"
            )
        if not self.sanity_checking:
            keys = display_names(self.eval_metrics, prog_bar=None, logger=True)
            self.write_to_loggers(self._callback_metrics, keys, step=max(self.global_step - 1, 0))
        # Agree across processes, so that no rank leaves the loop alone.
        self.state.should_stop = self.strategy.reduce_boolean_decision(
            self.state.should_stop, all_=False
        )

    def warn(self, message: str) -> None:
        """Emit a warning from global rank 0 only.

        Args:
            message: the warning text.
        """
        if self.is_global_zero:
            warnings.warn(message, stacklevel=2)

    # ------------------------------------------------------------ checkpoints
    def save_checkpoint(self, path: str | os.PathLike[str]) -> None:
        """Save the full training state to ``path`` (atomically; global rank 0 writes).

        The checkpoint holds the model, optimizers, LR schedulers, the loop's
        counters, callback states, the data position and random states, the
        logged metrics so far, the loggers' versions, the hyperparameters and the
        trainkit and torch versions. Saved at a resume point (where
        ModelCheckpoint saves), it resumes exactly.

        Args:
            path: the file to write.
        """
        self.strategy.save_checkpoint(checkpoint_io.collect_state(self), path)

    def save_preemption_checkpoint(self) -> None:
        """Save ``last.ckpt`` after a preemption signal and mark the run preempted."""
        self.save_checkpoint(self._last_checkpoint_paths()[0])
        self.preempted = True

    def _resolve_ckpt_path(self, ckpt_path: str | os.PathLike[str] | None) -> Path | None:
        if ckpt_path is None:
            return None
        if os.fspath(ckpt_path) != "last":
            return Path(ckpt_path)
        candidates = [path for path in self._last_checkpoint_paths() if path.is_file()]
        if not candidates:
            self.warn(
                "ckpt_path='last': no last.ckpt found in "
                f"{[str(p.parent) for p in self._last_checkpoint_paths()]}; starting from scratch."
            )
            return None
        return max(candidates, key=lambda path: path.stat().st_mtime)

    def _last_checkpoint_paths(self) -> list[Path]:
        """Where ``last.ckpt`` lives: each ModelCheckpoint's, else under default_root_dir."""
        paths = []
        for callback in self.callbacks:
            last = getattr(callback, "last_checkpoint_path", None)
            if callable(last):
                paths.append(Path(last(self)))
        return paths or [Path(self.default_root_dir) / "checkpoints" / "last.ckpt"]

    def _load_weights(self, model: Module, ckpt_path: str | os.PathLike[str] | None) -> None:
        resolved = self._resolve_ckpt_path(ckpt_path)
        if resolved is None:
            return
        checkpoint = self.strategy.load_checkpoint(resolved)
        model.on_load_checkpoint(checkpoint)
        checkpoint_io.load_module_state(model, checkpoint["state_dict"], str(resolved))

    # ----------------------------------------------------- called by Module
    def _log(
        self,
        name: str,
        value: torch.Tensor | float | int,
        on_step: bool | None,
        on_epoch: bool | None,
        prog_bar: bool,
        logger: bool,
        sync_dist: bool,
        reduce_fx: str,
        batch_size: int | None,
    ) -> None:
        # Called by Module.log for every logged value of every step: positional
        # arguments and no work beyond choosing the store and the defaults.
        replica_logs = self.replica_logs
        if replica_logs is not None:  # inside DataParallel's device copies
            arguments = (on_step, on_epoch, prog_bar, logger, sync_dist, reduce_fx, batch_size)
            replica_logs.record(name, value, arguments)
            return
        mode = self.logging_mode
        if mode == "train_step":
            store = self.train_metrics
            on_step = True if on_step is None else on_step
            on_epoch = False if on_epoch is None else on_epoch
        elif mode is None:
            raise RuntimeError(
                f"self.log({name!r}) was called outside a training or evaluation step or "
                "hook; values can only be logged while fit/validate/test runs (not in predict)."
            )
        else:
            store = self.train_metrics if mode == "train_epoch" else self.eval_metrics
            on_step = False if on_step is None else on_step
            on_epoch = True if on_epoch is None else on_epoch
        if batch_size is None:
            batch_size = (
                extract_batch_size(self.current_batch)
                if on_epoch and reduce_fx == "mean" and self.current_batch is not None
                else 1
            )
        options = (on_step, on_epoch, prog_bar, logger, sync_dist, reduce_fx)
        store.log(name + self.dataloader_suffix, value, options, batch_size)

    def _backward(self, module: Module, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        if module.automatic_optimization:
            raise RuntimeError(
                "manual_backward() is for manual optimization; set "
                "`self.automatic_optimization = False` in __init__ or return the loss instead."
            )
        loop.backward(self.hooks, loss, *args, **kwargs)

    # ------------------------------------------------------------------ internals
    def _run(
        self, stage: str, model: Module, datamodule: DataModule | None, body: Callable[[], T]
    ) -> T:
        if not isinstance(model, Module):
            raise TypeError(
                f"Trainer.{stage} expects a trainkit.Module, got {type(model).__name__}. "
                "Subclass trainkit.Module (it is a torch.nn.Module)."
            )
        self.state.stage = stage
        self.state.should_stop = False
        self._module = model
        model._trainer = self
        self._hooks = loop.Hooks(self, model, self.callbacks)
        status = "failed"
        if stage == "fit":
            self.preemption.install()
        try:
            self.strategy.setup_environment()
            if datamodule is not None:
                # Downloads happen once per node; the other ranks wait for them.
                if self.strategy.local_rank == 0:
                    datamodule.prepare_data()
                self.strategy.barrier("prepare_data")
                datamodule.setup(stage)
            model.setup(stage)
            for callback in self.callbacks:
                callback.setup(self, model, stage)
            self._model = self.strategy.setup_module(model)
            result = body()
            status = "success"
            return result
        except BaseException as exception:
            status = "interrupted" if isinstance(exception, KeyboardInterrupt) else "failed"
            for callback in self.callbacks:
                callback.on_exception(self, model, exception)
            raise
        finally:
            for callback in self.callbacks:
                callback.teardown(self, model, stage)
            model.teardown(stage)
            if datamodule is not None:
                datamodule.teardown(stage)
            if self.is_global_zero:
                for logger in self.loggers:
                    logger.finalize(status)
            self.strategy.teardown()
            if self._step_hook is not None:
                self._step_hook.remove()
                self._step_hook = None
            self.preemption.uninstall()
            self.state.stage = None
            self.logging_mode = None
            self._hooks = None

    def _fit(
        self,
        model: Module,
        train_dataloaders: Iterable[Any] | None,
        val_dataloaders: Iterable[Any] | list[Iterable[Any]] | None,
        datamodule: DataModule | None,
        ckpt_path: str | os.PathLike[str] | None,
    ) -> None:
        # Read the checkpoint first: a damaged file should fail before any setup work.
        resume_from = self._resolve_ckpt_path(ckpt_path)
        checkpoint = self.strategy.load_checkpoint(resume_from) if resume_from else None
        self.datamodule = datamodule
        train_loader = self._train_loader(model, train_dataloaders, datamodule)
        self.num_training_batches = limit_batches(
            num_batches(train_loader), self.options.limit_train_batches, "limit_train_batches"
        )
        batch_size = getattr(train_loader, "batch_size", None)
        self.samples_per_step = (
            batch_size * self.strategy.data_parallel_size if batch_size else None
        )
        self._val_loaders = self._optional_val_loaders(model, val_dataloaders, datamodule)
        self.num_val_batches = self._limited_totals(
            self._val_loaders, self.options.limit_val_batches, "limit_val_batches"
        )
        self.has_validation = any(total > 0 for total in self.num_val_batches) and _overrides(
            model, "validation_step"
        )
        self._setup_optimizers(model)
        self.state.epoch = 0
        self.state.global_step = 0
        self.state.batch_idx = 0
        self.state.epoch_start_rng = None
        self.batches_seen = 0
        self.lineage = uuid.uuid4().hex
        self.preempted = False
        self.preemption_vote = StopVote(
            self.strategy.agree_max, spaced=self.strategy.world_size > 1
        )
        if checkpoint is not None:
            checkpoint_io.restore_state(self, checkpoint, str(resume_from))
        if self.is_global_zero and model.hparams:
            for logger in self.loggers:
                logger.log_hyperparams(dict(model.hparams))
        self.hooks.call("on_fit_start")
        if self.has_validation and self.options.num_sanity_val_steps != 0:
            self._sanity_check()
        loop.run_fit(self, self._require_model(), train_loader)
        self.strategy.on_fit_end()
        self.hooks.call("on_fit_end")

    def _sanity_check(self) -> None:
        limit = self.options.num_sanity_val_steps
        full = self.num_val_batches
        self.num_val_batches = [t if limit == -1 else min(t, limit) for t in full]
        self.state.sanity_checking = True
        try:
            self.hooks.call("on_sanity_check_start")
            with isolated_rng():
                loop.run_evaluation(
                    self,
                    self._require_model(),
                    self._val_loaders,
                    self.num_val_batches,
                    "validation",
                )
            self.hooks.call("on_sanity_check_end")
        finally:
            self.state.sanity_checking = False
            self.num_val_batches = full
            self.eval_metrics.reset()

    def _evaluate(
        self,
        stage: str,
        model: Module,
        dataloaders: Iterable[Any] | list[Iterable[Any]] | DataModule | None,
        datamodule: DataModule | None,
        ckpt_path: str | os.PathLike[str] | None,
    ) -> list[dict[str, float]]:
        if isinstance(dataloaders, DataModule):
            dataloaders, datamodule = None, dataloaders
        if self.launcher is not None:
            return self.launcher.launch(  # type: ignore[no-any-return]
                self, stage, model, dataloaders, datamodule, ckpt_path
            )
        step_name = "validation" if stage == "validate" else "test"

        def run() -> list[dict[str, float]]:
            self._load_weights(model, ckpt_path)
            loaders = self._eval_loaders(step_name, model, dataloaders, datamodule)
            if stage == "validate" and not _overrides(model, "validation_step"):
                raise NotImplementedError(
                    f"{type(model).__name__} has no validation_step(); define it to validate."
                )
            option = "limit_val_batches" if stage == "validate" else "limit_test_batches"
            totals = self._limited_totals(loaders, getattr(self.options, option), option)
            if stage == "validate":
                self.num_val_batches = totals
            else:
                self.num_test_batches = totals
            results = loop.run_evaluation(self, self._require_model(), loaders, totals, step_name)
            keys = display_names(self.eval_metrics, prog_bar=None, logger=True)
            self.write_to_loggers(self._callback_metrics, keys, step=self.global_step)
            return results

        return self._run(stage, model, datamodule, run)

    def _setup_optimizers(self, model: Module) -> None:
        optimizers, configs = parse_optimizers(model.configure_optimizers())
        if model.automatic_optimization and len(optimizers) > 1:
            raise ValueError(
                f"configure_optimizers returned {len(optimizers)} optimizers. Automatic "
                "optimization steps one; for several, set `self.automatic_optimization = "
                "False` and step them in training_step (see self.optimizers())."
            )
        self.optimizers = self.strategy.setup_optimizers(optimizers)
        self.lr_scheduler_configs = configs
        if not model.automatic_optimization:
            # global_step counts the first optimizer's steps.
            def count_step(*_: Any) -> None:
                self.state.global_step += 1

            self._step_hook = self.optimizers[0].register_step_post_hook(count_step)

    def _train_loader(
        self, model: Module, loader: Iterable[Any] | None, datamodule: DataModule | None
    ) -> Iterable[Any]:
        if loader is None and datamodule is not None:
            loader = datamodule.train_dataloader()
        if loader is None and _overrides(model, "train_dataloader"):
            loader = model.train_dataloader()
        if loader is None:
            raise ValueError(
                "Trainer.fit needs training data: pass train_dataloaders=..., a datamodule, "
                "or define train_dataloader() on the Module."
            )
        return self._prepare_loader(loader, training=True)

    def _optional_val_loaders(
        self,
        model: Module,
        loaders: Iterable[Any] | list[Iterable[Any]] | None,
        datamodule: DataModule | None,
    ) -> list[Iterable[Any]]:
        if (
            loaders is None
            and datamodule is not None
            and _overrides(datamodule, "val_dataloader", base=DataModule)
        ):
            loaders = datamodule.val_dataloader()
        if loaders is None and _overrides(model, "val_dataloader"):
            loaders = model.val_dataloader()
        if loaders is None:
            return []
        return [self._prepare_loader(dl, training=False) for dl in _as_list(loaders)]

    def _eval_loaders(
        self,
        step_name: str,
        model: Module,
        loaders: Iterable[Any] | list[Iterable[Any]] | None,
        datamodule: DataModule | None,
    ) -> list[Iterable[Any]]:
        method = "val_dataloader" if step_name == "validation" else f"{step_name}_dataloader"
        if loaders is None and datamodule is not None:
            loaders = getattr(datamodule, method)()
        if loaders is None and _overrides(model, method):
            loaders = getattr(model, method)()
        if loaders is None:
            raise ValueError(
                f"No {step_name} data: pass dataloaders=..., a datamodule, or define "
                f"{method}() on the Module."
            )
        return [self._prepare_loader(dl, training=False) for dl in _as_list(loaders)]

    def _prepare_loader(self, loader: Iterable[Any], *, training: bool) -> Iterable[Any]:
        prepared = self.strategy.prepare_dataloader(loader, training=training)  # type: ignore[arg-type]
        return with_worker_seeding(prepared)

    def _limited_totals(
        self, loaders: list[Iterable[Any]], limit: int | float, name: str
    ) -> list[float]:
        return [limit_batches(num_batches(dl), limit, name) for dl in loaders]

    def _require_model(self) -> nn.Module:
        assert self._model is not None, "the strategy has not set up the module"
        return self._model


# ---------------------------------------------------------------- helpers
def _overrides(obj: object, name: str, base: type = Module) -> bool:
    return getattr(type(obj), name, None) is not getattr(base, name, None)


def _as_list(loaders: Iterable[Any] | list[Iterable[Any]]) -> list[Iterable[Any]]:
    if isinstance(loaders, (list, tuple)):
        return list(loaders)
    return [loaders]


def _fast_dev_run_batches(fast_dev_run: bool | int) -> int:
    if isinstance(fast_dev_run, bool):
        return 1 if fast_dev_run else 0
    if not isinstance(fast_dev_run, int) or fast_dev_run < 0:
        raise ValueError(
            f"fast_dev_run must be a bool or a non-negative number of batches, got "
            f"{fast_dev_run!r}."
        )
    return fast_dev_run


def _build_callbacks(
    callbacks: Callback | list[Callback] | None,
    *,
    enable_progress_bar: bool,
    enable_model_summary: bool,
    enable_checkpointing: bool,
    precision: str | int,
    gradient_clip_val: float | None,
    gradient_clip_algorithm: str,
    accumulate_grad_batches: int | dict[int, int],
) -> list[Callback]:
    """The Trainer's callbacks: the user's, plus those its arguments ask for, in order.

    ``precision=``, ``gradient_clip_val=`` and ``accumulate_grad_batches=`` are
    another spelling of the MixedPrecision, GradientClipping and
    GradientAccumulation callbacks. The step-shaping callbacks go first, in the
    order their hooks must run (NonFiniteLoss can veto a step before the gradient
    scaler takes it); clipping goes after the user's callbacks, so that their
    ``on_before_optimizer_step`` sees the gradients before clipping.
    """
    from trainkit.callbacks import (
        GradientAccumulation,
        GradientClipping,
        MixedPrecision,
        ModelCheckpoint,
        ModelSummary,
        NonFiniteLoss,
        TQDMProgressBar,
    )
    from trainkit.callbacks.precision import canonical_precision

    if isinstance(callbacks, Callback):
        callbacks = [callbacks]
    user = list(callbacks or [])
    for callback in user:
        if not isinstance(callback, Callback):
            raise TypeError(
                f"callbacks must be trainkit.Callback instances, got {type(callback).__name__}."
            )

    def take(kind: type[Callback], argument: str, wanted: bool) -> list[Callback]:
        found = [cb for cb in user if isinstance(cb, kind)]
        if len(found) > 1 or (found and wanted):
            raise ValueError(
                f"{kind.__name__} is given twice ({argument} and/or in callbacks); use one."
            )
        for callback in found:
            user.remove(callback)
        return found

    precision = canonical_precision(precision)
    front: list[Callback] = take(NonFiniteLoss, "", False) or [NonFiniteLoss()]
    front += take(MixedPrecision, "precision=", precision != "32-true")
    if precision != "32-true":
        front.append(MixedPrecision(precision))
    front += take(GradientAccumulation, "accumulate_grad_batches=", accumulate_grad_batches != 1)
    if accumulate_grad_batches != 1:
        front.append(GradientAccumulation(accumulate_grad_batches))
    back: list[Callback] = take(
        GradientClipping, "gradient_clip_val=", gradient_clip_val is not None
    )
    if gradient_clip_val is not None:
        if gradient_clip_algorithm not in ("norm", "value"):
            raise ValueError(
                f"gradient_clip_algorithm={gradient_clip_algorithm!r} must be 'norm' or 'value'."
            )
        by_norm = gradient_clip_algorithm == "norm"
        back.append(
            GradientClipping(
                max_norm=gradient_clip_val if by_norm else None,
                max_value=None if by_norm else gradient_clip_val,
            )
        )
    if enable_model_summary and not any(isinstance(cb, ModelSummary) for cb in user):
        front.append(ModelSummary())
    if enable_checkpointing and not any(isinstance(cb, ModelCheckpoint) for cb in user):
        back.append(ModelCheckpoint())
    built = front + user + back
    if enable_progress_bar and not any(isinstance(cb, TQDMProgressBar) for cb in user):
        built.append(TQDMProgressBar())
    return built


def _build_loggers(logger: bool | Logger | list[Logger] | None, root_dir: str) -> list[Logger]:
    if logger is True:
        from trainkit.loggers import TensorBoardLogger

        return [TensorBoardLogger(root_dir)]
    if logger is None or logger is False:
        return []
    loggers = [logger] if isinstance(logger, Logger) else list(logger)
    for item in loggers:
        if not isinstance(item, Logger):
            raise TypeError(f"logger must be a trainkit Logger, got {type(item).__name__}.")
    return loggers
