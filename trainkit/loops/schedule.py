"""When the fit loop validates and when it may stop: functions of the options and the state.

:func:`val_check_batches` and :func:`validation_due` place validation runs
(``val_check_interval``, ``check_val_every_n_epoch``); :func:`may_stop` decides
whether a stop request (``trainer.should_stop``, early stopping, ``max_time``)
is honoured yet (``min_epochs``, ``min_steps``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from trainkit.loops.state import RunState
from trainkit.trainer.options import LoopOptions

if TYPE_CHECKING:
    from collections.abc import Callable


def max_steps_reached(global_step: int, options: LoopOptions) -> bool:
    """Whether ``max_steps`` optimizer steps are done.

    Args:
        global_step: optimizer steps taken.
        options: the loop options.
    """
    return options.max_steps != -1 and global_step >= options.max_steps


def limits_reached(epochs: int, global_step: int, options: LoopOptions) -> bool:
    """Whether ``epochs`` epochs or ``global_step`` steps are at ``max_epochs`` or ``max_steps``.

    Args:
        epochs: epochs done.
        global_step: optimizer steps taken.
        options: the loop options.
    """
    return epochs >= options.resolved_max_epochs or max_steps_reached(global_step, options)


def sanity_batches(totals: list[float], limit: int) -> list[float]:
    """Batches the sanity check runs from each validation loader (``num_sanity_val_steps``).

    Args:
        totals: batches in each validation loader.
        limit: ``num_sanity_val_steps`` (-1: all).

    Example:
        >>> sanity_batches([5.0, 1.0], 2)
        [2, 1.0]
    """
    return [t if limit == -1 else min(t, limit) for t in totals]


def may_stop(
    state: RunState, options: LoopOptions, say: Callable[[str], None] | None = None
) -> bool:
    """Whether a stop was requested and ``min_epochs``/``min_steps`` allow it now.

    A request made too early stays pending: training goes on until the minimum is
    reached, then stops.

    Args:
        state: the run state (``should_stop``, completed epochs, steps).
        options: the loop options.
        say: prints a one-time note (rank 0) that the request waits for the minimum
            (None: nothing is said; the epoch-level check says it once).
    """
    if not state.should_stop:
        return False
    if minimums_reached(state.epoch, state.global_step, options):
        return True
    if say is not None:
        say(
            f"trainkit: a stop was requested, but min_epochs={options.min_epochs} or "
            f"min_steps={options.min_steps} is not reached yet; training continues until it is."
        )
    return False


def minimums_reached(epochs: int, global_step: int, options: LoopOptions) -> bool:
    """Whether ``min_epochs`` and ``min_steps`` allow a stop after ``epochs`` epochs.

    Args:
        epochs: epochs done.
        global_step: optimizer steps taken.
        options: the loop options.
    """
    min_epochs, min_steps = options.min_epochs, options.min_steps
    return (min_epochs is None or epochs >= min_epochs) and (
        min_steps is None or global_step >= min_steps
    )


def validates_in_epoch(options: LoopOptions, epoch: int) -> bool:
    """Whether ``check_val_every_n_epoch`` has epoch ``epoch`` validate (None: every epoch).

    Args:
        options: the loop options.
        epoch: the epoch, counted from 0.
    """
    every_n_epochs = options.check_val_every_n_epoch
    return every_n_epochs is None or (epoch + 1) % every_n_epochs == 0


def val_check_batches(
    options: LoopOptions, epoch: int, total: float, validates: bool
) -> int | None:
    """Validate after every this many training batches (None: no validation this epoch).

    Args:
        options: the loop options.
        epoch: the current epoch.
        total: training batches in the epoch (``inf`` when unknown).
        validates: whether the run validates at all.
    """
    if not validates or not validates_in_epoch(options, epoch):
        return None
    every_n_epochs = options.check_val_every_n_epoch
    interval = options.val_check_interval
    if isinstance(interval, int):
        if interval == 0:
            raise ValueError(
                "val_check_interval=0 is no number of batches to validate after, and this "
                "fit trains with validation. Pass a positive number of batches, or a float "
                "fraction of an epoch (0.0: after every batch, 1.0: at each epoch's end)."
            )
        if every_n_epochs is not None and interval > total:
            raise ValueError(
                f"val_check_interval={interval} is larger than the {int(total)} training "
                "batches of an epoch: it must be less than or equal to the number of the "
                "training batches. Lower it, or pass check_val_every_n_epoch=None to count "
                "batches across epochs."
            )
    elif total == math.inf and interval != 1.0:
        raise ValueError(
            f"val_check_interval={interval} is a fraction of an epoch, but the training "
            "dataloader has no length. Pass an integer number of batches."
        )
    return batches_between_checks(options, total)


def batches_between_checks(options: LoopOptions, total: float) -> int:
    """Training batches from one validation to the next, as ``val_check_interval`` says.

    The interval itself when it is an int; else that fraction of the epoch's
    ``total`` batches, at least 1 (so 0.0 is every batch, as in Lightning); 0 for
    an epoch of unknown length (validation runs when the loader ends, see
    :func:`validation_due`).

    Args:
        options: the loop options.
        total: training batches in the epoch (``inf`` when unknown).
    """
    interval = options.val_check_interval
    if isinstance(interval, int):
        return interval
    if total == math.inf:
        return 0
    return max(1, int(total * interval))


def validation_due(
    options: LoopOptions, state: RunState, every: int, batch_idx: int, is_last: bool
) -> bool:
    """Whether validation runs after this batch: its interval says so, or a stop ends the epoch.

    A stop (``should_stop`` that the minimums allow, ``max_time``) in an epoch that
    validates validates first, as Lightning does, so the run ends with metrics of
    its final weights; ``max_steps`` does not.

    Args:
        options: the loop options.
        state: the run state (counts batches across epochs when asked to).
        every: what :func:`val_check_batches` returned.
        batch_idx: the batch's index in the epoch.
        is_last: whether it is the epoch's last batch.
    """
    if state.should_stop and minimums_reached(state.epoch, state.global_step, options):
        return True
    if every == 0:  # a loader without length: at its end
        return is_last
    if options.check_val_every_n_epoch is None and isinstance(options.val_check_interval, int):
        # Count batches across epochs (the loop counts each batch it runs).
        return state.batches_seen % every == 0
    return (batch_idx + 1) % every == 0
