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
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.base import Callback
from trainkit.data import loader_generators, skip_batches
from trainkit.metrics import display_names, to_floats
from trainkit.module import Module, loss_from_output
from trainkit.seed import capture_rng_states, restore_rng_states

if TYPE_CHECKING:
    from torch import nn

    from trainkit.optim import LRSchedulerConfig
    from trainkit.trainer import Trainer


# --------------------------------------------------------------------- hooks
def _overrides(obj: object, base: type, name: str) -> bool:
    return getattr(type(obj), name, None) is not getattr(base, name, None)


def _noop(*args: Any) -> None:
    return None


# Null contexts carry no state, so one instance serves every step.
_NO_CONTEXT = nullcontext()


class Hooks:
    """The hooks of one run, resolved once: each name maps to a single caller.

    A caller invokes the Module's hook (if it overrides it) and then each
    callback's that overrides it; a hook nobody overrides is a shared no-op. The
    per-batch hooks are resolved in the constructor, so the loop pays one call
    per hook per batch and nothing for hooks nobody uses.

    Args:
        trainer: the running Trainer (passed to callback hooks).
        module: the user's Module.
        callbacks: the Trainer's callbacks, in order.
    """

    def __init__(self, trainer: Trainer, module: Module, callbacks: list[Callback]) -> None:
        self.trainer = trainer
        self.module = module
        self.callbacks = callbacks
        self._callers: dict[str, Callable[..., Any]] = {}
        # Per-batch hooks.
        self.on_train_batch_start = self.caller("on_train_batch_start")
        self.on_train_batch_end = self.caller("on_train_batch_end")
        self.on_before_backward = self.caller("on_before_backward")
        self.on_after_backward = self.caller("on_after_backward")
        self.on_before_optimizer_step = self.caller("on_before_optimizer_step")
        self.on_before_zero_grad = self.caller("on_before_zero_grad")
        # Step hooks (see trainkit.callbacks.base).
        self.forward_context = self._callback_methods("forward_context")
        self.scale_loss = self._callback_methods("scale_loss")
        self.should_optimizer_step = self._callback_methods("should_optimizer_step")
        self.prepare_optimizer_step = self._callback_methods("prepare_optimizer_step")
        self.optimizer_step = self._callback_methods("optimizer_step")

    def _callback_methods(self, name: str) -> list[Callable[..., Any]]:
        return [
            getattr(cb, name)
            for cb in self.callbacks
            if _overrides(cb, Callback, name) and cb.uses_hook(name)
        ]

    def _module_method(self, name: str) -> Callable[..., Any] | None:
        return getattr(self.module, name) if _overrides(self.module, Module, name) else None

    def caller(self, name: str) -> Callable[..., Any]:
        """The function that runs hook ``name`` everywhere it is overridden.

        Args:
            name: the hook's name, e.g. "on_train_epoch_start".

        Returns:
            A function taking the hook's arguments (after ``trainer, module`` for
            callbacks) and returning the Module's result.
        """
        found = self._callers.get(name)
        if found is not None:
            return found
        module_hook = self._module_method(name)
        callback_hooks = self._callback_methods(name)
        trainer, module = self.trainer, self.module
        if not callback_hooks:
            found = module_hook or _noop
        else:

            def found(*args: Any) -> Any:
                result = module_hook(*args) if module_hook is not None else None
                for hook in callback_hooks:
                    hook(trainer, module, *args)
                return result

        self._callers[name] = found
        return found

    def call(self, name: str, *args: Any) -> Any:
        """Run hook ``name`` on the Module, then the callbacks; return the Module's result.

        Args:
            name: the hook's name.
            *args: the hook's arguments after ``(trainer, module)``.
        """
        return self.caller(name)(*args)

    def call_module(self, name: str, *args: Any) -> Any:
        """Run only the Module's hook ``name``; return its result.

        Args:
            name: the hook's name.
            *args: the hook's arguments.
        """
        module_hook = self._module_method(name)
        return module_hook(*args) if module_hook is not None else None

    def call_callbacks(self, name: str, *args: Any) -> None:
        """Run only the callbacks' hook ``name``.

        Args:
            name: the hook's name.
            *args: the hook's arguments after ``(trainer, module)``.
        """
        for hook in self._callback_methods(name):
            hook(self.trainer, self.module, *args)

    def step_context(self) -> AbstractContextManager[Any]:
        """The callbacks' forward contexts combined (autocast, for example)."""
        if not self.forward_context:
            return _NO_CONTEXT
        stack = ExitStack()
        for factory in self.forward_context:
            context = factory(self.trainer, self.module)
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
            remember the RNG state the epoch's shuffle starts from (resume uses it)
            for batch_idx, batch in loader (limited to limit_train_batches;
                                            a resumed epoch skips consumed batches by index):
                batch -> device
                on_train_batch_start (returning -1 ends the epoch)
                step = every callback's should_optimizer_step
                with no_backward_sync (on micro-batches that do not step), forward contexts:
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
                resume point (unless the epoch's last batch): checkpoints, preemption
                stop if global_step == max_steps or should_stop
            on_train_epoch_end; write epoch metrics; epoch-interval LR schedulers
            epoch += 1
            resume point
        on_train_end

    A *resume point* is a moment from which a run continues exactly as if it had
    never stopped: every batch before it, with its validation, and every epoch end
    before it are complete. ``on_resume_point`` hooks (ModelCheckpoint) save there.

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
    epoch_schedulers = [c for c in trainer.lr_scheduler_configs if c.interval == "epoch"]
    training_step = trainer.strategy.step_function(model, "training_step")
    batch_to_device = trainer.strategy.batch_to_device
    step = _OptimizationStep(trainer, model, training_step)
    check_validation = trainer.has_validation
    max_steps = options.max_steps if options.max_steps != -1 else math.inf
    on_batch_start, on_batch_end = hooks.on_train_batch_start, hooks.on_train_batch_end
    on_resume_point = hooks.caller("on_resume_point")

    if not module.training:
        # Leave submodules the user put in eval mode (a frozen BatchNorm) alone;
        # only a model entirely in eval mode is switched to training.
        model.train()
    hooks.call("on_train_start")
    while not _done(trainer, max_epochs):
        _set_sampler_epoch(train_loader, state.epoch)
        total = trainer.num_training_batches
        val_every = _val_check_batches(trainer, total)
        first = state.batch_idx  # > 0 only when resuming in the middle of this epoch
        if first == 0:
            trainer.train_metrics.reset()
        trainer.logging_mode = "train_epoch"
        hooks.call("on_train_epoch_start")
        for batch_idx, batch, is_last in _epoch_batches(trainer, train_loader, total, first):
            state.batch_idx = batch_idx
            batch = batch_to_device(batch)
            trainer.current_batch = batch
            trainer.logging_mode = "train_step"
            if on_batch_start(batch, batch_idx) == -1:
                break
            if module.automatic_optimization:
                outputs = step.run(batch, batch_idx, is_last)
            else:
                # Manual optimization: the user steps; global_step counts the first
                # optimizer's steps (the Trainer hooks its step()).
                step_before = state.global_step
                with hooks.step_context():
                    outputs = training_step(batch, batch_idx)
                stepped = state.global_step != step_before
                if (
                    stepped
                    and trainer.loggers
                    and state.global_step % options.log_every_n_steps == 0
                ):
                    _log_step(trainer, step_before)
            on_batch_end(outputs, batch, batch_idx)
            trainer.current_batch = None
            trainer.logging_mode = "train_epoch"
            state.batch_idx = batch_idx + 1
            if check_validation and _due(trainer, val_every, batch_idx, is_last):
                trainer.run_validation()
            # Not after the epoch's last batch (its resume point follows the epoch's
            # end), nor inside an accumulation window (its gradients are not saved).
            if not is_last and (step.stepped or not module.automatic_optimization):
                _resume_point(trainer, on_resume_point)
            if state.global_step >= max_steps or state.should_stop:
                break
        if trainer.preempted:
            # Leave as saved: the epoch is not over, and must not be marked so.
            break
        trainer.logging_mode = "train_epoch"
        # The Module's hook may log epoch values; reduce them before the callbacks
        # (early stopping, checkpointing) read callback_metrics.
        hooks.call_module("on_train_epoch_end")
        trainer.update_callback_metrics(trainer.train_metrics.epoch_values())
        hooks.call_callbacks("on_train_epoch_end")
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
        _resume_point(trainer, on_resume_point)
    trainer.preemption_vote.finish()  # every rank finishes the vote it started
    hooks.call("on_train_end")


def _resume_point(trainer: Trainer, on_resume_point: Callable[[], Any]) -> None:
    on_resume_point()
    # A signal may reach only some processes: they agree, in the background, to
    # stop at the same point (a rank stopping alone would leave the others
    # waiting in a collective).
    stop = trainer.preemption_vote.at_resume_point(trainer.preemption.requested)
    if stop and not trainer.preempted:
        trainer.save_preemption_checkpoint()
        trainer.state.should_stop = True


def _epoch_batches(
    trainer: Trainer, loader: Iterable[Any], total: float, first: int
) -> Iterator[tuple[int, Any, bool]]:
    """This epoch's ``(batch_idx, batch, is_last)`` from batch ``first`` on.

    Records the random state the epoch's shuffle starts from. A resumed epoch
    (``first > 0``) goes back to that state, so that the sampler draws the same
    order, skips the consumed batches by index, and then returns to the state the
    checkpoint was saved in.
    """
    state = trainer.state
    if first == 0:
        state.epoch_start_rng = capture_data_rng(loader)
        return _batches(loader, total)
    assert state.epoch_start_rng is not None, "a mid-epoch checkpoint records the epoch's RNG"
    resumed_rng = capture_data_rng(loader)
    restore_data_rng(loader, state.epoch_start_rng)
    batches = _batches(skip_batches(loader, first), total, start=first)
    # Fetch the first batch now: a sampler draws its shuffle seed when first asked
    # for an index, and that draw must come from the epoch's starting state.
    head = next(batches, None)
    restore_data_rng(loader, resumed_rng)
    return chain((head,), batches) if head is not None else iter(())


def capture_data_rng(loader: Iterable[Any]) -> dict[str, Any]:
    """Every random state an epoch's data order depends on (global and the loader's own).

    Args:
        loader: the training dataloader.
    """
    generators = [generator.get_state() for generator in loader_generators(loader)]
    return {"global": capture_rng_states(), "generators": generators}


def restore_data_rng(loader: Iterable[Any], states: dict[str, Any]) -> None:
    """Restore what :func:`capture_data_rng` captured.

    Args:
        loader: the same training dataloader.
        states: the captured states.
    """
    restore_rng_states(states["global"])
    for generator, saved in zip(loader_generators(loader), states["generators"], strict=True):
        generator.set_state(saved)


class _OptimizationStep:
    """One batch of automatic optimization; everything constant is looked up once."""

    def __init__(self, trainer: Trainer, model: nn.Module, training_step: Callable[..., Any]):
        self.trainer = trainer
        self.hooks = trainer.hooks
        self.model = model
        self.training_step = training_step
        self.no_backward_sync = trainer.strategy.no_backward_sync
        self.step_schedulers = [c for c in trainer.lr_scheduler_configs if c.interval == "step"]
        self.log_every = trainer.options.log_every_n_steps if trainer.loggers else 0
        #: Whether the last batch ended with an optimizer step.
        self.stepped = False

    def run(self, batch: Any, batch_idx: int, is_last: bool) -> dict[str, Any]:
        """Forward, backward and (when due) the optimizer step; returns the outputs."""
        trainer, hooks, state = self.trainer, self.hooks, self.trainer.state
        should_step = True
        for decide in hooks.should_optimizer_step:
            should_step = decide(trainer, hooks.module, batch_idx, is_last) and should_step
        self.stepped = should_step
        # Gradients are synchronised only on the micro-batch that steps.
        sync_context = _NO_CONTEXT if should_step else self.no_backward_sync(self.model)
        with sync_context:
            with hooks.step_context():
                output = self.training_step(batch, batch_idx)
            loss = loss_from_output(output, state.global_step)
            # Kept undetached (detach costs a call per step); backward has freed its graph.
            trainer.last_loss = loss
            backward(hooks, loss)
        if should_step:
            optimizer_step(hooks, trainer.optimizers[0])
            step_at_batch = state.global_step
            state.global_step += 1
            for config in self.step_schedulers:
                if state.global_step % config.frequency == 0:
                    _step_scheduler(trainer, config)
            if self.log_every and state.global_step % self.log_every == 0:
                _log_step(trainer, step_at_batch)
        return dict(output) if isinstance(output, dict) else {"loss": loss}


def backward(hooks: Hooks, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
    """Run the backward pass with its hooks; used by the loop and ``manual_backward``.

    Args:
        hooks: the run's hooks.
        loss: the loss tensor.
        *args: passed to ``Tensor.backward``.
        **kwargs: passed to ``Tensor.backward``.
    """
    hooks.on_before_backward(loss)
    for scale in hooks.scale_loss:
        loss = scale(hooks.trainer, hooks.module, loss)
    loss.backward(*args, **kwargs)  # type: ignore[no-untyped-call]
    hooks.on_after_backward()


def optimizer_step(hooks: Hooks, optimizer: torch.optim.Optimizer) -> None:
    """Step ``optimizer`` with its hooks, then clear its gradients (automatic optimization).

    Args:
        hooks: the run's hooks.
        optimizer: the optimizer to step.
    """
    step_optimizer(hooks, optimizer)
    hooks.on_before_zero_grad(optimizer)
    optimizer.zero_grad(set_to_none=True)


def step_optimizer(
    hooks: Hooks, optimizer: torch.optim.Optimizer, closure: Callable[[], Any] | None = None
) -> None:
    """The step itself: prepare (unscale), ``on_before_optimizer_step``, then step.

    A step hook (the gradient scaler, NonFiniteLoss("skip")) may take the step
    over; otherwise ``optimizer.step(closure)`` runs.

    Args:
        hooks: the run's hooks.
        optimizer: the optimizer to step.
        closure: a closure for optimizers that need one (LBFGS).
    """
    trainer, module = hooks.trainer, hooks.module
    for prepare in hooks.prepare_optimizer_step:
        prepare(trainer, module, optimizer)
    hooks.on_before_optimizer_step(optimizer)
    if closure is not None and hooks.optimizer_step:
        raise ValueError(
            "optimizer.step(closure) cannot be combined with callbacks that take the step "
            "over (mixed precision's gradient scaler, NonFiniteLoss('skip')); step without a "
            "closure, or use precision='32-true'."
        )
    stepped = False
    for step in hooks.optimizer_step:
        stepped = stepped or step(trainer, module, optimizer)
    if not stepped:
        optimizer.step(closure)


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


def _log_step(trainer: Trainer, step: int) -> None:
    """Write the step values logged at ``step`` (every process reads; rank 0 writes)."""
    store = trainer.train_metrics
    values = store.step_values(sync=True)
    trainer.write_to_loggers(values, display_names(store, prog_bar=None, logger=True), step=step)


def _done(trainer: Trainer, max_epochs: float) -> bool:
    return (
        trainer.state.epoch >= max_epochs
        or _max_steps_reached(trainer)
        or trainer.state.should_stop
        or trainer.preempted
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


def _batches(
    loader: Iterable[Any], total: float, start: int = 0
) -> Iterator[tuple[int, Any, bool]]:
    """Yield ``(batch_idx, batch, is_last)`` for batch indices ``start`` up to ``total``."""
    if total != math.inf:
        count = int(total) - start
        # All in C (no Python frame per batch): zip stops at the end of range()
        # before asking the loader for one batch too many.
        is_last = chain(repeat(False, count - 1), (True,))
        return zip(range(start, int(total)), loader, is_last, strict=False)
    return _batches_with_lookahead(loader, start)


def _batches_with_lookahead(loader: Iterable[Any], start: int) -> Iterator[tuple[int, Any, bool]]:
    # Unknown length: look one batch ahead to know which one is last.
    iterator = iter(loader)
    try:
        batch = next(iterator)
    except StopIteration:
        return
    batch_idx = start
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
        hooks.call(f"on_{stage}_start")
        hooks.call(f"on_{stage}_epoch_start")
        with torch.inference_mode():
            for loader_idx, (loader, total) in enumerate(zip(loaders, totals, strict=True)):
                trainer.dataloader_suffix = f"/dataloader_idx_{loader_idx}" if several else ""
                extra = (loader_idx,) if several else ()
                for batch_idx, batch, _ in _batches(loader, total):
                    batch = batch_to_device(batch)
                    trainer.current_batch = batch
                    hooks.call(f"on_{stage}_batch_start", batch, batch_idx, loader_idx)
                    with hooks.step_context():
                        outputs = step(batch, batch_idx, *extra)
                    hooks.call(f"on_{stage}_batch_end", outputs, batch, batch_idx, loader_idx)
        trainer.current_batch = None
        trainer.dataloader_suffix = ""
        hooks.call(f"on_{stage}_epoch_end")
        values = store.epoch_values()
        if not trainer.sanity_checking:
            trainer.update_callback_metrics(values)
        hooks.call(f"on_{stage}_end")
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
    hooks.call("on_predict_start")
    hooks.call("on_predict_epoch_start")
    with torch.inference_mode():
        for loader_idx, (loader, total) in enumerate(zip(loaders, totals, strict=True)):
            extra = (loader_idx,) if several else ()
            outputs: list[Any] = []
            for batch_idx, batch, _ in _batches(loader, total):
                batch = batch_to_device(batch)
                hooks.call("on_predict_batch_start", batch, batch_idx, loader_idx)
                with hooks.step_context():
                    prediction = step(batch, batch_idx, *extra)
                outputs.append(prediction)
                hooks.call("on_predict_batch_end", prediction, batch, batch_idx, loader_idx)
            results.append(outputs)
    hooks.call("on_predict_epoch_end")
    hooks.call("on_predict_end")
    return results
