"""Timer: time the train, validate and test stages, and stop training after a duration.

The clock is ``time.monotonic`` (never moved by the wall clock being set). The
training time is carried in checkpoints: a resumed run counts the time before
the interruption, so ``Timer(duration="00:12:00:00")`` stops after twelve hours
of training in all, as Lightning's does.
"""

from __future__ import annotations

import re
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from trainkit.callbacks.base import Callback
from trainkit.utilities.rank_zero import rank_zero_print

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

#: The stages a Timer tracks, as Lightning's ``RunningStage`` names them.
_STAGES = ("train", "sanity_check", "validate", "test", "predict")
_DURATION = re.compile(r"(\d+):(\d\d):(\d\d):(\d\d)")


def _seconds(duration: str | timedelta | dict[str, int] | None) -> float | None:
    if duration is None:
        return None
    if isinstance(duration, str):
        match = _DURATION.fullmatch(duration.strip())
        if match is None:
            raise ValueError(
                f"Timer(duration={duration!r}) is not a valid duration: expected a string "
                "in the format DD:HH:MM:SS (days, hours, minutes, seconds), e.g. "
                "'00:12:00:00' for twelve hours; or pass a datetime.timedelta or a dict "
                "such as {'hours': 12}."
            )
        days, hours, minutes, seconds = (int(part) for part in match.groups())
        duration = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    elif isinstance(duration, dict):
        try:
            duration = timedelta(**duration)
        except TypeError as error:
            raise ValueError(
                f"Timer(duration={duration!r}): the dict's keys must be datetime.timedelta's "
                f"arguments (weeks, days, hours, minutes, seconds, ...): {error}."
            ) from None
    if not isinstance(duration, timedelta):
        raise TypeError(
            f"Timer(duration=...) takes a 'DD:HH:MM:SS' string, a datetime.timedelta or a "
            f"dict of timedelta's arguments, not {type(duration).__name__}."
        )
    return duration.total_seconds()


def _stage(stage: str) -> str:
    if stage not in _STAGES:
        raise ValueError(f"Timer: unknown stage {stage!r}; use one of {', '.join(_STAGES)}.")
    return stage


class Timer(Callback):
    """Track the time spent in each stage, and stop training once ``duration`` has passed.

    Args:
        duration: the training time allowed: a ``"DD:HH:MM:SS"`` string, a
            ``datetime.timedelta``, or a dict of ``timedelta``'s arguments
            (``{"hours": 1}``). None only measures.
        interval: when the time is checked and training stopped: ``"step"``
            (after each training batch) or ``"epoch"`` (after each training epoch).
        verbose: print a line when the time is up.

    Raises:
        ValueError: a duration string not in the ``DD:HH:MM:SS`` format, or an
            ``interval`` other than "step" or "epoch".

    Example:
        >>> from datetime import timedelta
        >>> Timer(duration="01:12:00:00").time_remaining()
        129600.0
        >>> Timer(duration=timedelta(minutes=5)).time_remaining()
        300.0
        >>> Timer(duration={"hours": 1}, interval="epoch").time_elapsed("train")
        0.0
    """

    def __init__(
        self,
        duration: str | timedelta | dict[str, int] | None = None,
        interval: str = "step",
        verbose: bool = True,
    ) -> None:
        if interval not in ("step", "epoch"):
            raise ValueError(
                f"Timer(interval={interval!r}) is not supported; use 'step' (check after "
                "each training batch) or 'epoch' (after each training epoch)."
            )
        self._duration = _seconds(duration)
        self._interval = interval
        self._verbose = verbose
        self._start_time: dict[str, float | None] = dict.fromkeys(_STAGES)
        self._end_time: dict[str, float | None] = dict.fromkeys(_STAGES)
        # The training time of the runs before a resume (from the checkpoint).
        self._offset = 0.0

    # ------------------------------------------------------------------ queries
    def start_time(self, stage: str = "train") -> float | None:
        """When ``stage`` last started (``time.monotonic()`` seconds), or None.

        Args:
            stage: "train", "sanity_check", "validate", "test" or "predict".
        """
        return self._start_time[_stage(stage)]

    def end_time(self, stage: str = "train") -> float | None:
        """When ``stage`` last ended (``time.monotonic()`` seconds), or None while it runs.

        Args:
            stage: "train", "sanity_check", "validate", "test" or "predict".
        """
        return self._end_time[_stage(stage)]

    def time_elapsed(self, stage: str = "train") -> float:
        """Seconds spent in ``stage``'s latest run; for "train", plus the runs before a resume.

        Args:
            stage: "train", "sanity_check", "validate", "test" or "predict".
        """
        start, end = self.start_time(stage), self.end_time(stage)
        offset = self._offset if stage == "train" else 0.0
        if start is None:
            return offset
        return (time.monotonic() if end is None else end) - start + offset

    def time_remaining(self, stage: str = "train") -> float | None:
        """Seconds left of ``duration`` (negative once past it); None without a duration.

        Args:
            stage: "train", "sanity_check", "validate", "test" or "predict".
        """
        if self._duration is None:
            return None
        return self._duration - self.time_elapsed(stage)

    # -------------------------------------------------------------------- hooks
    def uses_hook(self, name: str) -> bool:
        """Only the interval's check runs per batch, and only with a duration."""
        if name == "on_train_batch_end":
            return self._duration is not None and self._interval == "step"
        return True

    def _started(self, stage: str) -> None:
        self._start_time[stage] = time.monotonic()
        self._end_time[stage] = None

    def _ended(self, stage: str) -> None:
        self._end_time[stage] = time.monotonic()

    def on_fit_start(self, trainer: Trainer, *_: Any) -> None:
        """A resumed run whose time is already up stops before training."""
        self._check(trainer)

    def on_train_start(self, trainer: Trainer, module: Module) -> None:
        """Start the training clock."""
        self._started("train")

    def on_train_end(self, trainer: Trainer, module: Module) -> None:
        """Stop the training clock."""
        self._ended("train")

    def on_validation_start(self, trainer: Trainer, module: Module) -> None:
        """Start the validation (or sanity check) clock."""
        self._started("sanity_check" if trainer.sanity_checking else "validate")

    def on_validation_end(self, trainer: Trainer, module: Module) -> None:
        """Stop the validation (or sanity check) clock."""
        self._ended("sanity_check" if trainer.sanity_checking else "validate")

    def on_test_start(self, trainer: Trainer, module: Module) -> None:
        """Start the test clock."""
        self._started("test")

    def on_test_end(self, trainer: Trainer, module: Module) -> None:
        """Stop the test clock."""
        self._ended("test")

    def on_predict_start(self, trainer: Trainer, module: Module) -> None:
        """Start the predict clock."""
        self._started("predict")

    def on_predict_end(self, trainer: Trainer, module: Module) -> None:
        """Stop the predict clock."""
        self._ended("predict")

    def on_train_batch_end(self, trainer: Trainer, *_: Any) -> None:
        """With ``interval="step"``: stop training once the time is up."""
        self._check(trainer)

    def on_train_epoch_end(self, trainer: Trainer, *_: Any) -> None:
        """With ``interval="epoch"``: stop training once the time is up."""
        if self._interval == "epoch":
            self._check(trainer)

    def _check(self, trainer: Trainer) -> None:
        if self._duration is None:
            return
        up = self.time_elapsed("train") >= self._duration
        # Rank 0's clock decides for every process, so that all stop at the same batch.
        up = bool(trainer.strategy.broadcast(up))
        if not up:
            return
        trainer.should_stop = True
        if self._verbose:
            elapsed = timedelta(seconds=int(self.time_elapsed("train")))
            rank_zero_print(f"Time limit reached. Elapsed time is {elapsed}. Stopping training.")

    # -------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The time elapsed in each stage so far, under Lightning's key and stage names."""
        return {"time_elapsed": {stage: self.time_elapsed(stage) for stage in _STAGES}}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Carry the saved training time over, so the duration counts all runs together."""
        self._offset = float(state_dict.get("time_elapsed", {}).get("train", 0.0))
