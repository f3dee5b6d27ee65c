"""The fit loop: read top to bottom, starting with :func:`run_fit`'s pseudocode.

The Trainer sets everything up (strategy, optimizers, dataloaders, callbacks,
the optimization step) and hands it over as a :class:`~trainkit.loops.hooks.Run`
and a :class:`Fit`. The loop writes only to the run's state and results;
evaluation is in ``trainkit/loops/evaluate.py``, the optimization step in
``trainkit/loops/step.py``, batch iteration in ``trainkit/core/data.py``.

Hot path rule: nothing per batch does work that could be done once before the
first batch. Which hooks are overridden is looked up once (``Hooks``), logged
values stay on the device (``trainkit.loops.results``), and loggers are written every
``log_every_n_steps`` only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from trainkit.checkpoint.preemption import Preemption, StopVote
from trainkit.core.epoch_position import epoch_batches, set_sampler_epoch
from trainkit.loops.dataloaders import Reload
from trainkit.loops.evaluate import run_evaluation, run_sanity_check
from trainkit.loops.run import Run
from trainkit.loops.schedule import limits_reached, may_stop, val_check_batches, validation_due
from trainkit.loops.state import RunningStage
from trainkit.loops.step import Optimization
from trainkit.trainer.options import LoopOptions
from trainkit.utilities.seed import isolated_rng


@dataclass
class Fit:
    """What the fit loop runs on, prepared by the Trainer."""

    #: The loop's options (limits, validation schedule, logging).
    options: LoopOptions
    #: The prepared training dataloader.
    train_loader: Iterable[Any]
    #: The prepared validation dataloaders (empty: no validation).
    val_loaders: list[Iterable[Any]]
    #: Whether validation runs (loaders with batches, and a validation_step).
    validates: bool
    #: The optimization step.
    optimization: Optimization
    #: Catches preemption signals.
    preemption: Preemption
    #: Agrees across processes whether to stop for a preemption signal (None: one process).
    vote: StopVote | None
    #: Saves ``last.ckpt`` (at a resume point, after a preemption signal).
    save_last: Callable[[], None]
    #: Prints a warning from rank 0.
    warn: Callable[[str], None]
    #: Loads the dataloaders again (reload_dataloaders_every_n_epochs; None: never).
    reload: Reload | None = None
    #: ``time.monotonic()`` past which training stops (max_time); set when training starts.
    deadline: float = math.inf
    #: The ``max_steps`` limit in force (``inf``: none), read at every batch.
    max_steps: float = field(default=math.inf, init=False)

    def __post_init__(self) -> None:
        self.set_limits()

    def set_limits(self, **limits: Any) -> None:
        """Change options while the loop runs (``trainkit.trainer.fit_loop.change_options``)."""
        if limits:
            self.options = replace(self.options, **limits)
        steps = self.options.max_steps
        self.max_steps = math.inf if steps == -1 else float(steps)


def run_fit(run: Run, fit: Fit) -> None:
    """Train until max_steps, max_epochs or ``should_stop``.

    Pseudocode::

        if validating: sanity check (a few validation batches; random state untouched)
        on_train_start
        while epoch < max_epochs and not stopping (min_epochs/min_steps hold a stop back):
            reload_dataloaders_every_n_epochs: the training dataloader again (Reload)
            on_train_epoch_start
            remember the random state the epoch's shuffle starts from (resume uses it)
            for batch_idx, batch in loader (limited to limit_train_batches;
                                            a resumed epoch skips consumed batches by index):
                batch -> device
                on_train_batch_start (returning -1 ends the epoch)
                the optimization step (trainkit/loops/step.py; none for a None batch)
                on_train_batch_end
                validate if due (val_check_interval, check_val_every_n_epoch, or a stop)
                resume point (unless the epoch's last batch or inside an accumulation window)
                stop if global_step == max_steps, max_time passed, or should_stop
            on_train_epoch_end; write epoch metrics; epoch-interval LR schedulers
                (automatic optimization only: in manual optimization the user steps them)
            epoch += 1
            resume point
        on_train_end

    A *resume point* is a moment from which a run continues exactly as if it had
    never stopped: every batch before it, with its validation, and every epoch end
    before it are complete. ``on_resume_point`` hooks (ModelCheckpoint) save there.

    Args:
        run: the run's context (state, results, hooks, strategy, model).
        fit: the data, the step and the stopping machinery.
    """
    state, options = run.state, fit.options
    if fit.validates and options.num_sanity_val_steps != 0:
        run_sanity_check(run, fit.val_loaders, options.num_sanity_val_steps)
    if state.num_training_batches == 0:
        return  # limit_train_batches=0: no training, and no epoch passes
    state.stage = RunningStage.TRAINING
    torch.set_grad_enabled(True)  # whatever the caller left; as Lightning, on after fit
    if not run.module.training:  # leave submodules the user put in eval mode alone
        run.model.train()
    run.results.enter_training_start()
    run.hooks.call("on_train_start")
    run.results.end_training_start()
    fit.deadline = time.monotonic() + options.max_time_seconds
    if (state.epoch or state.global_step) and limits_reached(
        state.epoch, state.global_step, fit.options
    ):
        fit.warn(
            f"trainkit: fit trains nothing: the run is at epoch {state.epoch}, step "
            f"{state.global_step}, past its limits (max_epochs={options.max_epochs}, "
            f"max_steps={options.max_steps}); an earlier fit of this Trainer, or the checkpoint "
            "it resumed from, got there. Raise trainer.fit_loop.max_epochs (or max_steps) to "
            "train on, or train from the start with a new Trainer."
        )
    # The limits are read again at every epoch: trainer.fit_loop may change them.
    while not (
        limits_reached(state.epoch, state.global_step, fit.options)
        or may_stop(state, fit.options, fit.warn)
        or state.preempted
    ):
        if fit.reload is not None:  # the training dataloader again, when due
            fit.train_loader = fit.reload.train(fit.train_loader, state.epoch, options)
        _train_epoch(run, fit)
        if state.preempted:
            break  # leave the epoch as saved: it is not over, and must not be marked so
        _end_epoch(run, fit)
    if fit.vote is not None:
        fit.vote.finish()  # every rank finishes the vote it started
    run.hooks.call("on_train_end")


def _train_epoch(run: Run, fit: Fit) -> None:
    """The batches of one epoch (from the resumed position, if resuming)."""
    state, results, hooks, options = run.state, run.results, run.hooks, fit.options
    loader, total = fit.train_loader, state.num_training_batches
    set_sampler_epoch(loader, state.epoch)
    optimization = fit.optimization
    to_device = run.batch_to_device
    on_batch_start = hooks.optional("on_train_batch_start")
    on_batch_end = hooks.optional("on_train_batch_end")
    on_resume_point = hooks.optional("on_resume_point")
    preemption, vote, deadline = fit.preemption, fit.vote, fit.deadline
    if state.batch_idx == 0:  # > 0 only when resuming in the middle of this epoch
        results.train.reset()
    results.enter_training_epoch()
    # A resumed epoch counts the batches it skips as run.
    state.epoch_first_batch, state.epoch_phase = state.batches_seen - state.batch_idx, 1
    hooks.call("on_train_epoch_start")
    val_every = val_check_batches(fit.options, state.epoch, total, fit.validates)  # after the hook
    optimization.start_epoch(state.epoch, total, batch_end_hooks=on_batch_end is not None)
    step = hooks.profiled("run_training_batch", optimization.batch_step())
    epoch, state.epoch_start_rng = epoch_batches(
        loader, total, state.batch_idx, state.epoch_start_rng, state.loader_states
    )
    empty = True
    for batch_idx, batch, is_last in hooks.profiled_iterable("train_dataloader_next", epoch):
        empty = False
        state.batch_idx, state.is_last_batch = batch_idx, is_last
        batch = to_device(batch, 0)
        results.enter_training_step(batch)
        if batch is None:  # as in Lightning: said once, no step; the batch-end hooks run
            state.batches_seen += 1
            outputs = optimization.none_batch(batch_idx)
        else:
            if on_batch_start is not None and on_batch_start(batch, batch_idx) == -1:
                break
            state.batches_seen += 1
            outputs = step(batch, batch_idx, is_last)
        if on_batch_end is not None:
            on_batch_end(outputs, batch, batch_idx)
            if optimization.pending_log_step is not None:  # with what the hooks logged
                optimization.write_pending_log()
        results.enter_training_epoch()
        state.batch_idx = batch_idx + 1
        if deadline != math.inf and vote is None and time.monotonic() >= deadline:
            state.should_stop = True  # max_time (several processes: agreed by the vote)
        due = val_every is not None and validation_due(
            options, state, val_every, batch_idx, is_last
        )
        if due:
            _validate(run, fit)
        # A resume point, but not after the epoch's last batch (the epoch's end has
        # one) nor inside an accumulation window (its gradients are not saved).
        if not is_last and optimization.stepped:
            if on_resume_point is not None:
                on_resume_point()
            if vote is not None or preemption.signal:  # else the stop check does nothing
                time_up = _resume_point(run, fit, None)  # max_time, agreed: a stop as above
                if (
                    time_up
                    and not due
                    and val_every is not None
                    and validation_due(options, state, val_every, batch_idx, is_last)
                ):
                    _validate(run, fit)
        if (
            state.global_step >= fit.max_steps
            or state.preempted  # a signal stops whatever min_epochs says
            or (state.should_stop and may_stop(state, options))
        ):
            break
    if empty and state.batch_idx == 0:
        # A loader without a length that yields nothing (one with a length is checked at set-up).
        raise ValueError(
            f"The training dataloader yielded no batches in epoch {state.epoch}, so fit would "
            "go on without training. Check the dataset or iterable the loader reads from, or "
            "pass limit_train_batches=0 to run only validation."
        )


def _end_epoch(run: Run, fit: Fit) -> None:
    """Epoch-end hooks, metrics and schedulers; then the next epoch's resume point."""
    state, results, hooks = run.state, run.results, run.hooks
    state.epoch_phase = 2
    results.enter_training_epoch_end()
    # The Module's hook may log epoch values; reduce them before the callbacks
    # that monitor (early stopping, checkpointing) read callback_metrics.
    hooks.call_epoch_end(
        "on_train_epoch_end",
        lambda: results.update_epoch_metrics(results.train.epoch_values(), results.train),
    )
    results.end_training_epoch(step=max(state.global_step - 1, 0), epoch=state.epoch)
    # After every epoch-end hook (they may read metric.compute()), as Lightning.
    results.train.reset_computed_metrics()
    if state.is_last_batch or state.batch_idx >= state.num_training_batches:  # not cut short
        fit.optimization.end_epoch(state.epoch)  # (max_steps, a hook's -1), as in Lightning
    results.close()
    state.epoch += 1
    state.batch_idx, state.epoch_phase = 0, 0
    # A resume from here starts the next epoch, which records its own starting
    # state: the finished epoch's is not saved (four generator states fewer to
    # pickle and digest in every end-of-epoch checkpoint).
    state.epoch_start_rng = None
    if time.monotonic() >= fit.deadline:  # max_time, by any process's clock (see below)
        state.should_stop = True
    # Agree across processes, so that no rank leaves the loop alone.
    state.should_stop = run.strategy.reduce_boolean_decision(
        state.should_stop, all=False, point="the stop decision at a training epoch's end"
    )
    _resume_point(run, fit, run.hooks.optional("on_resume_point"))


def _resume_point(run: Run, fit: Fit, on_resume_point: Callable[[], Any] | None) -> bool:
    """Save and vote; True when the processes agreed just now that max_time is up."""
    if on_resume_point is not None:
        on_resume_point()
    # A signal, or max_time by one's clock, may reach only some processes: they
    # agree, in the background, to stop at the same point (a rank stopping alone
    # would leave the others waiting in a collective). One process needs no vote.
    # Trainer.fit reports a signal's stop and exits once the run has ended.
    time_up = fit.vote is not None and time.monotonic() >= fit.deadline
    if fit.preemption.agree(fit.vote, time_up) and not run.state.preempted:
        fit.save_last()
        run.state.preempted = True
        run.state.should_stop = True
    elif fit.vote is not None and fit.vote.time_up and not run.state.should_stop:
        run.state.should_stop = True
        return True
    return False


# ----------------------------------------------------------------- validation
def _validate(run: Run, fit: Fit) -> None:
    """A validation run inside fit; its metrics go to the loggers."""
    if not fit.validates:  # trainer.limit_val_batches = 0 since the epoch started
        return
    state = run.state
    if fit.optimization.stepped:  # gradients of an open accumulation window are kept
        run.module.on_validation_model_zero_grad()  # as Lightning: frees them for validation
    # Validation must not move the training's random streams (see isolated_rng).
    with isolated_rng():
        if fit.reload is not None:  # the validation dataloaders again, when due
            fit.val_loaders = fit.reload.val(fit.val_loaders, state.epoch, fit.options)
        run_evaluation(run, fit.val_loaders, state.num_val_batches, "validation")
    run.results.write_evaluation(step=max(state.global_step - 1, 0), epoch=state.epoch)
    # Agree across processes, so that no rank leaves the loop alone.
    state.should_stop = run.strategy.reduce_boolean_decision(
        state.should_stop, all=False, point="the stop decision after validation"
    )
