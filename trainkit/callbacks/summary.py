"""RunSummary: a few lines at the end of a run, and a warning before a run that logs nothing.

At the end of ``fit``, ``validate`` and ``test``, global rank 0 prints what the
run did and where its results are::

    fit: finished in 42.1s | epoch 3/3, step 1407 | 1407 batches at 33.4 it/s, 2137 samples/s
      metrics: train/loss 0.03121 | val/acc 0.9921 | val/loss 0.02541
      best: val/acc 0.9921 at logs/version_0/checkpoints/epoch=2-step=1407.ckpt
      last: logs/version_0/checkpoints/last.ckpt
      logs: logs/version_0

Everything in it is read at the run's end (and the clock at epoch and
validation boundaries): nothing runs per batch.

At fit start it also warns when the run has too few steps for
``Trainer(log_every_n_steps=...)`` to send any step value to the loggers.

The Trainer adds one to every run (not with ``barebones=True``); it prints its
summary when the Trainer also adds its own progress bar (``enable_progress_bar=True``
and no ``TQDMProgressBar`` of the user's). Pass ``RunSummary()`` in
``callbacks`` to print it anyway, ``RunSummary(verbose=False)`` to not print it.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from trainkit.callbacks.base import Callback
from trainkit.utilities.durations import format_duration, format_rate

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

_STAGES = ("fit", "validate", "test")


class RunSummary(Callback):
    """Print a short summary at the end of fit, validate and test; rank 0 only.

    The summary says how the run ended (finished; stopped early; stopped for a
    preemption signal; nothing to train because the checkpoint it resumed from
    is already at ``max_epochs``/``max_steps``), how long it took, how fast it
    trained (batches per second, and samples per second when the training
    dataloader has a ``batch_size``), the final value of every metric in
    ``trainer.callback_metrics`` (sorted by name), the best checkpoint and its
    score and the last checkpoint (from the first ``ModelCheckpoint``), and the
    first logger's folder.

    A disabled progress bar (``bar.disable()``) silences the summary too: both are
    the run's console output.

    Args:
        verbose: print the summary. False keeps only the short-run warning.

    Example:
        >>> import trainkit
        >>> from trainkit.callbacks import RunSummary
        >>> trainer = trainkit.Trainer(enable_progress_bar=False, callbacks=[RunSummary()])
    """

    def __init__(self, verbose: bool = True) -> None:
        self.verbose = verbose
        self._started = 0.0  # set up (the summary's "finished in")
        self._train_started = 0.0
        self._train_seconds = 0.0  # training only: validation inside fit is taken out
        self._validation_started = 0.0
        self._validation_seconds = 0.0
        self._batches = 0  # training batches this process ran in this fit
        self._epoch_first: int | None = None  # the batch the current epoch started from
        self._start_step = 0
        self._start_epoch = 0

    # ------------------------------------------------------------- hooks
    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Start the run's clock."""
        self._started = time.monotonic()
        self._train_seconds = self._validation_seconds = 0.0
        self._batches = 0
        self._epoch_first = None

    def on_fit_start(self, trainer: Trainer, module: Module) -> None:
        """Remember where the fit starts (after a resume); warn when it will log no step."""
        self._start_step, self._start_epoch = trainer.global_step, trainer.current_epoch
        message = short_run_warning(trainer)
        if message:
            trainer.warn(message)

    def on_train_start(self, trainer: Trainer, module: Module) -> None:
        """Start the training clock (after the sanity check)."""
        self._train_started = time.monotonic()
        self._validation_seconds = 0.0

    def on_train_epoch_start(self, trainer: Trainer, module: Module) -> None:
        """Note the batch the epoch starts from (not 0 in a resumed epoch)."""
        self._epoch_first = trainer.state.batch_idx

    def on_train_epoch_end(self, trainer: Trainer, module: Module) -> None:
        """Count the epoch's batches (once per epoch: nothing is counted per batch)."""
        self._count_epoch(trainer)

    def on_validation_start(self, trainer: Trainer, module: Module) -> None:
        """Stop counting training time while validation runs inside fit."""
        self._validation_started = time.monotonic()

    def on_validation_end(self, trainer: Trainer, module: Module) -> None:
        """Add the validation's time to what is taken out of training time."""
        self._validation_seconds += time.monotonic() - self._validation_started

    def on_train_end(self, trainer: Trainer, module: Module) -> None:
        """Stop the training clock; count a partial epoch (a stop in the middle of one)."""
        self._count_epoch(trainer)
        elapsed = time.monotonic() - self._train_started
        self._train_seconds = max(elapsed - self._validation_seconds, 0.0)

    def teardown(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Print the summary of a run that ended normally (rank 0 only)."""
        if not self.verbose or stage not in _STAGES or not trainer.is_global_zero:
            return
        if trainer.state.status != "finished" and not trainer.preempted:
            return  # an error: its traceback or message says what happened
        bar = trainer.progress_bar_callback
        if bar is not None and bar.is_disabled:
            return
        print("\n".join(self.lines(trainer, getattr(stage, "value", stage))), flush=True)

    def _count_epoch(self, trainer: Trainer) -> None:
        if self._epoch_first is not None:
            self._batches += max(trainer.state.batch_idx - self._epoch_first, 0)
            self._epoch_first = None

    # ----------------------------------------------------------- content
    def lines(self, trainer: Trainer, stage: str) -> list[str]:
        """The summary's lines for a run of ``stage`` that has just ended.

        Override it to change what is printed.

        Args:
            trainer: the Trainer whose run ended.
            stage: "fit", "validate" or "test".

        Returns:
            The lines, without newlines.
        """
        elapsed = time.monotonic() - self._started
        if stage == "fit":
            head = [self._fit_outcome(trainer, elapsed)]
        else:
            totals = trainer.num_val_batches if stage == "validate" else trainer.num_test_batches
            batches = sum(total for total in totals if not math.isinf(total))
            head = [
                f"{stage}: finished in {format_duration(elapsed)} | "
                f"{int(batches)} batches at {format_rate(batches, elapsed)}"
            ]
        metrics = {name: _number(value) for name, value in trainer.callback_metrics.items()}
        if metrics:
            shown = " | ".join(f"{name} {metrics[name]}" for name in sorted(metrics))
            head.append(f"  metrics: {shown}")
        if stage == "fit":
            head += _checkpoint_lines(trainer)
        if trainer.loggers:
            head.append(f"  logs: {trainer.log_dir}")
        return head

    def _fit_outcome(self, trainer: Trainer, elapsed: float) -> str:
        epoch, step = trainer.current_epoch, trainer.global_step
        max_epochs, max_steps = trainer.max_epochs, trainer.max_steps
        if trainer.ckpt_path and step == self._start_step and epoch == self._start_epoch:
            if max_steps != -1 and step >= max_steps:
                where = f"at step {step}, max_steps={max_steps}"
            else:
                where = f"at epoch {epoch}, max_epochs={max_epochs}"
            return f"fit: nothing to train: the checkpoint is {where} (raise it to train on)"
        if trainer.preempted:
            how = "stopped for a preemption signal (resume with ckpt_path='last')"
        elif trainer.should_stop:
            how = "stopped early"
        else:
            how = "finished"
        # current_epoch counts finished epochs; a stop inside one shows the epoch it was in.
        epochs = f"epoch {epoch}" if max_epochs in (-1, None) else f"epoch {epoch}/{max_epochs}"
        parts = [f"fit: {how} in {format_duration(elapsed)}", f"{epochs}, step {step}"]
        if self._batches:
            speed = f"{self._batches} batches at {format_rate(self._batches, self._train_seconds)}"
            samples = trainer.state.samples_per_step
            if samples and self._train_seconds > 0:
                speed += f", {self._batches * samples / self._train_seconds:.0f} samples/s"
            parts.append(speed)
        return " | ".join(parts)


def _number(value: Any) -> str:
    # callback_metrics holds tensors; the summary reads them once, at the run's end.
    try:
        return f"{float(value):.4g}"
    except (TypeError, ValueError, RuntimeError):
        return str(value)


def _checkpoint_lines(trainer: Trainer) -> list[str]:
    checkpoint = trainer.checkpoint_callback
    if checkpoint is None:
        return []
    lines = []
    if checkpoint.monitor and checkpoint.best_model_path:
        score = checkpoint.best_model_score
        shown = _number(score) if score is not None else "?"
        lines.append(f"  best: {checkpoint.monitor} {shown} at {checkpoint.best_model_path}")
    if checkpoint.last_model_path:
        lines.append(f"  last: {checkpoint.last_model_path}")
    elif not checkpoint.monitor and checkpoint.best_model_path:
        lines.append(f"  last: {checkpoint.best_model_path}")
    return lines


def short_run_warning(trainer: Trainer) -> str | None:
    """The warning for a fit too short for ``log_every_n_steps`` to log a step value.

    Step values go to the loggers when ``global_step`` reaches a multiple of
    ``log_every_n_steps`` (counted across epochs). When no multiple lies between
    the step the fit starts from and the last step it will take, no step value
    reaches the loggers (epoch values still do). Lightning warns when one epoch
    has fewer batches than the interval, even when later epochs would log;
    trainkit warns only when the whole run would log no step.

    Args:
        trainer: the Trainer, at fit start (dataloaders counted, checkpoint restored).

    Returns:
        The message, or None when there is nothing to warn about (no logger, a run
        of unknown length, or one that logs).
    """
    if not trainer.loggers:
        return None
    try:
        last = trainer.estimated_stepping_batches
    except RuntimeError:
        return None  # unknown length (an iterable without len and no max_steps)
    start, every = trainer.global_step, trainer.log_every_n_steps
    if last <= start or last // every > start // every:
        return None
    left = last - start
    return (
        f"This fit takes {left} optimizer step{'s' if left != 1 else ''}, fewer than the "
        f"logging interval Trainer(log_every_n_steps={every}), so no step value reaches the "
        "loggers (epoch values still do). Set log_every_n_steps to "
        f"{left} or lower to see the training curve."
    )
