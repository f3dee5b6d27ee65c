"""EarlyStopping: stop training when a monitored metric stops improving.

Each check reads one value from ``trainer.callback_metrics`` (one host sync per
check, never per step). Ranks must agree on stopping, or one rank would
leave the others waiting in a collective (promise 5 in DESIGN.md): metrics logged
with ``sync_dist=True`` are the same on every rank, each check agrees across ranks
(a stop any rank decides is every rank's, with its ``stopped_epoch``, as in
Lightning), and the loop also combines ``should_stop`` at the end of each epoch.
"""

from __future__ import annotations

import math
import warnings
from enum import Enum
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.base import Callback, validates_once_per_epoch
from trainkit.utilities.messages import did_you_mean

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

_MODES = ("min", "max")


class MetricMissingWarning(RuntimeWarning, UserWarning):
    """``EarlyStopping(strict=False)`` did not find its monitored metric.

    A ``RuntimeWarning`` as Lightning's is, and a ``UserWarning`` as trainkit's
    other warnings are, so a filter for either catches it.
    """


class EarlyStoppingReason(Enum):
    """Why EarlyStopping stopped training (``EarlyStopping.stopping_reason_code``)."""

    NOT_STOPPED = 0
    STOPPING_THRESHOLD = 1
    DIVERGENCE_THRESHOLD = 2
    PATIENCE_EXHAUSTED = 3
    NON_FINITE_METRIC = 4


class EarlyStopping(Callback):
    """Stop training after ``patience`` checks without improvement of ``monitor``.

    Args:
        monitor: name of the logged metric to watch, as passed to ``self.log``.
        mode: "min" when lower is better (a loss), "max" when higher is better.
        patience: checks without improvement tolerated before stopping.
        min_delta: the least change that counts as an improvement.
        check_on_train_epoch_end: True checks at the end of each training epoch
            (after that epoch's validation, and after its training metrics are
            reduced), False after each validation run. None, as in Lightning,
            checks at each training epoch's end when validation runs once per epoch
            at its end (``val_check_interval=1.0`` and ``check_val_every_n_epoch=1``,
            the defaults) or not at all, and after each validation run otherwise.
        strict: raise when ``monitor`` is missing from the logged metrics; when
            False, warn once and skip the check.
        verbose: print improvements and the reason for stopping (rank 0, or every
            rank with its rank in front when ``log_rank_zero_only`` is False).
        check_finite: stop when the monitored value is NaN or infinite.
        stopping_threshold: stop as soon as the value is this good or better.
        divergence_threshold: stop as soon as the value is this bad or worse.
        log_rank_zero_only: with ``verbose``, print from global rank 0 only.

    Attributes:
        wait_count: checks since the last improvement.
        best_score: the best value seen so far, a tensor (+inf / -inf before the first).
        stopped_epoch: the epoch in which training was stopped; 0 until a stop, as in
            Lightning (``stopping_reason_code`` tells a stop in epoch 0 from none).
        stopping_reason: why training was stopped (a message), or None.
        stopping_reason_message: the same message (Lightning's name for it).
        stopping_reason_code: the kind of reason, an :class:`EarlyStoppingReason`.

    Subclasses may override Lightning's ``_evaluate_stopping_criteria(current)``
    (one check's decision) and ``_should_skip_check(trainer)``, and call
    ``_run_early_stopping_check(trainer)`` from other hooks, as in Lightning.

    Example:
        >>> stopper = EarlyStopping(monitor="val/loss", mode="min", patience=5)
        >>> stopper.state_key
        "EarlyStopping{'monitor': 'val/loss', 'mode': 'min'}"
    """

    monitors_epoch_end = True  # its epoch-end hooks run after the Module's

    def __init__(
        self,
        monitor: str,
        min_delta: float = 0.0,
        patience: int = 3,
        verbose: bool = False,
        mode: str = "min",
        strict: bool = True,
        check_finite: bool = True,
        stopping_threshold: float | None = None,
        divergence_threshold: float | None = None,
        check_on_train_epoch_end: bool | None = None,
        log_rank_zero_only: bool = False,
    ) -> None:
        if mode not in _MODES:
            raise ValueError(
                f"EarlyStopping(mode={mode!r}) is not supported: `mode` can be 'min' or "
                f"'max', got {mode}. Use 'min' when lower is better (a loss) or 'max' when "
                "higher is better (accuracy)."
            )
        if patience < 0:
            raise ValueError(f"EarlyStopping(patience={patience}) must be 0 or more.")
        if min_delta < 0:
            raise ValueError(
                f"EarlyStopping(min_delta={min_delta}) must be 0 or more; the direction "
                "of improvement is set by mode."
            )
        self.monitor = monitor
        self.mode = mode
        self.patience = patience
        self.min_delta = float(min_delta)
        self.check_on_train_epoch_end = check_on_train_epoch_end
        # Where this run checks: check_on_train_epoch_end, None resolved in setup.
        self._check_on_train_epoch_end = bool(check_on_train_epoch_end)
        self.strict = strict
        self.verbose = verbose
        self.check_finite = check_finite
        self.stopping_threshold = stopping_threshold
        self.divergence_threshold = divergence_threshold
        self.log_rank_zero_only = log_rank_zero_only

        self.wait_count = 0
        self.best_score = torch.tensor(math.inf if mode == "min" else -math.inf)
        self.stopped_epoch = 0
        self.stopping_reason: str | None = None
        self.stopping_reason_code = EarlyStoppingReason.NOT_STOPPED
        self._fitting = True
        self._warned_missing = False

    #: Lightning's comparison per mode (improvement when ``monitor_op(current, best)``).
    mode_dict = {"min": torch.lt, "max": torch.gt}
    #: How messages write "better than" per mode.
    order_dict = {"min": "<", "max": ">"}

    @property
    def monitor_op(self) -> Any:
        """``torch.lt`` for mode "min", ``torch.gt`` for "max"."""
        return self.mode_dict[self.mode]

    @property
    def state_key(self) -> str:
        """Includes monitor and mode, so two EarlyStopping callbacks can coexist."""
        arguments = {"monitor": self.monitor, "mode": self.mode}
        return type(self).__qualname__ + repr(arguments)

    def state_dict(self) -> dict[str, Any]:
        """The counters a resumed run needs to keep counting where it stopped."""
        return {
            "wait_count": self.wait_count,
            "best_score": self.best_score,
            "stopped_epoch": self.stopped_epoch,
            "patience": self.patience,
            "stopping_reason": self.stopping_reason_code.value,
            "stopping_reason_message": self.stopping_reason,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the counters saved by :meth:`state_dict`.

        Args:
            state_dict: what :meth:`state_dict` returned when the checkpoint was saved.
        """
        self.wait_count = int(state_dict["wait_count"])
        self.best_score = torch.tensor(float(state_dict["best_score"]))
        stopped = state_dict["stopped_epoch"]  # None in files of older trainkit versions
        self.stopped_epoch = 0 if stopped is None else int(stopped)
        self.patience = int(state_dict["patience"])
        code = state_dict.get("stopping_reason", EarlyStoppingReason.NOT_STOPPED.value)
        self.stopping_reason_code = EarlyStoppingReason(code)
        self.stopping_reason = state_dict.get("stopping_reason_message")

    @property
    def stopping_reason_message(self) -> str | None:
        """Why training was stopped, or None (the same text as ``stopping_reason``)."""
        return self.stopping_reason

    # ---------------------------------------------------------------- hooks
    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Remember whether this run trains (a stand-alone validate must not count),
        and decide where ``check_on_train_epoch_end=None`` checks in it."""
        self._fitting = stage == "fit"
        chosen = self.check_on_train_epoch_end
        self._check_on_train_epoch_end = (
            validates_once_per_epoch(trainer) if chosen is None else chosen
        )

    def on_validation_end(self, trainer: Trainer, module: Module) -> None:
        """Check after each validation run (not the sanity check), unless this run
        checks at each training epoch's end."""
        if self._check_on_train_epoch_end or self._should_skip_check(trainer):
            return
        self._run_early_stopping_check(trainer)

    def on_train_epoch_end(self, trainer: Trainer, module: Module) -> None:
        """Check here when this run checks at each training epoch's end."""
        if not self._check_on_train_epoch_end or self._should_skip_check(trainer):
            return
        self._run_early_stopping_check(trainer)

    def _should_skip_check(self, trainer: Trainer) -> bool:
        """Whether a check is skipped now: outside fit, and during the sanity check."""
        return not self._fitting or bool(trainer.sanity_checking)

    # ---------------------------------------------------------------- logic
    def _improved(self, current: float) -> bool:
        if self.mode == "min":
            return current < float(self.best_score) - self.min_delta
        return current > float(self.best_score) + self.min_delta

    def _better_or_equal(self, current: float, threshold: float) -> bool:
        return current < threshold if self.mode == "min" else current > threshold

    def _run_early_stopping_check(self, trainer: Trainer) -> None:
        """One check: read the monitored value, decide, agree across processes, stop."""
        if getattr(trainer, "fast_dev_run", False):
            return
        value = trainer.callback_metrics.get(self.monitor)
        if value is None:
            self._missing(trainer)
            return
        should_stop, reason = self._evaluate_stopping_criteria(torch.as_tensor(value).squeeze())
        if getattr(trainer, "world_size", 1) > 1:
            # As Lightning's: a stop any process decides (on its own value, logged
            # without sync_dist) is every process's, with its stopped_epoch.
            decided = trainer.strategy.reduce_boolean_decision(
                should_stop, all=False, point=f"EarlyStopping({self.monitor!r})'s check"
            )
            if decided and not should_stop:
                trainer.should_stop = True
                self.stopped_epoch = trainer.current_epoch
        if should_stop:
            trainer.should_stop = True
            self.stopped_epoch = trainer.current_epoch
            self.stopping_reason = reason
        if reason is not None:
            self._info(trainer, f"EarlyStopping: {reason}")

    def _evaluate_stopping_criteria(self, current: torch.Tensor) -> tuple[bool, str | None]:
        """One check's decision on the monitored value; the counters move.

        Lightning's hook: a subclass may override it (a warm-up, a record of the
        reason) and call ``super()``.

        Args:
            current: the monitored value, a tensor of one element.

        Returns:
            Whether to stop, and why (on an improvement: what improved; else None).
        """
        value = float(current)
        order = self.order_dict[self.mode]
        code: EarlyStoppingReason | None = None
        if self.check_finite and not math.isfinite(value):
            code = EarlyStoppingReason.NON_FINITE_METRIC
            reason = (
                f"Monitored metric {self.monitor} = {value} is not finite. "
                f"Previous best score: {float(self.best_score):.6g}. Stopping training."
            )
        elif self.stopping_threshold is not None and self._better_or_equal(
            value, self.stopping_threshold
        ):
            code = EarlyStoppingReason.STOPPING_THRESHOLD
            reason = (
                f"Stopping threshold reached: {self.monitor} = {value} {order} "
                f"{self.stopping_threshold}. Stopping training."
            )
        elif self.divergence_threshold is not None and self._better_or_equal(
            -value, -self.divergence_threshold
        ):
            code = EarlyStoppingReason.DIVERGENCE_THRESHOLD
            reason = (
                f"Divergence threshold reached: {self.monitor} = {value} {order} "
                f"{self.divergence_threshold}. Stopping training."
            )
        elif self._improved(value):
            self.best_score = torch.tensor(value)
            self.wait_count = 0
            return False, f"{self.monitor} improved to {value:.6g}."
        else:
            self.wait_count += 1
            if self.wait_count < self.patience:
                return False, None
            code = EarlyStoppingReason.PATIENCE_EXHAUSTED
            reason = (
                f"Monitored metric {self.monitor} did not improve in the last "
                f"{self.wait_count} checks. Best score: {float(self.best_score):.6g}. "
                "Stopping training."
            )
        self.stopping_reason_code = code
        return True, reason

    def _info(self, trainer: Trainer, message: str) -> None:
        if not self.verbose:
            return
        world_size = getattr(trainer, "world_size", 1)
        if world_size > 1 and not self.log_rank_zero_only:
            print(f"[rank: {getattr(trainer, 'global_rank', 0)}] {message}", flush=True)
        elif trainer.is_global_zero:
            print(message, flush=True)

    def _missing(self, trainer: Trainer) -> None:
        available = sorted(trainer.callback_metrics)
        hint = did_you_mean(self.monitor, available)
        listing = ", ".join(repr(name) for name in available) or "none"
        when = "each training epoch's end" if self._check_on_train_epoch_end else "validation"
        message = (
            f"Early stopping conditioned on metric `{self.monitor}` which is not available. "
            f"EarlyStopping could not find the monitored metric {self.monitor!r} in "
            f"trainer.callback_metrics at {when}.{hint} Available metrics: {listing}. Log it "
            f"with self.log({self.monitor!r}, value) in your Module before then, or fix the "
            "monitor name."
        )
        if sum(getattr(trainer, "num_val_batches", ())) == 0:
            message += (
                " This run has no validation batches, so no validation metric appears: give "
                "the Trainer validation data, or monitor a metric that training logs."
            )
        if self.strict:
            raise RuntimeError(message + " Pass strict=False to skip checks when it is missing.")
        if not self._warned_missing:
            self._warned_missing = True
            warnings.warn(
                message + " Skipping the check (strict=False).", MetricMissingWarning, stacklevel=2
            )
