"""One optimization step, its order written as code.

Automatic optimization, one batch (:meth:`Optimization.automatic`)::

    steps = last micro-batch of the accumulation window (or of the epoch)
    at a window's first micro-batch: on_before_zero_grad; zero_grad(set_to_none=True)
                                           (Module.optimizer_zero_grad): the last
                                           step's gradients were kept till now
    with no gradient sync unless steps (DDP's no_sync):
        with autocast:                         precision slot
            loss = training_step(batch, batch_idx)
        on_before_backward(loss); watch loss   nonfinite slot
        backward(scale(loss / window))         accumulation + precision slots (Module.backward)
        on_after_backward
    if steps:
        unscale gradients                      precision slot (float16)
        on_before_optimizer_step
        clip gradients                         clipping slot
        optimizer.step() unless vetoed         nonfinite slot; the scaler steps float16
                                               (through Module.optimizer_step if overridden;
                                               an optimizer whose step needs a closure, LBFGS,
                                               gets one that runs zero_grad, forward and
                                               backward again from its second call)
        global_step += 1; step-interval LR schedulers; every n steps: log

A strategy whose forward and backward are one pass (a pipeline schedule, which
interleaves the micro-batches' forwards and backwards: ``Strategy.fused_backward``)
runs in their place; the step still owns the rest::

    with autocast:
        loss = pass(batch, 1 / window)         backward of loss / window; gradient sync
                                               unless no_backward_sync (as above)
    log train/loss; on_before_backward(loss); watch loss; on_after_backward
    (then the optimizer step, as above)

Manual optimization runs ``training_step`` under autocast and gives the user
:meth:`Optimization.backward` (``manual_backward``) and optimizers whose
``step()`` is :meth:`Optimization.step_optimizer`: the same unscale, hooks,
clipping and scaler as above.

The slots are read once, here, when the step is built; the per-batch code only
tests whether a part is present. When no part, hook or override shapes the step
(one optimizer, no accumulation window), :meth:`Optimization.batch_step` gives
the loop :meth:`Optimization.plain`: the same order as above with the absent
parts left out, in one function (a tiny model's step pays for each Python call).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.nonfinite import NonFiniteLoss
from trainkit.callbacks.slots import clip_settings
from trainkit.core.module import overrides
from trainkit.core.optim import (
    LRSchedulerConfig,
    ManagedOptimizer,
    do_nothing,
    needs_closure,
    step_scheduler,
)
from trainkit.core.steps import defined_step, fit_step_arguments, loss_from_output
from trainkit.distributed.control import rank_zero_floats
from trainkit.loops.run import Run

if TYPE_CHECKING:
    from trainkit.callbacks.slots import StepSlots


class ComputedLoss:
    """The closure a Module's ``optimizer_step`` receives: the loss, already back-propagated.

    Args:
        loss: the batch's loss.
        evaluate: for an optimizer that evaluates the loss again within its step
            (LBFGS: ``step(closure)``), what each call after the first runs: the
            gradients cleared, ``training_step`` and ``backward`` again, as
            Lightning's closure runs them.
    """

    def __init__(
        self, loss: torch.Tensor, evaluate: Callable[[], torch.Tensor] | None = None
    ) -> None:
        self.loss = loss
        self._evaluate = evaluate
        self._called = False

    def __call__(self) -> torch.Tensor:
        """The loss: the first call's was computed before the step; later calls
        compute it again at the current parameters (only with ``evaluate``)."""
        if self._called and self._evaluate is not None:
            self.loss = self._evaluate()
        self._called = True
        return self.loss


class Optimization:
    """How this run updates parameters: the automatic step, and what manual optimization calls.

    Args:
        run: the run's context (state, results, hooks, strategy, model).
        slots: what the step callbacks contribute.
        optimizers: the optimizers, as the strategy set them up.
        schedulers: the LR scheduler configs.
        log_every_n_steps: write step metrics every n steps (0: no loggers).
        warn: prints a warning from rank 0.
    """

    def __init__(
        self,
        run: Run,
        slots: StepSlots,
        optimizers: list[torch.optim.Optimizer],
        schedulers: list[LRSchedulerConfig],
        log_every_n_steps: int,
        warn: Callable[[str], None],
    ) -> None:
        self.run = run
        self.optimizers = optimizers
        # In manual optimization the user steps the schedulers (as in Lightning).
        # Otherwise the Trainer's own list is read at each step, not a copy: a
        # callback may swap a scheduler in it while fit runs, as Lightning's
        # StochasticWeightAveraging swaps in SWALR (trainer.lr_scheduler_configs).
        self._schedulers = schedulers if run.module.automatic_optimization else []
        self._stepper = (
            run.module.lr_scheduler_step if overrides(run.module, "lr_scheduler_step") else None
        )
        #: Step values go to the loggers every this many steps (the Trainer may change it).
        self.log_every_n_steps = log_every_n_steps
        #: The global step whose values are due to the loggers (None: none), written by
        #: :meth:`write_pending_log` once the batch-end hooks have run.
        self.pending_log_step: int | None = None
        # Whether on_train_batch_end hooks run after each step (start_epoch says): then
        # step values wait for them, and the step makes the outputs they receive.
        self._batch_end_hooks = False
        self._warn = warn
        self._said: set[object] = set()  # what _warn_once said already, by key
        # Whether a backward ran since the gradients were last cleared (a window whose every
        # training_step returned None has none: the float16 scaler then steps nothing).
        self._backward_ran = False
        hooks, module = run.hooks, run.module
        self._training_step = hooks.profiled(
            f"[Strategy]{type(run.strategy).__name__}.training_step",
            fit_step_arguments(
                run.strategy.step_function(run.model, "training_step"),
                defined_step(module, "training_step", "fit"),
                passed=2,  # (batch, batch_idx)
            ),
        )
        self._no_sync = run.strategy.no_backward_sync
        # A strategy's pass that runs forward and backward together replaces both.
        self._fused = run.strategy.fused_backward(slots)
        self._forward_backward: Callable[[Any, int], tuple[Any, torch.Tensor | None]] = (
            self._separate_forward_backward if self._fused is None else self._fused_forward_backward
        )
        # The slots, read once (clipping and accumulation again when they change: reshape).
        precision = slots.precision
        self._forward_context = precision.forward_context if precision is not None else None
        self._scaler = precision.scaler if precision is not None else None
        nonfinite = slots.nonfinite
        self._observe = nonfinite.observe if nonfinite is not None else None
        self._veto = nonfinite if nonfinite is not None and nonfinite.vetoes_steps else None
        # The default check's window flag is read only when it skips steps.
        ends_windows = nonfinite is not None and (
            type(nonfinite) is not NonFiniteLoss or nonfinite.vetoes_steps
        )
        self._end_window = nonfinite.end_window if ends_windows else None  # type: ignore[union-attr]
        # Hooks nobody overrides are None, and not called.
        self._on_before_backward = hooks.optional("on_before_backward")
        self._on_after_backward = hooks.optional("on_after_backward")
        self._on_before_optimizer_step = hooks.optional("on_before_optimizer_step")
        self._on_before_zero_grad = hooks.optional("on_before_zero_grad")
        # The Module's own optimizer_step / optimizer_zero_grad / backward, when it has them.
        self._user_step = module.optimizer_step if overrides(module, "optimizer_step") else None
        self._user_zero_grad = (
            module.optimizer_zero_grad if overrides(module, "optimizer_zero_grad") else None
        )
        self._user_backward = module.backward if overrides(module, "backward") else None
        # An optimizer whose step() needs a closure (LBFGS) is given one that evaluates again.
        self._needs_closure = any(needs_closure(optimizer) for optimizer in optimizers)
        # In manual optimization each opt.step() inside training_step counts one
        # global step (as in Lightning, every optimizer's, counted by call, whatever
        # the torch optimizer's step does; see manual()); automatic optimization
        # counts its own steps.
        manual = not module.automatic_optimization
        if manual and self._fused is not None:
            raise ValueError(
                f"{type(run.strategy).__name__} computes each batch's loss together with its "
                "gradients (training_step does not run), so manual optimization cannot work "
                "with it: set automatic_optimization = True."
            )
        #: What ``Module.optimizers()`` returns (and a Module's ``optimizer_step`` receives).
        self.managed_optimizers = [
            ManagedOptimizer(optimizer, self.step_optimizer, self.zero_grad, self.toggle_model)
            for optimizer in optimizers
        ]
        #: Whether the last batch ended with an optimizer step (resume points need it).
        self.stepped = True
        # Whether the gradients are to be cleared before the next forward pass: a step's
        # gradients are kept for the hooks after it (on_train_batch_end,
        # on_train_epoch_end, as in Lightning), and freed before the next window's
        # forward pass, where memory peaks.
        self._clear_pending = True
        self._window = 1  # micro-batches per step in this epoch
        self._batches = 0.0  # batches in this epoch
        self._divisor = 1  # what this micro-batch's loss is divided by
        self._next_slots: StepSlots | None = None  # slots to shape the next epoch by
        self._refuse_manual_accumulation(slots)
        self._shape(slots)

    def reshape(self, slots: StepSlots) -> None:
        """Take the clipping and accumulation of ``slots`` from the next epoch's start on.

        Args:
            slots: the step's slots after the Trainer's step options changed.

        Raises:
            ValueError: what the strategy or manual optimization cannot honour
                (refused now, not when the epoch starts).
        """
        self.run.strategy.fused_backward(slots)  # refuses what its pass cannot honour
        self._refuse_manual_accumulation(slots)
        self._next_slots = slots

    def _shape(self, slots: StepSlots) -> None:
        # What the clipping and accumulation slots make of the step (checked before:
        # __init__ and reshape refuse what manual optimization cannot honour).
        module = self.run.module
        self._clip = slots.clipping.clip if slots.clipping is not None else None
        if overrides(module, "configure_gradient_clipping"):
            # The Module's hook replaces the slot's clipping, and receives its settings.
            self._clip_settings = clip_settings(slots.clipping)
            self._clip = self._module_clipping
        self._accumulation = slots.accumulation
        # Nothing shapes the step but the non-finite check: ``plain`` runs it (per
        # epoch, also no accumulation window: see batch_step).
        self._plain = (
            module.automatic_optimization
            and self._fused is None
            and self._forward_context is None
            and self._scaler is None
            and self._clip is None
            and self._veto is None
            and len(self.optimizers) == 1
            and self._on_before_backward is None
            and self._on_after_backward is None
            and self._on_before_optimizer_step is None
            and self._on_before_zero_grad is None
            and self._user_step is None
            and self._user_zero_grad is None
            and self._user_backward is None
            and not self._needs_closure
        )

    def _refuse_manual_accumulation(self, slots: StepSlots) -> None:
        if not self.run.module.automatic_optimization and slots.accumulates:
            raise ValueError(
                "Gradient accumulation (accumulate_grad_batches / GradientAccumulation) "
                "works with automatic optimization only: in manual optimization you "
                "decide when to step. Drop it, and call opt.step() every k batches in "
                "training_step, dividing the loss by k."
            )

    def close(self) -> None:
        """The end of the run: nothing is held (manual steps are counted by call)."""

    def start_epoch(self, epoch: int, batches: float, batch_end_hooks: bool = False) -> None:
        """Fix the accumulation window for ``epoch``.

        Args:
            epoch: the epoch, counted from 0.
            batches: batches in the epoch (``inf`` when unknown).
            batch_end_hooks: whether ``on_train_batch_end`` hooks run after each step:
                then a step's values wait for them (:meth:`write_pending_log`), so
                that what they log is written with them; else they are written at once
                (and the steps make no outputs for them).
        """
        self._batch_end_hooks = batch_end_hooks
        if self._next_slots is not None:  # the Trainer's step options changed
            self._shape(self._next_slots)
            self._next_slots = None
        accumulation = self._accumulation
        self._window = accumulation.batches_for_epoch(epoch) if accumulation is not None else 1
        self._batches = batches
        self._divisor = 1
        if self._window == 1:
            self.stepped = True  # every batch steps (plain does not record it)

    def batch_step(self) -> Callable[[Any, int, bool], Any]:
        """What the loop runs for each batch of the epoch :meth:`start_epoch` fixed.

        :meth:`manual` in manual optimization; else :meth:`plain` when nothing
        shapes the step, and :meth:`automatic` otherwise.
        """
        if not self.run.module.automatic_optimization:
            return self.manual
        return self.plain if self._plain and self._window == 1 else self.automatic

    # ------------------------------------------------------------ automatic
    def automatic(self, batch: Any, batch_idx: int, is_last: bool) -> dict[str, Any]:
        """Forward, backward and (at the end of a window) the optimizer step of one batch.

        Args:
            batch: the batch, on the device.
            batch_idx: its index in the epoch.
            is_last: whether it is the epoch's last batch.

        Returns:
            The outputs ``on_train_batch_end`` receives (a dict holding "loss").
        """
        run, window = self.run, self._window
        steps = window == 1 or is_last or (batch_idx + 1) % window == 0
        self.stepped = steps
        if window != 1:
            # Each micro-batch counts 1/len of its window (the epoch's last may be short).
            start = batch_idx // window * window
            self._divisor = int(min(window, self._batches - start))
        if self._clear_pending:
            self._clear_pending = False
            self._clear_gradients(batch_idx)
        if steps:
            output, loss = self._forward_backward(batch, batch_idx)
        else:
            # Gradients are synchronised only on the micro-batch that steps.
            with self._no_sync(run.model):
                output, loss = self._forward_backward(batch, batch_idx)
        if steps:
            self._optimizer_step(loss, batch_idx, batch)
        return self._outputs(output, loss)

    def plain(self, batch: Any, batch_idx: int, is_last: bool) -> dict[str, Any]:
        """:meth:`automatic` when nothing shapes the step: the same order, in one function.

        Only when :meth:`batch_step` chose it: automatic optimization, one optimizer,
        every batch stepping, no precision, clipping, skipping or step hook, and no
        override of ``backward``, ``optimizer_step`` or ``optimizer_zero_grad``.
        What remains of the step is ``zero_grad(set_to_none=True)`` (of the last
        step's gradients), ``training_step``, the non-finite check, ``backward``,
        ``optimizer.step()`` and the step count, schedulers and logging.

        Args:
            batch: the batch, on the device.
            batch_idx: its index in the epoch.
            is_last: whether it is the epoch's last batch (unused).

        Returns:
            The outputs ``on_train_batch_end`` receives (a dict holding "loss").
        """
        # The last step's gradients, kept for the hooks after it, go before this forward
        # pass (every batch is a window here: the flag stays set).
        optimizer = self.optimizers[0]
        if self._end_window is not None:  # a non-finite slot of the user's own
            self._end_window()
        optimizer.zero_grad(set_to_none=True)
        output = self._training_step(batch, batch_idx)
        if type(output) is not torch.Tensor or not output.requires_grad or output.numel() != 1:
            # A dict, None, or a loss to explain: automatic's own handling.
            output, loss = self._backward_output(output)
            self._optimizer_step(loss, batch_idx)
            return self._outputs(output, loss)
        state = self.run.state
        self.run.results.last_loss = output
        if self._observe is not None:
            self._observe(output, state.global_step)
        output.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        state.global_step += 1
        every = self.log_every_n_steps
        if self._schedulers or (every and state.global_step % every == 0):
            self._after_step(state.global_step)
        return {"loss": output.detach()} if self._batch_end_hooks else _UNREAD

    def none_batch(self, batch_idx: int) -> Any:
        """A batch the dataloader yielded as None: no step, as in Lightning (said once a
        fit). Returns the outputs ``on_train_batch_end`` receives: None.

        Args:
            batch_idx: the batch's index in the epoch.
        """
        self._warn_once(
            "none batch",  # Lightning's words first
            "train_dataloader yielded None. If this was on purpose, ignore this warning... "
            f"(batch {batch_idx} of epoch {self.run.state.epoch}: no training_step and no "
            "optimizer step ran for it; the batch-end hooks received outputs=None.)",
        )
        return None

    def _warn_once(self, key: object, message: str) -> None:
        # A warning said once a fit (per key).
        if key not in self._said:
            self._said.add(key)
            self._warn(message)

    def _outputs(self, output: Any, loss: torch.Tensor | None) -> dict[str, Any]:
        # Only batch-end hooks read the outputs (detaching and dividing the loss cost
        # calls per step): none are made for a fit without them.
        return _batch_outputs(output, loss, self._divisor) if self._batch_end_hooks else _UNREAD

    def _optimizer_step(self, loss: torch.Tensor | None, batch_idx: int, batch: Any = None) -> None:
        # The end of a window: step (the Module's optimizer_step if it has one),
        # zero the gradients, count the step.
        state, optimizer = self.run.state, self.optimizers[0]
        closure = (
            ComputedLoss(loss, self._evaluation(batch, batch_idx))  # type: ignore[arg-type]
            if self._needs_closure
            else None
        )
        # (training_step returned None: the step and its hooks still run, as in Lightning,
        # on whatever the window accumulated; step_optimizer skips a scaler with nothing.)
        if self._user_step is None:
            self.step_optimizer(optimizer, closure)
        else:
            managed = self.managed_optimizers[0]
            closure = closure or ComputedLoss(loss)  # type: ignore[arg-type]
            self._user_step(state.epoch, batch_idx, managed, closure)
        self._clear_pending = True  # before the next window's forward pass
        state.global_step += 1
        self._after_step(state.global_step)

    def _evaluation(self, batch: Any, batch_idx: int) -> Callable[[], torch.Tensor]:
        # What an optimizer's closure runs when it evaluates the loss again (LBFGS).
        def evaluate() -> torch.Tensor:
            self._clear_gradients(batch_idx)
            output, loss = self._forward_backward(batch, batch_idx)
            if loss is None:
                raise ValueError(
                    f"training_step returned {output!r} when {type(self.optimizers[0]).__name__} "
                    "evaluated the loss again within its step: return the loss every time."
                )
            return loss

        return evaluate

    def _clear_gradients(self, batch_idx: int) -> None:
        # The start of a window: the last step's gradients go (a vetoed window's too).
        optimizer = self.optimizers[0]
        if self._user_zero_grad is None:
            self.zero_grad(optimizer)
        else:
            # As in Lightning: on_before_zero_grad first, then the Module's
            # optimizer_zero_grad with the torch optimizer itself.
            self._before_zero_grad(optimizer)
            self._user_zero_grad(self.run.state.epoch, batch_idx, optimizer)

    def _separate_forward_backward(
        self, batch: Any, batch_idx: int
    ) -> tuple[Any, torch.Tensor | None]:
        # training_step under the forward context (autocast), then backward.
        context = self._forward_context() if self._forward_context is not None else None
        if context is None:
            output = self._training_step(batch, batch_idx)
        else:
            with context:
                output = self._training_step(batch, batch_idx)
        return self._backward_output(output)

    def _backward_output(self, output: Any) -> tuple[Any, torch.Tensor | None]:
        # The loss of what training_step returned, back-propagated (None: skip the batch).
        if output is None:
            # Lightning's documented meaning: skip this batch (no backward; the step
            # applies only gradients accumulated earlier in the window).
            self._warn_once(
                "None loss",  # Lightning's words first
                "`training_step` returned `None`. If this was on purpose, ignore this "
                f"warning... (first at step {self.run.state.global_step}: such a batch has "
                "no backward; the optimizer step and its hooks still run, on the gradients "
                "accumulated so far. Return the loss to train on it.)",
            )
            return None, None
        loss = loss_from_output(output, self.run.state.global_step)
        # Kept undetached (detach costs a call per step); backward frees its graph.
        self.run.results.last_loss = loss
        self.backward(loss)
        return output, loss

    def _fused_forward_backward(self, batch: Any, batch_idx: int) -> tuple[Any, torch.Tensor]:
        # The strategy's pass computes the loss with its gradients (see the module
        # docstring): the hooks around backward see the loss after the pass.
        assert self._fused is not None
        run, loss_scale = self.run, 1.0 / self._divisor
        context = self._forward_context() if self._forward_context is not None else None
        if context is None:
            loss = self._fused(batch, loss_scale)
        else:
            with context:
                loss = self._fused(batch, loss_scale)
        # The user's training_step, which would log its loss, did not run.
        self._backward_ran = True
        run.module.log("train/loss", loss, prog_bar=True, sync_dist=True)
        run.results.last_loss = loss
        if self._on_before_backward is not None:
            self._on_before_backward(loss)
        if self._observe is not None:
            self._observe(loss, run.state.global_step)
        if self._on_after_backward is not None:
            self._on_after_backward()
        return loss, loss

    def _after_step(self, steps_done: int) -> None:
        # Step-interval LR schedulers, and step metrics due to the loggers every n
        # steps (at the step the values were logged in; written after the batch-end hooks).
        for config in self._schedulers:
            if config.interval == "step" and steps_done % config.frequency == 0:
                self._step_scheduler(config)
        if self.log_every_n_steps and steps_done % self.log_every_n_steps == 0:
            self._log_due(steps_done - 1)

    def _log_due(self, step: int) -> None:
        if self._batch_end_hooks:
            self.pending_log_step = step
        else:
            self.run.results.write_step(step, self.run.state.epoch)

    def write_pending_log(self) -> None:
        """Write the step values due to the loggers (:attr:`pending_log_step`).

        The fit loop calls this after ``on_train_batch_end``, so that what the
        batch-end hooks log goes into the same write, as in Lightning.
        """
        step, self.pending_log_step = self.pending_log_step, None
        if step is not None:
            self.run.results.write_step(step, self.run.state.epoch)

    def end_epoch(self, epoch: int) -> None:
        """Step the epoch-interval LR schedulers due after ``epoch`` (automatic optimization).

        Args:
            epoch: the epoch that just ended, counted from 0.
        """
        for config in self._schedulers:
            if config.interval == "epoch" and (epoch + 1) % config.frequency == 0:
                self._step_scheduler(config)

    def _step_scheduler(self, config: LRSchedulerConfig) -> None:
        several = self.run.strategy.world_size > 1
        if several and config.monitor is not None:
            self.run.results.sync_step_values()  # every process: a monitored sync_dist value
        metrics = self.run.results.callback_metrics
        agree = self._rank_zero_value if several else None
        step_scheduler(config, metrics, self._warn, self._stepper, agree)

    def _rank_zero_value(self, name: str, value: float | None) -> float | None:
        # A plateau scheduler stepped with each process's own value (logged without
        # sync_dist) would give the processes different learning rates.
        point = f"an LR scheduler step on {name!r}"
        (agreed,), (differs,) = rank_zero_floats(self.run.strategy.exchange, [value], point)
        if differs:
            self._warn_once(
                ("unsynced", name),
                f"The LR scheduler monitors {name!r}, whose value differs between the "
                "processes (logged without sync_dist=True): every process steps it with "
                f"rank 0's value, so their learning rates stay equal. Log it with "
                f"self.log({name!r}, ..., sync_dist=True) to step on the mean over the processes.",
            )
        return agreed

    # --------------------------------------------------------------- manual
    def manual(self, batch: Any, batch_idx: int, is_last: bool) -> Any:
        """Run the user's ``training_step``, which steps its optimizers itself.

        Args:
            batch: the batch, on the device.
            batch_idx: its index in the epoch.
            is_last: whether it is the epoch's last batch (unused).
        """
        run, state = self.run, self.run.state
        before = state.global_step
        # Steps count while training_step runs, not in other hooks (as in Lightning).
        optimizers = self.managed_optimizers
        for optimizer in optimizers:
            optimizer._on_after_step = self._count_step
        try:
            with run.step_context():
                outputs = self._training_step(batch, batch_idx)
        finally:
            for optimizer in optimizers:
                optimizer._on_after_step = do_nothing
        stepped = state.global_step != before
        if stepped and self.log_every_n_steps and state.global_step % self.log_every_n_steps == 0:
            self._log_due(before)
        return _manual_outputs(outputs) if self._batch_end_hooks else _UNREAD

    def _module_clipping(self, optimizer: torch.optim.Optimizer, module: Any) -> None:
        module.configure_gradient_clipping(optimizer, *self._clip_settings)

    def _count_step(self) -> None:
        # After each opt.step() in a manual training_step (the closure still sees
        # the step before it).
        self.run.state.global_step += 1

    @contextmanager
    def toggle_model(
        self, optimizer: torch.optim.Optimizer, sync_grad: bool = True
    ) -> Iterator[None]:
        """Freeze the parameters ``optimizer`` does not update; optionally skip gradient sync.

        What ``opt.toggle_model()`` runs (see ``ManagedOptimizer.toggle_model``).

        Args:
            optimizer: the optimizer whose parameters train in the block.
            sync_grad: synchronise gradients between processes in the block.
        """
        module = self.run.module
        module.toggle_optimizer(optimizer)
        try:
            if sync_grad:
                yield
            else:
                with self._no_sync(self.run.model):
                    yield
        finally:
            module.untoggle_optimizer(optimizer)

    # --------------------------------------------------------------- pieces
    def backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        """The backward pass with its hooks (also ``Module.manual_backward``).

        Args:
            loss: the loss as ``training_step`` computed it.
            *args: passed to ``Tensor.backward``.
            **kwargs: passed to ``Tensor.backward``.
        """
        self._backward_ran = True
        if self._on_before_backward is not None:
            self._on_before_backward(loss)
        if self._observe is not None:
            self._observe(loss, self.run.state.global_step)
        if self._divisor != 1:
            loss = loss / self._divisor
        if self._scaler is not None:
            loss = self._scaler.scale(loss)
        if self._user_backward is None:
            loss.backward(*args, **kwargs)  # type: ignore[no-untyped-call]
        else:
            self._user_backward(loss, *args, **kwargs)
        if self._on_after_backward is not None:
            self._on_after_backward()

    def step_optimizer(
        self,
        optimizer: torch.optim.Optimizer,
        closure: Callable[[], Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Unscale, ``on_before_optimizer_step``, clip, then step (unless a non-finite loss vetoes).

        Args:
            optimizer: the optimizer to step.
            closure: a closure for optimizers that need one (LBFGS).
            **kwargs: passed to the optimizer's ``step``.

        Returns:
            What the optimizer's ``step`` returned; None for a skipped step.
        """
        scaler = self._scaler
        computed = None
        if type(closure) is ComputedLoss and not needs_closure(optimizer):
            computed, closure = closure, None  # the batch's backward has run already
        if closure is not None:
            if scaler is not None or self._veto is not None:
                raise ValueError(
                    "optimizer.step(closure) cannot be combined with a step that may be "
                    "skipped (the float16 gradient scaler, NonFiniteLoss('skip')); step "
                    "without a closure, or use another precision."
                )
            # The closure computes the gradients, so the hooks and clipping run after
            # it, each time the optimizer calls it (LBFGS calls it several times).
            return optimizer.step(self._hooks_after(closure, optimizer), **kwargs)
        if scaler is not None and not self._backward_ran:
            # Every training_step of the window returned None: the float16 scaler has no
            # gradients to check, so nothing steps (as in Lightning); the hooks still run.
            self._before_step(optimizer)
            return None
        if scaler is not None:
            scaler.unscale_(optimizer)  # the hooks and clipping see real gradients
        self._before_step(optimizer)
        if self._veto is not None and not self._veto.allow_step(self.run.state.global_step):
            if scaler is not None:
                scaler.update()  # after unscale_, the scaler needs its update
            return None
        if scaler is not None:
            result = scaler.step(optimizer, **kwargs)  # skips the step on overflow
            scaler.update()
        else:
            result = optimizer.step(**kwargs)
        # optimizer.step(closure) returns the closure's loss; so does a ComputedLoss step.
        return computed.loss if computed is not None and result is None else result

    def _before_step(self, optimizer: torch.optim.Optimizer) -> None:
        # on_before_optimizer_step, then clipping: both see the step's gradients.
        if self._on_before_optimizer_step is not None:
            self._on_before_optimizer_step(optimizer)
        if self._clip is not None:
            self._clip(optimizer, self.run.module)

    def _hooks_after(
        self, closure: Callable[[], Any], optimizer: torch.optim.Optimizer
    ) -> Callable[[], Any]:
        def closure_then_hooks() -> Any:
            result = closure()
            self._before_step(optimizer)
            return result

        return closure_then_hooks

    def zero_grad(self, optimizer: torch.optim.Optimizer, set_to_none: bool = True) -> None:
        """``on_before_zero_grad``, then clear the gradients; a new window starts.

        Args:
            optimizer: the optimizer whose gradients to clear.
            set_to_none: free the gradient tensors instead of zeroing them.
        """
        self._before_zero_grad(optimizer)
        optimizer.zero_grad(set_to_none=set_to_none)

    def _before_zero_grad(self, optimizer: torch.optim.Optimizer) -> None:
        self._backward_ran = False
        if self._on_before_zero_grad is not None:
            self._on_before_zero_grad(optimizer)
        if self._end_window is not None:
            self._end_window()


#: What a step returns when no ``on_train_batch_end`` hook reads its outputs.
_UNREAD: dict[str, Any] = {}


def _batch_outputs(output: Any, loss: torch.Tensor | None, divisor: int = 1) -> dict[str, Any]:
    """What ``on_train_batch_end`` receives for a batch of automatic optimization.

    As in Lightning: ``"loss"`` is the loss detached (a hook that keeps it keeps no
    graph) and divided as backward took it under accumulation, first, then the
    other keys of a dict ``training_step`` returned.
    """
    if loss is None:
        return {}  # a skipped batch: on_train_batch_end gets no loss, as in Lightning
    loss = loss.detach()
    if divisor != 1:
        loss = loss / divisor
    if isinstance(output, dict):
        return {"loss": loss, **{key: v for key, v in output.items() if key != "loss"}}
    return {"loss": loss}


def _manual_outputs(output: Any) -> Any:
    """What ``on_train_batch_end`` receives for a batch of manual optimization: as in
    Lightning, a dict (``{}`` for None, ``{"loss": ...}`` for a tensor), its loss detached."""
    if output is None:
        return {}
    if isinstance(output, torch.Tensor):
        return {"loss": output.detach()}
    if isinstance(output, Mapping) and isinstance(output.get("loss"), torch.Tensor):
        return {**output, "loss": output["loss"].detach()}
    return output
