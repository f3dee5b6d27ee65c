"""Trainer: builds the parts of a run from its options, and exposes fit/validate/test/predict.

The constructor checks the options (``trainkit.trainer.options``), then builds the
parts: a launcher (if this process must start others), a strategy (devices and
processes), the callbacks and the step's slots, the loggers, the run's state
and its results store. Each entry point sets up a run (hooks, the model as the
strategy wraps it, the dataloaders) and hands it to a loop: the fit loop in
``trainkit/loops/fit.py``, evaluation and prediction in ``trainkit/loops/evaluate.py``.
Nothing outside this package assigns the Trainer's attributes (a launcher's
report is adopted in properties.py); the loops write to the state and results they receive.
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import timedelta
from typing import Any, TypeVar

import torch

from trainkit.callbacks.base import Callback
from trainkit.callbacks.defaults import assemble_callbacks, merge_configured, step_slots
from trainkit.checkpoint import weights as checkpoint_io
from trainkit.checkpoint.preemption import Preemption, StopVote
from trainkit.checkpoint.restore import restore_state
from trainkit.core.data import DataModule, batch_totals, extract_batch_size, one_or_list
from trainkit.core.module import Module
from trainkit.core.optim import LRSchedulerConfig, configured_optimizers
from trainkit.distributed.wrapping import convert_sync_batchnorm
from trainkit.launch import Launcher, launcher_for, select_launcher
from trainkit.launch.environment import resume_on_restart
from trainkit.loggers import Logger, TensorBoardLogger, build_loggers, run_hyperparameters
from trainkit.loops.dataloaders import fit_validates, stage_loaders
from trainkit.loops.evaluate import run_evaluation, run_predict
from trainkit.loops.fit import Fit, run_fit
from trainkit.loops.hooks import Hooks, batch_transfer, layer_builder, overrides, prepare_data
from trainkit.loops.results import Results
from trainkit.loops.run import Run
from trainkit.loops.state import RunState, TrainerFn, TrainerStatus
from trainkit.loops.step import Optimization
from trainkit.profilers import Profiler, build_profiler, is_active
from trainkit.strategies import Strategy, build_strategy, plan_devices
from trainkit.trainer.checkpointing import TrainerCheckpoints
from trainkit.trainer.data_source import AttachedData, FitLoaders, unpaired_validation
from trainkit.trainer.lightning_parts import StrategyParts
from trainkit.trainer.options import (
    HardwareOptions,
    LoopOptions,
    OutputOptions,
    StepOptions,
    from_keywords,
    take_model_registry,
    take_plugins,
)
from trainkit.tuner.trial import running_search
from trainkit.utilities.rank_zero import rank_zero_only
from trainkit.utilities.seed import seed_everything, set_deterministic

T = TypeVar("T")
Dataloaders = Iterable[Any] | list[Iterable[Any]]


class Trainer(TrainerCheckpoints):
    """Trains, evaluates and runs a :class:`~trainkit.Module`.

    Every keyword but ``strategy``, ``callbacks``, ``logger`` and ``profiler`` is an
    option of one of four groups, each documented field by field in ``trainkit.trainer.options``:
    :class:`~trainkit.trainer.options.HardwareOptions` (``accelerator``, ``devices``,
    ``process_group_timeout``, ``seed``, ``deterministic``, ``num_nodes``,
    ``benchmark``, ``sync_batchnorm``, ``use_distributed_sampler``,
    ``detect_anomaly``, ``compile``), :class:`~trainkit.trainer.options.LoopOptions`
    (``max_epochs``, ``min_epochs``, ``max_steps``, ``min_steps``, ``max_time``,
    ``overfit_batches``, ``limit_*_batches``, ``val_check_interval``,
    ``check_val_every_n_epoch``, ``num_sanity_val_steps``, ``log_every_n_steps``,
    ``fast_dev_run``, ``reload_dataloaders_every_n_epochs``, ``inference_mode``),
    :class:`~trainkit.trainer.options.StepOptions` (``precision``, ``gradient_clip_val``,
    ``gradient_clip_algorithm``, ``accumulate_grad_batches``) and
    :class:`~trainkit.trainer.options.OutputOptions` (``default_root_dir``,
    ``enable_progress_bar``, ``enable_model_summary``, ``enable_checkpointing``,
    ``barebones``, ``enable_autolog_hparams``, ``model_registry``). None means an
    option's default, as in Lightning (``precision=None`` is ``"32-true"``). A bad value
    fails here, naming the fix.
    The Lightning-named read-only views (``trainer.training``,
    ``trainer.checkpoint_callback``, ``trainer.world_size``, ...) are in
    ``trainkit/trainer/properties.py``.

    Args:
        strategy: "auto", a name ("single_device", "ddp", "ddp_spawn", "dp", "hybrid",
            "fsdp", or one in ``StrategyRegistry``), or a :class:`~trainkit.strategies.Strategy`.
        callbacks: callbacks, called in this order after the Module's own hooks.
        logger: True (or None) for a TensorBoard logger under ``default_root_dir``,
            False for none, or a Logger / list of Loggers.
        profiler: "simple", "advanced", "pytorch" or a :class:`~trainkit.profilers.Profiler`
            timing every hook, step and batch fetch; reported when each run ends.
        plugins: Lightning's; those of ``trainkit.lightning.plugins`` (see its docs).

    The other keywords are the options listed above.

    Example:
        >>> import trainkit
        >>> trainer = trainkit.Trainer(max_epochs=1, logger=False, enable_progress_bar=False)
        >>> trainer.max_epochs
        1
    """

    #: The default logger's class and folder (``trainkit.lightning``'s: its own, lightning_logs).
    _default_logger: tuple[type[TensorBoardLogger], str] = (TensorBoardLogger, "logs")

    def __init__(
        self,
        *,
        accelerator: str = "auto",
        devices: int | list[int] | str = "auto",
        process_group_timeout: float = 1800.0,
        seed: int | None = None,
        deterministic: bool | None = False,
        num_nodes: int = 1,
        benchmark: bool | None = None,
        sync_batchnorm: bool = False,
        use_distributed_sampler: bool = True,
        detect_anomaly: bool = False,
        compile: bool | dict[str, Any] = False,
        max_epochs: int | None = None,
        min_epochs: int | None = None,
        max_steps: int = -1,
        min_steps: int | None = None,
        max_time: str | dict[str, int] | timedelta | None = None,
        overfit_batches: int | float = 0.0,
        limit_train_batches: int | float | None = 1.0,
        limit_val_batches: int | float | None = 1.0,
        limit_test_batches: int | float | None = 1.0,
        limit_predict_batches: int | float | None = 1.0,
        val_check_interval: int | float | None = 1.0,
        check_val_every_n_epoch: int | None = 1,
        num_sanity_val_steps: int | None = 2,
        log_every_n_steps: int | None = 50,
        fast_dev_run: bool | int = False,
        reload_dataloaders_every_n_epochs: int = 0,
        inference_mode: bool = True,
        resume_mismatch: str | None = None,
        precision: str | int | None = "32-true",
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = "norm",
        accumulate_grad_batches: int | dict[int, int] = 1,
        default_root_dir: str | os.PathLike[str] | None = None,
        enable_progress_bar: bool | None = True,
        enable_model_summary: bool | None = True,
        enable_checkpointing: bool | None = True,
        barebones: bool = False,
        enable_autolog_hparams: bool = True,
        model_registry: str | None = None,
        strategy: str | Strategy = "auto",
        callbacks: Callback | list[Callback] | None = None,
        logger: bool | Logger | list[Logger] | None = True,
        profiler: Profiler | str | None = None,
        plugins: Any | None = None,
    ) -> None:
        precision, sync_batchnorm, scaler = take_plugins(plugins, precision, sync_batchnorm)
        take_model_registry(model_registry)
        # Each keyword lands in its option group, a frozen dataclass that checks it.
        given = dict(locals())
        root = os.fspath(default_root_dir) if default_root_dir is not None else None
        given["default_root_dir"] = root = root and os.path.expanduser(root)  # ~/runs
        #: Where the run computes.
        self.hardware = from_keywords(HardwareOptions, given)
        if barebones:  # only train: no sanity check either, as in Lightning
            given["num_sanity_val_steps"] = 0
        #: How long to train and when to validate and log (a fast dev run applied).
        self.options = from_keywords(LoopOptions, given).resolved()
        #: How one optimization step is shaped.
        self.step_options = from_keywords(StepOptions, given)
        #: What the run writes and shows.
        self.output = from_keywords(OutputOptions, given)
        if seed is not None:
            seed_everything(seed)
        deterministic = self.hardware.deterministic
        set_deterministic(deterministic)
        if benchmark is not None or deterministic:
            torch.backends.cudnn.benchmark = bool(benchmark) and not deterministic
        timeout = timedelta(seconds=process_group_timeout)
        #: Starts this job's other processes, if this process must (see trainkit.launch).
        self.launcher: Launcher | None = None
        if isinstance(strategy, Strategy):
            self.strategy: Strategy = strategy
            strategy.use_accelerator(
                accelerator, plan_devices(strategy, accelerator, devices).device_type
            )
            self.launcher = launcher_for(strategy, accelerator, devices)
        else:
            plan = plan_devices(strategy, accelerator, devices)
            self.launcher = select_launcher(plan.strategy, plan.processes)
            environment = self.launcher.environment if self.launcher is not None else None
            self.strategy = build_strategy(plan, timeout=timeout, environment=environment)
        self.strategy.precision = self.step_options.canonical_precision  # e.g. FSDP casts by it
        self.strategy.connect_parts(StrategyParts(self))  # its Lightning attributes read these
        self.default_root_dir = root or os.getcwd()
        self.fast_dev_run = self.options.fast_dev_run  # as given (False, True or batches)
        self.callbacks = assemble_callbacks(
            callbacks,
            self.step_options,
            self.output,
            fast_dev_run=bool(self.fast_dev_run),
            barebones=barebones,
            scaler=scaler,  # a precision plugin's own GradScaler
            groups=self._callback_groups,  # installed packages' callbacks factories
            nonfinite=self._nonfinite_action,
        )
        #: What the callbacks contribute to the training step (see trainkit.callbacks.slots).
        self.step_slots = step_slots(self.callbacks)
        root, dry_run = self.default_root_dir, bool(self.fast_dev_run)  # dry: a DummyLogger
        default = self._default_logger
        self.loggers = [] if barebones else build_loggers(logger, root, dry_run, default)
        #: Times the runs' hooks and steps (a PassThroughProfiler times nothing).
        self.profiler = build_profiler(profiler)
        #: Where the run is: counters, stage and status.
        self.state = RunState()
        #: Where ``self.log`` values go, and the metrics callbacks and loggers read.
        self.results = Results(self.strategy, self.loggers, extract_batch_size)
        self.optimizers: list[torch.optim.Optimizer] = []
        self.lr_scheduler_configs: list[LRSchedulerConfig] = []
        #: The DataModule last passed to fit, validate, test or predict (None: none yet).
        self.datamodule: DataModule | None = None
        self.preemption = Preemption()
        #: The dataloaders of the current (or last) run, as the strategy prepared them.
        self.train_dataloader: Iterable[Any] | None = None
        self.val_dataloaders: Any = None
        self.test_dataloaders: Any = None
        self.predict_dataloaders: Any = None
        #: The checkpoint the last entry point loaded (None: none).
        self.ckpt_path: str | None = None
        self._module: Module | None = None
        self._current: Run | None = None  # the latest run (save_checkpoint after fit reads it)
        self._optimization: Optimization | None = None
        self._user_callbacks = self.callbacks

    # ---------------------------------------------------------------- entry points
    def fit(
        self,
        model: Module,
        train_dataloaders: Iterable[Any] | DataModule | None = None,
        val_dataloaders: Dataloaders | None = None,
        datamodule: DataModule | None = None,
        ckpt_path: str | os.PathLike[str] | None = None,
        weights_only: bool | None = None,
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
            weights_only: as for torch.load (None: True, no code stored in the
                checkpoint runs, unless torch's TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD is set);
                False unpickles any object in it, for files you trust.
        """
        self._weights_only = weights_only
        if isinstance(train_dataloaders, DataModule):
            train_dataloaders, datamodule = None, train_dataloaders
        self._launch(self._fit, model, train_dataloaders, val_dataloaders, datamodule, ckpt_path)
        if self.launcher is not None:  # ranks this process started trained: evaluate that
            loaders = {"train": train_dataloaders, "val": val_dataloaders}
            self._module, self._attached = model, AttachedData(model, datamodule, loaders)
        if self.state.preempted:  # a checkpoint was saved; the scheduler may restart the job
            self.preemption.finish_fit(self._last_checkpoint_paths()[0], self.is_global_zero)

    def validate(
        self,
        model: Module | None = None,
        dataloaders: Dataloaders | DataModule | None = None,
        ckpt_path: str | os.PathLike[str] | None = None,
        verbose: bool = True,
        datamodule: DataModule | None = None,
        weights_only: bool | None = None,
    ) -> list[dict[str, float]]:
        """Run one validation epoch and return its metrics, one dict per dataloader.

        Args:
            model: the Module to evaluate (None: the one the last ``fit`` trained).
            dataloaders: validation dataloader(s) (or a DataModule).
            ckpt_path: load the weights first from this checkpoint, ``"best"`` (the
                best checkpoint ModelCheckpoint kept) or ``"last"``; None keeps the
                weights as they are, except after ``fit`` without a model, where the best
                checkpoint is used (with a warning) when there is one.
            verbose: print the results from rank 0.
            datamodule: a DataModule supplying ``val_dataloader`` instead.
            weights_only: as for :meth:`fit`.
        """
        self._weights_only = weights_only
        return self._launch(
            self._evaluate, model, "validate", dataloaders, datamodule, ckpt_path, verbose
        )

    def test(
        self,
        model: Module | None = None,
        dataloaders: Dataloaders | DataModule | None = None,
        ckpt_path: str | os.PathLike[str] | None = None,
        verbose: bool = True,
        datamodule: DataModule | None = None,
        weights_only: bool | None = None,
    ) -> list[dict[str, float]]:
        """Run one test epoch and return its metrics, one dict per dataloader.

        Args:
            model: the Module to evaluate (None: the one the last ``fit`` trained).
            dataloaders: test dataloader(s) (or a DataModule).
            ckpt_path: as for :meth:`validate`.
            verbose: print the results from rank 0.
            datamodule: a DataModule supplying ``test_dataloader`` instead.
            weights_only: as for :meth:`fit`.
        """
        self._weights_only = weights_only
        return self._launch(
            self._evaluate, model, "test", dataloaders, datamodule, ckpt_path, verbose
        )

    def predict(
        self,
        model: Module | None = None,
        dataloaders: Dataloaders | DataModule | None = None,
        datamodule: DataModule | None = None,
        return_predictions: bool | None = None,
        ckpt_path: str | os.PathLike[str] | None = None,
        weights_only: bool | None = None,
    ) -> list[Any] | None:
        """Run ``predict_step`` over the data and return the predictions.

        Args:
            model: the Module (None: the one the last ``fit`` trained).
            dataloaders: prediction dataloader(s) (or a DataModule).
            datamodule: a DataModule supplying ``predict_dataloader`` instead.
            return_predictions: return the predictions (default: True); False keeps
                none and returns None (callbacks write them: BasePredictionWriter).
            ckpt_path: as for :meth:`validate`.
            weights_only: as for :meth:`fit`.

        Returns:
            One entry per batch (on the CPU); with several dataloaders, one such list per loader.
        """
        self._weights_only = weights_only
        keep = return_predictions is not False
        return self._launch(  # type: ignore[no-any-return]
            self._evaluate, model, "predict", dataloaders, datamodule, ckpt_path, False, keep
        )

    # ------------------------------------------------------------------ runs
    def _run(
        self,
        fn: str,
        model: Module,
        datamodule: DataModule | None,
        body: Callable[[Run], T],
        loaders: Mapping[str, Any],
    ) -> T:
        """Set a run up (data hooks, the strategy, the model), run ``body``, always tear down.

        ``loaders``: the dataloaders passed, by stage ("train", "val", ...).
        """
        if not isinstance(model, Module):
            raise TypeError(
                f"Trainer.{fn} expects a trainkit.Module, got {type(model).__name__}. "
                "Subclass trainkit.Module (it is a torch.nn.Module)."
            )
        state = self.state
        state.fn, state.stage, state.status = TrainerFn(fn), None, TrainerStatus.RUNNING
        state.should_stop = False
        self._module, self._attached = model, AttachedData(model, datamodule, loaders)
        model.trainer = self
        self._configure_callbacks(model)
        hooks = Hooks(self, model, self.callbacks, self.profiler)
        if is_active(profiler := self.profiler):
            rank = self.local_rank if self.world_size > 1 else None
            profiler.module = model  # PyTorchProfiler(record_module_names=True) names its layers
            profiler.setup(stage=fn, local_rank=rank, log_dir=self.log_dir)
        ending = "success"  # what the loggers are told when the run ends
        if fn == "fit":
            self.preemption.install()
        uncompile = _nothing
        try:
            self.strategy.setup_environment()
            rank_zero_only.rank = self.strategy.global_rank  # lightning_utilities' too
            if datamodule is not None:  # kept after the run, as Lightning keeps it
                self.datamodule, datamodule.trainer = datamodule, self
            prepare_data(self.strategy, self.node_rank, model, datamodule)
            if datamodule is not None:
                datamodule.setup(stage=TrainerFn(fn))
            # Lightning's order: callbacks, then the Module; stage is a TrainerFn, as there
            hooks.call_callbacks("setup", stage=TrainerFn(fn))
            model.setup(stage=TrainerFn(fn))
            if (build := layer_builder(model)) is not None:  # before the strategy's set-up
                with self.strategy.model_init_context():
                    build()
            if self.hardware.sync_batchnorm and self.strategy.world_size > 1:
                convert_sync_batchnorm(model, self.strategy.root_device)
            self.strategy.connect_results(self.results)  # DataParallel logs its copies' values
            precision = self.step_slots.precision
            wrapped = self.strategy.connect_module(model, self)  # the strategy's setup(trainer)
            if fn != "fit":  # every run starts without gradients (fit: after on_fit_start)
                model.zero_grad()
            if (compiling := self._compile_spec()) is not None:
                uncompile = self.strategy.compile_module(wrapped, compiling, self.warn)
            run = self._current = Run(
                fn=fn,
                state=state,
                results=self.results,
                hooks=hooks,
                strategy=self.strategy,
                module=model,
                model=wrapped,
                callbacks=self.callbacks,
                loggers=self.loggers,
                datamodule=datamodule,
                step_slots=self.step_slots,
                hardware=self.hardware,
                options=self.options,
                step_options=self.step_options,
                trainer=self,
                warn=self.warn,
                forward_context=precision.forward_context if precision else lambda: None,
                batch_to_device=batch_transfer(self.strategy, model, datamodule, precision),
                inference_mode=self._inference_mode_for(fn),
                optimizers=self.optimizers,  # fit sets its own up; the others keep fit's
                lr_scheduler_configs=self.lr_scheduler_configs,
            )
            with torch.autograd.set_detect_anomaly(self.hardware.detect_anomaly):
                result = body(run)
            interrupted = self.preemption.interrupted
            state.status = TrainerStatus.INTERRUPTED if interrupted else TrainerStatus.FINISHED
            return result
        except BaseException as exception:
            state.status = TrainerStatus.INTERRUPTED
            ending = "interrupted" if isinstance(exception, KeyboardInterrupt) else "failed"
            if (explained := self.strategy.describe_failure(exception)) is not None:
                print(explained, file=sys.stderr, flush=True)
            hooks.call_callbacks("on_exception", exception)
            if datamodule is not None:
                datamodule.on_exception(exception)
            if isinstance(exception, KeyboardInterrupt):  # as Lightning: handled, then exit
                print(f"trainkit: {fn} interrupted (KeyboardInterrupt).", file=sys.stderr)
                raise SystemExit(130) from None
            raise
        finally:
            if datamodule is not None:
                datamodule.teardown(stage=TrainerFn(fn))
            hooks.call_callbacks("teardown", stage=TrainerFn(fn))
            model.teardown(stage=TrainerFn(fn))
            if self.is_global_zero:
                for logger in self.loggers:
                    logger.finalize(ending)
            uncompile()
            self._end_dataloader_workers()
            self.strategy.end_run()
            if self._optimization is not None:
                self._optimization.close()
            self.preemption.uninstall()
            self.results.end_run()
            self.state.stage = None
            profiler.describe()
            profiler.teardown(fn)

    def _configure_callbacks(self, model: Module) -> None:
        # Module.configure_callbacks() joins the Trainer's callbacks for this run.
        merged = merge_configured(self._user_callbacks, model.configure_callbacks())
        if merged is not self.callbacks:
            self.callbacks = merged
            self.step_slots = step_slots(merged)

    def _fit(
        self,
        model: Module,
        train_dataloaders: Iterable[Any] | None,
        val_dataloaders: Dataloaders | None,
        datamodule: DataModule | None,
        ckpt_path: str | os.PathLike[str] | None,
    ) -> None:
        self._resolve_epoch_limit()
        self._run(
            "fit",
            model,
            datamodule,
            lambda run: self._fit_run(run, train_dataloaders, val_dataloaders, ckpt_path),
            {"train": train_dataloaders, "val": val_dataloaders},
        )

    def _fit_run(
        self,
        run: Run,
        train_dataloaders: Iterable[Any] | None,
        val_dataloaders: Dataloaders | None,
        ckpt_path: str | os.PathLike[str] | None,
    ) -> None:
        state, options, model = self.state, self.options, run.module
        # Read the checkpoint first: a damaged file should fail before any setup work.
        resume_from = checkpoint_io.resolve_path(
            resume_on_restart(ckpt_path), self._last_checkpoint_paths(), self.warn
        )
        checkpoint = self._read_checkpoint(resume_from) if resume_from else None
        self.ckpt_path = str(resume_from) if resume_from else None
        state.start_fit(self.strategy.broadcast(uuid.uuid4().hex), checkpoint is not None)

        loaders = FitLoaders(self, run, train_dataloaders, val_dataloaders)
        train_loader, val_loaders = loaders.load(checkpoint)
        validates = fit_validates(run)
        if (unpaired := unpaired_validation(self)) is not None:
            self.warn(unpaired)
        optimizers, configs = configured_optimizers(model)
        run.optimizers = self.optimizers = self.strategy.setup_optimizers(optimizers)
        run.lr_scheduler_configs = self.lr_scheduler_configs = configs
        # Step values go to logged_metrics every log_every_n_steps, logger or not.
        self._optimization = Optimization(
            run, self.step_slots, self.optimizers, configs, options.log_every_n_steps, self.warn
        )
        if checkpoint is not None:
            restore_state(run, checkpoint, str(resume_from))
        if (search := running_search()) is not None:  # trainkit.tuner.Tuner: search, not train
            return search(self, model)
        run.hooks.call("on_fit_start")
        model.zero_grad()  # as Lightning, between on_fit_start and the sanity check
        self._log_hyperparameters(run)
        if state.reload_dataloaders:  # BatchSizeFinder set a new batch size (trainkit/tuner)
            state.reload_dataloaders, (train_loader, val_loaders) = False, loaders.load()
        run.fit = fit = Fit(
            options=options,
            train_loader=train_loader,
            val_loaders=val_loaders,
            validates=validates,
            optimization=self._optimization,
            preemption=self.preemption,
            vote=StopVote(self.strategy.agree_max) if self.strategy.world_size > 1 else None,
            save_last=lambda: self.save_checkpoint(self._run_last_path()),
            warn=self.warn,
            reload=loaders.reload(state.epoch),
        )
        run_fit(run, fit)
        run.results.write_pending_start(max(state.global_step - 1, 0), state.epoch)  # no epoch end
        self.strategy.on_fit_end()
        run.hooks.call("on_fit_end")
        state.fit_ended = not state.preempted  # a later fit continues from here

    def _evaluate(
        self,
        model: Module | None,
        fn: str,
        dataloaders: Dataloaders | DataModule | None,
        datamodule: DataModule | None,
        ckpt_path: str | os.PathLike[str] | None,
        verbose: bool,
        keep: bool = True,
    ) -> Any:
        kind = {"validate": "val", "test": "test", "predict": "predict"}[fn]
        if isinstance(dataloaders, DataModule):
            dataloaders, datamodule = None, dataloaders
        if model is None:
            model = self._fitted_module(fn)
            if dataloaders is None and datamodule is None:
                datamodule = self.datamodule
            best = self.checkpoint_callback.best_model_path if self.checkpoint_callback else ""
            if ckpt_path is None and best:
                ckpt_path = "best"
                self.warn(  # Lightning's words, then trainkit's third choice
                    f"`.{fn}(ckpt_path=None)` was called without a model. The best model of the"
                    f" previous `fit` call will be used. You can pass `.{fn}(ckpt_path='best')`"
                    f" to use the best model or `.{fn}(ckpt_path='last')` to use the last model."
                    " If you pass a value, this warning will be silenced (a model: its weights)."
                )
        trained = model

        def body(run: Run) -> Any:
            self._load_weights(trained, ckpt_path, run.datamodule)
            self._log_hyperparameters(run)
            if fn != "predict" and getattr(self.options, f"limit_{kind}_batches") == 0:
                return []  # no loader, no hook: nothing to evaluate (as Lightning)
            loaders = stage_loaders(run, kind, dataloaders, True)
            if fn == "validate" and not overrides(trained, "validation_step"):
                raise NotImplementedError(
                    f"{type(trained).__name__} has no validation_step(); define it to validate."
                )
            option = f"limit_{kind}_batches"
            totals = batch_totals(loaders, getattr(self.options, option), option)
            setattr(self, f"{kind}_dataloaders", one_or_list(loaders))
            if fn == "predict":
                self.state.num_predict_batches = totals
                outputs = run_predict(run, loaders, totals, keep)
                if not keep:
                    return None
                return outputs[0] if len(outputs) == 1 else outputs
            if fn == "validate":
                self.state.num_val_batches = totals
            else:
                self.state.num_test_batches = totals
            results = run_evaluation(run, loaders, totals, "validation" if kind == "val" else fn)
            self.results.write_evaluation(step=self.global_step, epoch=self.current_epoch)
            if verbose and self.is_global_zero:  # the loop's table (a ported loop's own)
                self._evaluation_loops[fn].print_results(results, fn)
            return results

        return self._run(fn, model, datamodule, body, {kind: dataloaders})

    @contextlib.contextmanager
    def init_module(self, empty_init: bool | None = None) -> Iterator[None]:
        """Build the model inside: its tensors are made on the run's device and dtype at once.

        ``with trainer.init_module(): model = Net()`` makes the parameters on this
        process's device (no copy from the CPU later) and, with
        a "true" precision (e.g. "bf16-true"), in its dtype. With ``FSDPStrategy`` they stay
        on the CPU (``empty_init=True``: the meta device) and are sharded when the
        run sets up; ``Module.configure_model()`` needs none: the Trainer gives it one.

        Args:
            empty_init: True leaves the parameters uninitialized (faster), for a
                model whose weights a checkpoint replaces at once; None or False
                initializes them as usual.
        """
        with self.strategy.tensor_init_context(empty_init=empty_init):
            yield

    def _log_hyperparameters(self, run: Run) -> None:
        """Give the loggers the run's hyperparameters and the model, from global rank 0.

        Every stage does, as Lightning: fit after ``on_fit_start``, validate, test
        and predict before their first hook. Nothing with
        ``enable_autolog_hparams=False``; ``log_hyperparams`` only when
        ``save_hyperparameters()`` recorded some.
        """
        if not (self.is_global_zero and self.loggers and self.output.enable_autolog_hparams):
            return
        logged = run_hyperparameters(run.module, run.datamodule)
        for logger in self.loggers:
            if logged is not None:
                logger.log_hyperparams(logged)
            logger.log_graph(run.module)  # TensorBoardLogger(log_graph=True) draws it
            logger.save()


def _nothing() -> None:
    return None
