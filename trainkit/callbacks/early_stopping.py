"""EarlyStopping: stop training when a monitored metric stops improving.

Each check reads one value from ``trainer.callback_metrics`` (one host sync per
validation run, never per step). Ranks must agree on stopping, or one rank would
leave the others waiting in a collective (promise 5 in DESIGN.md): metrics logged
with ``sync_dist=True`` are the same on every rank, and the loop also combines
``should_stop`` across ranks at the end of each epoch.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

from trainkit.callbacks.base import Callback
from trainkit.messages import did_you_mean

if TYPE_CHECKING:
    from trainkit.module import Module
    from trainkit.trainer import Trainer

_MODES = ("min", "max")


class EarlyStopping(Callback):
    """Stop training after ``patience`` checks without improvement of ``monitor``.

    Args:
        monitor: name of the logged metric to watch, as passed to ``self.log``.
        mode: "min" when lower is better (a loss), "max" when higher is better.
        patience: checks without improvement tolerated before stopping.
        min_delta: the least change that counts as an improvement.
        check_on_train_epoch_end: check at the end of each training epoch (for a
            training metric) instead of after each validation run. None checks
            after validation.
        strict: raise when ``monitor`` is missing from the logged metrics; when
            False, warn once and skip the check.
        verbose: print improvements and the reason for stopping (rank 0).

    Attributes:
        wait_count: checks since the last improvement.
        best_score: the best value seen so far (+inf / -inf before the first).
        stopped_epoch: the epoch in which training was stopped, or None.
        stopping_reason: why training was stopped, or None.

    Example:
        >>> stopper = EarlyStopping(monitor="val/loss", mode="min", patience=5)
        >>> stopper.state_key
        "EarlyStopping{'monitor': 'val/loss', 'mode': 'min'}"
    """

    def __init__(
        self,
        monitor: str,
        mode: str = "min",
        patience: int = 3,
        min_delta: float = 0.0,
        check_on_train_epoch_end: bool | None = None,
        strict: bool = True,
        verbose: bool = False,
    ) -> None:
        if mode not in _MODES:
            raise ValueError(
                f"EarlyStopping(mode={mode!r}) is not supported; use 'min' (lower is "
                "better, e.g. a loss) or 'max' (higher is better, e.g. accuracy)."
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
        self.strict = strict
        self.verbose = verbose

        self.wait_count = 0
        self.best_score = math.inf if mode == "min" else -math.inf
        self.stopped_epoch: int | None = None
        self.stopping_reason: str | None = None
        self._fitting = True
        self._warned_missing = False
        self._warned_no_validation = False

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
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the counters saved by :meth:`state_dict`.

        Args:
            state_dict: what :meth:`state_dict` returned when the checkpoint was saved.
        """
        self.wait_count = int(state_dict["wait_count"])
        self.best_score = float(state_dict["best_score"])
        stopped = state_dict["stopped_epoch"]
        self.stopped_epoch = None if stopped is None else int(stopped)
        self.patience = int(state_dict["patience"])

    # ---------------------------------------------------------------- hooks
    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Remember whether this run trains: a stand-alone validate must not count."""
        self._fitting = stage == "fit"

    def on_validation_end(self, trainer: Trainer, module: Module) -> None:
        """Check after each real validation run (not the sanity check)."""
        if self.check_on_train_epoch_end or trainer.sanity_checking or not self._fitting:
            return
        self._check(trainer)

    def on_train_epoch_end(self, trainer: Trainer, module: Module) -> None:
        """Check here when ``check_on_train_epoch_end`` is True."""
        if self.check_on_train_epoch_end:
            self._check(trainer)
        elif (
            self.check_on_train_epoch_end is None
            and not self._warned_no_validation
            and sum(trainer.num_val_batches) == 0
        ):
            self._warned_no_validation = True
            warnings.warn(
                f"EarlyStopping(monitor={self.monitor!r}) checks after validation, "
                "but this run has no validation batches, so it never stops training. "
                "Give the Trainer validation data, or pass "
                "check_on_train_epoch_end=True to watch a training metric.",
                stacklevel=2,
            )

    # ---------------------------------------------------------------- logic
    def _improved(self, current: float) -> bool:
        if self.mode == "min":
            return current < self.best_score - self.min_delta
        return current > self.best_score + self.min_delta

    def _check(self, trainer: Trainer) -> None:
        value = trainer.callback_metrics.get(self.monitor)
        if value is None:
            self._missing(trainer)
            return
        current = float(value)
        if not math.isfinite(current):
            self._stop(
                trainer,
                f"Monitored metric {self.monitor} = {current} is not finite. "
                f"Previous best score: {self.best_score:.6g}. Stopping training.",
            )
            return
        if self._improved(current):
            if self.verbose and trainer.is_global_zero:
                print(f"EarlyStopping: {self.monitor} improved to {current:.6g}.", flush=True)
            self.best_score = current
            self.wait_count = 0
            return
        self.wait_count += 1
        if self.wait_count >= self.patience:
            self._stop(
                trainer,
                f"Monitored metric {self.monitor} did not improve in the last "
                f"{self.wait_count} checks. Best score: {self.best_score:.6g}. "
                "Stopping training.",
            )

    def _stop(self, trainer: Trainer, reason: str) -> None:
        trainer.should_stop = True
        self.stopped_epoch = trainer.current_epoch
        self.stopping_reason = reason
        if self.verbose and trainer.is_global_zero:
            print(f"EarlyStopping: {reason}", flush=True)

    def _missing(self, trainer: Trainer) -> None:
        available = sorted(trainer.callback_metrics)
        hint = did_you_mean(self.monitor, available)
        listing = ", ".join(repr(name) for name in available) or "none"
        message = (
            f"EarlyStopping could not find the monitored metric {self.monitor!r} in "
            f"trainer.callback_metrics.{hint} Available metrics: {listing}. Log it with "
            f"self.log({self.monitor!r}, value) in your Module (in validation_step for a "
            "check after validation), or fix the monitor name."
        )
        if self.strict:
            raise RuntimeError(message + " Pass strict=False to skip checks when it is missing.")
        if not self._warned_missing:
            self._warned_missing = True
            warnings.warn(message + " Skipping the check (strict=False).", stacklevel=2)
