"""The fit, evaluation and prediction loops.

Read top to bottom: :func:`run_fit` is the training loop (its docstring is the
pseudocode), :func:`run_evaluation` serves validation, test and the sanity check,
:func:`run_predict` collects predictions. The Trainer sets everything up (strategy,
optimizers, dataloaders, callbacks) and calls these.

Hot path rule: nothing per batch does work that could be done once before the
first batch. Which callbacks override which per-batch hook is looked up once
(:class:`Hooks`), logged values stay on the device (``trainkit.metrics``), and
loggers are written every ``log_every_n_steps`` only.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, ExitStack, nullcontext
from itertools import islice
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.base import Callback
from trainkit.metrics import display_names, to_floats
from trainkit.module import Module, loss_from_output

if TYPE_CHECKING:
    from torch import nn

    from trainkit.optim import LRSchedulerConfig
    from trainkit.trainer import Trainer


# --------------------------------------------------------------------- hooks
def _overrides(obj: object, base: type, name: str) -> bool:
    return getattr(type(obj), name, None) is not getattr(base, name, None)


class Hooks:
    """The hooks to call, looked up once: only the Module and callbacks that override each.

    Args:
        module: the user's Module.
        callbacks: the Trainer's callbacks, in order.
    """

    def __init__(self, module: Module, callbacks: list[Callback]) -> None:
        self.module = module
        self.callbacks = callbacks
        self._cache: dict[str, tuple[Callable[..., Any] | None, list[Callable[..., Any]]]] = {}
        # Step hooks (see trainkit.callbacks.base).
        self.forward_context = self._callback_methods("forward_context")
        self.scale_loss = self._callback_methods("scale_loss")
        self.should_optimizer_step = self._callback_methods("should_optimizer_step")
        self.prepare_optimizer_step = self._callback_methods("prepare_optimizer_step")
        self.optimizer_step = self._callback_methods("optimizer_step")

    def _callback_methods(self, name: str) -> list[Callable[..., Any]]:
        return [getattr(cb, name) for cb in self.callbacks if _overrides(cb, Callback, name)]

    def _lookup(self, name: str) -> tuple[Callable[..., Any] | None, list[Callable[..., Any]]]:
        found = self._cache.get(name)
        if found is None:
            module_hook = (
                getattr(self.module, name) if _overrides(self.module, Module, name) else None
            )
            found = (module_hook, self._callback_methods(name))
            self._cache[name] = found
        return found

    def call(self, trainer: Trainer, name: str, *args: Any) -> Any:
        """Call the Module's hook ``name``, then each callback's; return the Module's result.

        Args:
            trainer: the running Trainer.
            name: the hook's name, e.g. "on_train_epoch_start".
            *args: the hook's arguments after ``(trainer, module)``.
        """
        result = self.call_module(trainer, name, *args)
        self.call_callbacks(trainer, name, *args)
        return result

    def call_module(self, trainer: Trainer, name: str, *args: Any) -> Any:
        """Call only the Module's hook ``name`` (when it overrides it); return its result.

        Args:
            trainer: the running Trainer.
            name: the hook's name.
            *args: the hook's arguments.
        """
        module_hook = self._lookup(name)[0]
        return module_hook(*args) if module_hook is not None else None

    def call_callbacks(self, trainer: Trainer, name: str, *args: Any) -> None:
        """Call only the callbacks' hook ``name``.

        Args:
            trainer: the running Trainer.
            name: the hook's name.
            *args: the hook's arguments after ``(trainer, module)``.
        """
        for hook in self._lookup(name)[1]:
            hook(trainer, self.module, *args)

    def step_context(self, trainer: Trainer) -> AbstractContextManager[Any]:
        """The callbacks' forward contexts combined (autocast, for example)."""
        if not self.forward_context:
            return nullcontext()
        stack = ExitStack()
        for factory in self.forward_context:
            context = factory(trainer, self.module)
            if context is not None:
                stack.enter_context(context)
        return stack


def _loader_index_args(step: Callable[..., Any], name: str, several: bool) -> tuple[()]:
    """Check once that a step taking several loaders accepts ``dataloader_idx``."""
    if not several:
        return ()
    try:
        inspect.signature(step).bind(None, 0, 0)
    except TypeError:
        raise TypeError(
            f"{name} receives several dataloaders, so it is called as "
            f"{name}(batch, batch_idx, dataloader_idx); add a `dataloader_idx: int = 0` "
            "parameter."
        ) from None
    except ValueError:  # no signature (a C function): let the call decide
        pass
    return ()


# ----------------------------------------------------------------- training
def run_fit(trainer: Trainer, model: nn.Module, train_loader: Iterable[Any]) -> None:
    """Train until max_steps, max_epochs or ``trainer.should_stop``.

    Pseudocode::

        on_train_start
        while epoch < max_epochs and not stopping:
            on_train_epoch_start
            for batch_idx, batch in loader (limited to limit_train_batches):
                batch -> device
                on_train_batch_start (returning -1 ends the epoch)
                step = every callback's should_optimizer_step
                with no_backward_sync(not step), forward contexts:
                    loss = training_step(batch, batch_idx)
                on_before_backward; scale_loss(loss).backward(); on_after_backward
                if step:
                    prepare_optimizer_step; on_before_optimizer_step
                    optimizer.step()  (or a callback's optimizer_step)
                    on_before_zero_grad; zero_grad(set_to_none=True)
                    global_step += 1; step-interval LR schedulers
                    every log_every_n_steps: write step metrics to loggers
                on_train_batch_end
                validate if due (val_check_interval, check_val_every_n_epoch)
                stop if global_step == max_steps or should_stop
            on_train_epoch_end; write epoch metrics; epoch-interval LR schedulers
            epoch += 1
        on_train_end

    Args:
        trainer: the Trainer (holds state, strategy, hooks, options).
        model: the module as the strategy wrapped it.
        train_loader: the prepared training dataloader.
    """
    state = trainer.state
    module = trainer.module
    hooks = trainer.hooks
    options = trainer.options
    max_epochs = options.resolved_max_epochs
    step_schedulers = [c for c in trainer.lr_scheduler_configs if c.interval == "step"]
    epoch_schedulers = [c for c in trainer.lr_scheduler_configs if c.interval == "epoch"]
    training_step = trainer.strategy.step_function(model, "training_step")
    batch_to_device = trainer.strategy.batch_to_device

    if not module.training:
        # Leave submodules the user put in eval mode (a frozen BatchNorm) alone;
        # only a model entirely in eval mode is switched to training.
        model.train()
    hooks.call(trainer, "on_train_start")
    while not _done(trainer, max_epochs):
        _set_sampler_epoch(train_loader, state.epoch)
        total = trainer.num_training_batches
        val_every = _val_check_batches(trainer, total)
        trainer.train_metrics.reset()
        trainer.logging_mode = "train_epoch"
        hooks.call(trainer, "on_train_epoch_start")
        for batch_idx, batch, is_last in _batches(train_loader, total):
            state.batch_idx = batch_idx
            batch = batch_to_device(batch)
            trainer.current_batch = batch
            trainer.logging_mode = "train_step"
            if hooks.call(trainer, "on_train_batch_start", batch, batch_idx) == -1:
                break
            if module.automatic_optimization:
                outputs = _optimization_step(
                    trainer, model, training_step, batch, batch_idx, is_last, step_schedulers
                )
            else:
                # Manual optimization: the user steps; global_step counts the first
                # optimizer's steps (the Trainer hooks its step()).
                step_before = state.global_step
                with hooks.step_context(trainer):
                    outputs = training_step(batch, batch_idx)
                if state.global_step != step_before:
                    _maybe_log_step(trainer, step_before)
            hooks.call(trainer, "on_train_batch_end", outputs, batch, batch_idx)
            trainer.current_batch = None
            trainer.logging_mode = "train_epoch"
            state.batch_idx = batch_idx + 1
            if _due(trainer, val_every, batch_idx, is_last):
                trainer.run_validation()
            if _max_steps_reached(trainer) or state.should_stop:
                break
        trainer.logging_mode = "train_epoch"
        # The Module's hook may log epoch values; reduce them before the callbacks
        # (early stopping, checkpointing) read callback_metrics.
        hooks.call_module(trainer, "on_train_epoch_end")
        trainer.update_callback_metrics(trainer.train_metrics.epoch_values())
        hooks.call_callbacks(trainer, "on_train_epoch_end")
        epoch_values = trainer.train_metrics.epoch_values()
        trainer.update_callback_metrics(epoch_values)
        logged = display_names(trainer.train_metrics, prog_bar=None, logger=True)
        trainer.write_to_loggers(epoch_values, logged, step=max(state.global_step - 1, 0))
        for config in epoch_schedulers:
            if (state.epoch + 1) % config.frequency == 0:
                _step_scheduler(trainer, config)
        trainer.logging_mode = None
        state.epoch += 1
        state.batch_idx = 0
        # Agree across processes, so that no rank leaves the loop alone.
        state.should_stop = trainer.strategy.reduce_boolean_decision(state.should_stop, all_=False)
    hooks.call(trainer, "on_train_end")


def _optimization_step(
    trainer: Trainer,
    model: nn.Module,
    training_step: Callable[..., Any],
    batch: Any,
    batch_idx: int,
    is_last: bool,
    step_schedulers: list[LRSchedulerConfig],
) -> dict[str, Any]:
    """One batch of automatic optimization; returns the outputs for on_train_batch_end."""
    state = trainer.state
    module = trainer.module
    hooks = trainer.hooks
    should_step = all(
        decide(trainer, module, batch_idx, is_last) for decide in hooks.should_optimizer_step
    )
    with trainer.strategy.no_backward_sync(model, enabled=not should_step):
        with hooks.step_context(trainer):
            output = training_step(batch, batch_idx)
        loss = loss_from_output(output, state.global_step)
        trainer.last_loss = loss.detach()
        backward(trainer, loss)
    if should_step:
        optimizer = trainer.optimizers[0]
        optimizer_step(trainer, optimizer)
        step_at_batch = state.global_step
        state.global_step += 1
        for config in step_schedulers:
            if state.global_step % config.frequency == 0:
                _step_scheduler(trainer, config)
        _maybe_log_step(trainer, step_at_batch)
    return dict(output) if isinstance(output, dict) else {"loss": loss}


def backward(trainer: Trainer, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
    """Run the backward pass with its hooks; used by the loop and ``manual_backward``.

    Args:
        trainer: the running Trainer.
        loss: the loss tensor.
        *args: passed to ``Tensor.backward``.
        **kwargs: passed to ``Tensor.backward``.
    """
    hooks = trainer.hooks
    module = trainer.module
    hooks.call(trainer, "on_before_backward", loss)
    for scale in hooks.scale_loss:
        loss = scale(trainer, module, loss)
    loss.backward(*args, **kwargs)  # type: ignore[no-untyped-call]
    hooks.call(trainer, "on_after_backward")


def optimizer_step(trainer: Trainer, optimizer: torch.optim.Optimizer) -> None:
    """Step ``optimizer`` with its hooks, then clear its gradients.

    Args:
        trainer: the running Trainer.
        optimizer: the optimizer to step.
    """
    hooks = trainer.hooks
    module = trainer.module
    for prepare in hooks.prepare_optimizer_step:
        prepare(trainer, module, optimizer)
    hooks.call(trainer, "on_before_optimizer_step", optimizer)
    if not any(step(trainer, module, optimizer) for step in hooks.optimizer_step):
        optimizer.step()
    hooks.call(trainer, "on_before_zero_grad", optimizer)
    optimizer.zero_grad(set_to_none=True)


def _step_scheduler(trainer: Trainer, config: LRSchedulerConfig) -> None:
    if config.monitor is None:
        config.scheduler.step()
        return
    metrics = trainer.callback_metrics
    if config.monitor not in metrics:
        message = (
            f"LR scheduler {type(config.scheduler).__name__} monitors {config.monitor!r}, "
            f"which was not logged; logged metrics are {sorted(metrics)}. Log it with "
            "self.log, or fix the name in configure_optimizers."
        )
        if config.strict:
            raise RuntimeError(message)
        trainer.warn(message + " (strict=False: skipping this scheduler step.)")
        return
    config.scheduler.step(float(metrics[config.monitor]))


def _maybe_log_step(trainer: Trainer, step: int) -> None:
    if not trainer.loggers or (step + 1) % trainer.options.log_every_n_steps != 0:
        return
    store = trainer.train_metrics
    values = store.step_values(sync=True)
    trainer.write_to_loggers(values, display_names(store, prog_bar=None, logger=True), step=step)


def _done(trainer: Trainer, max_epochs: float) -> bool:
    return (
        trainer.state.epoch >= max_epochs
        or _max_steps_reached(trainer)
        or (trainer.state.should_stop)
    )


def _max_steps_reached(trainer: Trainer) -> bool:
    max_steps = trainer.options.max_steps
    return max_steps != -1 and trainer.state.global_step >= max_steps


def _val_check_batches(trainer: Trainer, total: float) -> int | None:
    """Validate after every this many training batches (None: no validation this epoch)."""
    options = trainer.options
    if not trainer.has_validation:
        return None
    every_n_epochs = options.check_val_every_n_epoch
    if every_n_epochs is not None and (trainer.state.epoch + 1) % every_n_epochs != 0:
        return None
    interval = options.val_check_interval
    if isinstance(interval, int):
        if every_n_epochs is not None and interval > total:
            raise ValueError(
                f"val_check_interval={interval} is larger than the {int(total)} training "
                "batches of an epoch. Lower it, or pass check_val_every_n_epoch=None to count "
                "batches across epochs."
            )
        return interval
    if total == math.inf:
        if interval != 1.0:
            raise ValueError(
                f"val_check_interval={interval} is a fraction of an epoch, but the training "
                "dataloader has no length. Pass an integer number of batches."
            )
        return None  # validate when the iterable ends (see _due)
    return max(1, int(total * interval))


def _due(trainer: Trainer, every: int | None, batch_idx: int, is_last: bool) -> bool:
    options = trainer.options
    if every is None:
        return (
            is_last
            and trainer.has_validation
            and options.val_check_interval == 1.0
            and (
                options.check_val_every_n_epoch is None
                or (trainer.state.epoch + 1) % options.check_val_every_n_epoch == 0
            )
        )
    if options.check_val_every_n_epoch is None and isinstance(options.val_check_interval, int):
        # Count batches across epochs.
        trainer.batches_seen += 1
        return trainer.batches_seen % every == 0
    return (batch_idx + 1) % every == 0


def _batches(loader: Iterable[Any], total: float) -> Iterator[tuple[int, Any, bool]]:
    """Yield ``(batch_idx, batch, is_last)``, stopping after ``total`` batches."""
    if total != math.inf:
        last = int(total) - 1
        for batch_idx, batch in enumerate(islice(loader, int(total))):
            yield batch_idx, batch, batch_idx == last
        return
    # Unknown length: look one batch ahead to know which one is last.
    iterator = iter(loader)
    try:
        batch = next(iterator)
    except StopIteration:
        return
    batch_idx = 0
    for upcoming in iterator:
        yield batch_idx, batch, False
        batch, batch_idx = upcoming, batch_idx + 1
    yield batch_idx, batch, True


def _set_sampler_epoch(loader: Iterable[Any], epoch: int) -> None:
    # Distributed samplers reshuffle per epoch only when told the epoch.
    batch_sampler = getattr(loader, "batch_sampler", None)
    holders = (
        loader,
        getattr(loader, "sampler", None),
        batch_sampler,
        getattr(batch_sampler, "sampler", None),
    )
    for holder in holders:
        set_epoch = getattr(holder, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(epoch)


# --------------------------------------------------------------- evaluation
def run_evaluation(
    trainer: Trainer,
    model: nn.Module,
    loaders: list[Iterable[Any]],
    totals: list[float],
    stage: str,
) -> list[dict[str, float]]:
    """Run ``validation_step`` or ``test_step`` over every loader; return each loader's metrics.

    Pseudocode::

        remember each submodule's train/eval mode; model.eval()
        on_{stage}_start; on_{stage}_epoch_start
        under torch.inference_mode:
            for each loader, for each batch (limited):
                on_{stage}_batch_start; step; on_{stage}_batch_end
        on_{stage}_epoch_end; reduce epoch metrics (weighted, across processes)
        on_{stage}_end; restore modes

    Args:
        trainer: the running Trainer.
        model: the module as the strategy wrapped it.
        loaders: the prepared dataloaders.
        totals: batches to run from each loader.
        stage: "validation" or "test".
    """
    module = trainer.module
    hooks = trainer.hooks
    step = trainer.strategy.step_function(model, f"{stage}_step")
    batch_to_device = trainer.strategy.batch_to_device
    several = len(loaders) > 1
    _loader_index_args(step, f"{stage}_step", several)
    modes = {sub: sub.training for sub in module.modules()}
    model.eval()
    store = trainer.eval_metrics
    store.reset()
    trainer.logging_mode = "eval"
    try:
        hooks.call(trainer, f"on_{stage}_start")
        hooks.call(trainer, f"on_{stage}_epoch_start")
        with torch.inference_mode():
            for loader_idx, (loader, total) in enumerate(zip(loaders, totals, strict=True)):
                trainer.dataloader_suffix = f"/dataloader_idx_{loader_idx}" if several else ""
                extra = (loader_idx,) if several else ()
                for batch_idx, batch, _ in _batches(loader, total):
                    batch = batch_to_device(batch)
                    trainer.current_batch = batch
                    hooks.call(trainer, f"on_{stage}_batch_start", batch, batch_idx, loader_idx)
                    with hooks.step_context(trainer):
                        outputs = step(batch, batch_idx, *extra)
                    hooks.call(
                        trainer, f"on_{stage}_batch_end", outputs, batch, batch_idx, loader_idx
                    )
        trainer.current_batch = None
        trainer.dataloader_suffix = ""
        hooks.call(trainer, f"on_{stage}_epoch_end")
        values = store.epoch_values()
        if not trainer.sanity_checking:
            trainer.update_callback_metrics(values)
        hooks.call(trainer, f"on_{stage}_end")
    finally:
        trainer.dataloader_suffix = ""
        trainer.current_batch = None
        for sub, was_training in modes.items():
            sub.train(was_training)
    floats = to_floats(values)
    if not several:
        return [floats]
    return [
        {k: v for k, v in floats.items() if k.endswith(f"/dataloader_idx_{i}")}
        for i in range(len(loaders))
    ]


# --------------------------------------------------------------- prediction
def run_predict(
    trainer: Trainer,
    model: nn.Module,
    loaders: list[Iterable[Any]],
    totals: list[float],
) -> list[list[Any]]:
    """Run ``predict_step`` over every loader; return each loader's list of outputs.

    Args:
        trainer: the running Trainer.
        model: the module as the strategy wrapped it.
        loaders: the prepared dataloaders.
        totals: batches to run from each loader.
    """
    hooks = trainer.hooks
    step = trainer.strategy.step_function(model, "predict_step")
    batch_to_device = trainer.strategy.batch_to_device
    several = len(loaders) > 1
    _loader_index_args(step, "predict_step", several)
    model.eval()
    results: list[list[Any]] = []
    hooks.call(trainer, "on_predict_start")
    hooks.call(trainer, "on_predict_epoch_start")
    with torch.inference_mode():
        for loader_idx, (loader, total) in enumerate(zip(loaders, totals, strict=True)):
            extra = (loader_idx,) if several else ()
            outputs: list[Any] = []
            for batch_idx, batch, _ in _batches(loader, total):
                batch = batch_to_device(batch)
                hooks.call(trainer, "on_predict_batch_start", batch, batch_idx, loader_idx)
                with hooks.step_context(trainer):
                    prediction = step(batch, batch_idx, *extra)
                outputs.append(prediction)
                hooks.call(
                    trainer, "on_predict_batch_end", prediction, batch, batch_idx, loader_idx
                )
            results.append(outputs)
    hooks.call(trainer, "on_predict_epoch_end")
    hooks.call(trainer, "on_predict_end")
    return results
