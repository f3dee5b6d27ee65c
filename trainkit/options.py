"""The Trainer's loop options, grouped and checked in one place.

``Trainer(max_epochs=..., limit_val_batches=...)`` keeps Lightning's flat
spelling; the values land here, in a small frozen dataclass whose
``__post_init__`` rejects bad values before anything runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

# When neither max_epochs nor max_steps is given, training stops after this many
# epochs rather than running forever.
DEFAULT_MAX_EPOCHS = 1000


@dataclass(frozen=True)
class LoopOptions:
    """How long to train, how much data to use, and when to validate and log.

    Attributes:
        max_epochs: stop after this many epochs. None: no epoch limit when
            ``max_steps`` is set, else 1000.
        max_steps: stop after this many optimizer steps (-1: no step limit).
        limit_train_batches: batches per training epoch: an int, or a float
            fraction of the dataloader.
        limit_val_batches: likewise for each validation dataloader (0 disables validation).
        limit_test_batches: likewise for test dataloaders.
        limit_predict_batches: likewise for prediction dataloaders.
        val_check_interval: validate every this many training batches (int), or
            this fraction of an epoch (float; 1.0 = at the end of each epoch).
        check_val_every_n_epoch: validate in every n-th epoch; None counts an int
            ``val_check_interval`` across epochs.
        num_sanity_val_steps: validation batches run before training to catch
            bugs early (-1: all of them, 0: none).
        log_every_n_steps: write step metrics to the loggers every n optimizer steps.
    """

    max_epochs: int | None = None
    max_steps: int = -1
    limit_train_batches: int | float = 1.0
    limit_val_batches: int | float = 1.0
    limit_test_batches: int | float = 1.0
    limit_predict_batches: int | float = 1.0
    val_check_interval: int | float = 1.0
    check_val_every_n_epoch: int | None = 1
    num_sanity_val_steps: int = 2
    log_every_n_steps: int = 50

    def __post_init__(self) -> None:
        if self.max_epochs is not None:
            _check_int("max_epochs", self.max_epochs, minimum=0, hint="or None for no limit")
        _check_int("max_steps", self.max_steps, minimum=-1, hint="(-1 for no limit)")
        for name in (
            "limit_train_batches",
            "limit_val_batches",
            "limit_test_batches",
            "limit_predict_batches",
        ):
            _check_limit(name, getattr(self, name))
        interval = self.val_check_interval
        if isinstance(interval, bool) or not isinstance(interval, (int, float)):
            raise TypeError(f"val_check_interval must be an int or a float, got {interval!r}.")
        if isinstance(interval, int) and interval < 1:
            raise ValueError(
                f"val_check_interval={interval} must be a positive number of batches, or a "
                "float fraction of an epoch in (0, 1]."
            )
        if isinstance(interval, float) and not 0.0 < interval <= 1.0:
            raise ValueError(
                f"val_check_interval={interval} must be a fraction in (0, 1] (or an int "
                "number of batches)."
            )
        if self.check_val_every_n_epoch is not None:
            _check_int(
                "check_val_every_n_epoch", self.check_val_every_n_epoch, minimum=1, hint="or None"
            )
        _check_int(
            "num_sanity_val_steps",
            self.num_sanity_val_steps,
            minimum=-1,
            hint="(-1 for all validation batches)",
        )
        _check_int("log_every_n_steps", self.log_every_n_steps, minimum=1, hint="")

    @property
    def resolved_max_epochs(self) -> float:
        """The epoch limit in force (``inf`` when only ``max_steps`` limits training)."""
        if self.max_epochs is not None:
            return float(self.max_epochs)
        return math.inf if self.max_steps != -1 else float(DEFAULT_MAX_EPOCHS)

    def for_fast_dev_run(self, batches: int) -> LoopOptions:
        """These options cut down to ``batches`` batches of every stage, one epoch.

        Args:
            batches: batches per stage.
        """
        return replace(
            self,
            max_epochs=1,
            max_steps=batches,
            limit_train_batches=batches,
            limit_val_batches=batches,
            limit_test_batches=batches,
            limit_predict_batches=batches,
            val_check_interval=1.0,
            check_val_every_n_epoch=1,
            num_sanity_val_steps=0,
            log_every_n_steps=1,
        )


def _check_int(name: str, value: object, *, minimum: int, hint: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {value!r}.")
    if value < minimum:
        raise ValueError(
            f"{name}={value} is invalid: it must be >= {minimum} {hint}".rstrip() + "."
        )


def _check_limit(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be an int (batches) or a float (fraction), got {value!r}.")
    if isinstance(value, int) and value < 0:
        raise ValueError(f"{name}={value} must be >= 0 (0 skips the stage).")
    if isinstance(value, float) and not 0.0 <= value <= 1.0:
        raise ValueError(
            f"{name}={value} is a fraction and must be in [0.0, 1.0]; pass an int for a "
            "number of batches."
        )
