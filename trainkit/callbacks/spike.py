"""SpikeDetection: stop training when the loss jumps far above its recent average.

After ``warmup`` batches, each training batch's loss is compared with the mean of
the last ``window`` losses. A loss that is worse than the previous one (higher
with ``mode="min"``) by at least ``atol`` and by at least ``rtol`` times the mean
is a spike (and so is a non-finite loss, with ``finite_only=True``). Then every
process stops with :class:`TrainingSpikeException`, and global rank 0 writes the
batch indices to skip when resuming (the spike's batch and the one before it, whose
step may have caused it) to ``exclude_batches_path`` (default
``<default_root_dir>/skip_batches.json``), a JSON list that grows with each spike.

Reading the loss costs one host synchronisation per batch (on a GPU the CPU waits
for the step), as Lightning's callback does.
"""

from __future__ import annotations

import json
import math
import os
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import torch

from trainkit.callbacks.base import Callback
from trainkit.utilities.io import atomic_write

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

__all__ = ["SpikeDetection", "TrainingSpikeException"]


class TrainingSpikeException(RuntimeError):
    """Training stopped at a loss spike."""

    def __init__(self, batch_idx: int, *args: Any) -> None:
        super().__init__(f"Training spike detected in batch {batch_idx}", *args)
        self.batch_idx = batch_idx


class SpikeDetection(Callback):
    """Stop training at a loss spike, noting the batches to skip when resuming.

    Args:
        mode: ``"min"`` (a higher loss is worse) or ``"max"``.
        window: how many of the latest losses the reference mean covers.
        warmup: batches of each epoch before spikes are looked for.
        atol: the least absolute distance from the mean that counts (None: any).
        rtol: the least distance from the mean, as a multiple of it, that counts
            (None: any).
        exclude_batches_path: a ``.json`` file, or a folder for ``skip_batches.json``
            (default: the Trainer's ``default_root_dir``).
        finite_only: a non-finite loss is a spike (False: it is left out of the
            mean and not judged).

    Raises:
        ValueError: ``mode`` is neither, or ``window`` is below 1.
    """

    def __init__(
        self,
        mode: Literal["min", "max"] = "min",
        window: int = 10,
        warmup: int = 1,
        atol: float | None = None,
        rtol: float | None = 2.0,
        exclude_batches_path: str | os.PathLike[str] | None = None,
        finite_only: bool = True,
    ) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"SpikeDetection(mode={mode!r}) must be 'min' or 'max'.")
        if window < 1:
            raise ValueError(f"SpikeDetection(window={window}) must be at least 1.")
        self.mode = mode
        self.window = window
        self.warmup = warmup
        self.atol = atol
        self.rtol = rtol
        self.exclude_batches_path = exclude_batches_path
        self.finite_only = finite_only
        self.bad_batches: list[int] = []
        self.last_val: float | None = None
        self._recent: deque[float] = deque(maxlen=window)

    def on_train_batch_end(
        self, trainer: Trainer, module: Module, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        loss = _loss(outputs)
        if loss is None:
            return  # the step was skipped (training_step returned None)
        spike = batch_idx >= self.warmup and self._is_spike(loss)
        if trainer.strategy.reduce_boolean_decision(spike, all=False, point="a loss spike"):
            self._stop(trainer, batch_idx)
        if math.isfinite(loss):
            self._recent.append(loss)
            self.last_val = loss

    def _is_spike(self, loss: float) -> bool:
        if not math.isfinite(loss):
            return self.finite_only
        if not self._recent or self.last_val is None:
            return False
        change = loss - self.last_val
        if (change <= 0) if self.mode == "min" else (change >= 0):
            return False  # not worse than the last batch
        mean = sum(self._recent) / len(self._recent)
        distance = abs(loss - mean)
        far = self.atol is None or distance >= abs(self.atol)
        return far and (self.rtol is None or distance >= abs(self.rtol * mean))

    def _stop(self, trainer: Trainer, batch_idx: int) -> None:
        self.bad_batches.extend([batch_idx - 1, batch_idx])
        if trainer.is_global_zero:
            path = self._path(trainer)
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with atomic_write(path) as file:
                json.dump(self.bad_batches, file, indent=4)
        raise TrainingSpikeException(batch_idx)

    def _path(self, trainer: Trainer) -> str:
        where = os.fspath(self.exclude_batches_path or trainer.default_root_dir)
        return where if where.endswith(".json") else os.path.join(where, "skip_batches.json")

    def state_dict(self) -> dict[str, Any]:
        return {
            "last_val": self.last_val,
            "recent": list(self._recent),
            "bad_batches": list(self.bad_batches),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.last_val = state_dict["last_val"]
        self._recent = deque(state_dict["recent"], maxlen=self.window)
        self.bad_batches = list(state_dict["bad_batches"])


def _loss(outputs: Any) -> float | None:
    if outputs is None or (isinstance(outputs, Mapping) and "loss" not in outputs):
        return None  # a skipped batch ({}), or manual optimization without a loss
    if isinstance(outputs, Mapping):
        outputs = outputs["loss"]
    if not isinstance(outputs, torch.Tensor):
        raise TypeError(
            "SpikeDetection reads the loss training_step returns: a tensor or a dict with "
            f"'loss', not {type(outputs).__name__}."
        )
    return float(outputs.detach().float().mean())
