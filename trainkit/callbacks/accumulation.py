"""GradientAccumulation: step the optimizer every k batches, as one batch k times larger."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from trainkit.callbacks.base import Callback

if TYPE_CHECKING:
    from trainkit.module import Module
    from trainkit.trainer import Trainer


class GradientAccumulation(Callback):
    """Accumulate gradients over k batches (micro-batches) before each optimizer step.

    The loss of each micro-batch is divided by the number of micro-batches in its
    window, so k micro-batches of size B/k give the gradient of one batch of size
    B. The last window of an epoch may be shorter: it still steps, and its losses
    are divided by its own length. ``global_step`` counts optimizer steps, so
    ``max_steps``, ``log_every_n_steps`` and step-interval LR schedulers count
    windows, not micro-batches. With a data-parallel strategy, gradients are
    synchronised only on the micro-batch that steps.

    Args:
        accumulate_grad_batches: k, or a schedule ``{first_epoch: k, ...}`` (for
            example ``{0: 8, 4: 4}``: 8 until epoch 4, then 4).

    Example:
        >>> GradientAccumulation({0: 4, 10: 1}).batches_for_epoch(12)
        1
    """

    def __init__(self, accumulate_grad_batches: int | dict[int, int]) -> None:
        schedule = (
            {0: accumulate_grad_batches}
            if isinstance(accumulate_grad_batches, int)
            else dict(accumulate_grad_batches)
        )
        if 0 not in schedule:
            raise ValueError(
                f"The accumulation schedule {accumulate_grad_batches!r} must say what to do "
                "from epoch 0; add a 0 key, e.g. {0: 1, 5: 4}."
            )
        for epoch, k in schedule.items():
            if isinstance(k, bool) or not isinstance(k, int) or k < 1 or epoch < 0:
                raise ValueError(
                    f"accumulate_grad_batches must be a positive int (or epoch -> positive int); "
                    f"got {accumulate_grad_batches!r}."
                )
        self.schedule = dict(sorted(schedule.items()))
        self._k = 1
        self._total = math.inf

    def batches_for_epoch(self, epoch: int) -> int:
        """k in effect during ``epoch``.

        Args:
            epoch: the epoch, counted from 0.
        """
        return next(k for first, k in reversed(self.schedule.items()) if first <= epoch)

    def steps_in_epoch(self, batches: float, epoch: int) -> float:
        """Optimizer steps an epoch of ``batches`` batches takes.

        Args:
            batches: batches in the epoch (``inf`` when unknown).
            epoch: the epoch.
        """
        return (
            math.ceil(batches / self.batches_for_epoch(epoch)) if batches != math.inf else batches
        )

    def on_train_epoch_start(self, trainer: Trainer, module: Module) -> None:
        """Fix k and the epoch length for this epoch."""
        self._k = self.batches_for_epoch(trainer.current_epoch)
        self._total = trainer.num_training_batches

    def should_optimizer_step(
        self, trainer: Trainer, module: Module, batch_idx: int, is_last_batch: bool
    ) -> bool:
        return (batch_idx + 1) % self._k == 0 or is_last_batch

    def scale_loss(self, trainer: Trainer, module: Module, loss: torch.Tensor) -> torch.Tensor:
        if self._k == 1:
            return loss
        window_start = trainer.state.batch_idx // self._k * self._k
        window = min(self._k, self._total - window_start)
        return loss / window

    def state_dict(self) -> dict[str, object]:
        return {"schedule": dict(self.schedule)}
