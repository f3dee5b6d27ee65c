"""GradientAccumulation: step the optimizer every k batches, as one batch k times larger."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from trainkit.callbacks.base import Callback
from trainkit.trainer.options import accumulation_schedule

if TYPE_CHECKING:
    from trainkit.callbacks.slots import StepSlots


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
        self.schedule = accumulation_schedule(accumulate_grad_batches)

    def configure_step(self, slots: StepSlots) -> None:
        """Fill the step's accumulation slot."""
        slots.set_accumulation(self)

    @property
    def accumulates(self) -> bool:
        """Whether any epoch takes more than one micro-batch per optimizer step."""
        return max(self.schedule.values()) > 1

    def batches_for_epoch(self, epoch: int) -> int:
        """k in effect during ``epoch``.

        Args:
            epoch: the epoch, counted from 0.
        """
        return next(k for first, k in reversed(self.schedule.items()) if first <= epoch)

    def state_dict(self) -> dict[str, object]:
        return {"schedule": dict(self.schedule)}


class GradientAccumulationScheduler(GradientAccumulation):
    """Lightning's name for an accumulation schedule: ``{first_epoch: k}``.

    The same mechanism as :class:`GradientAccumulation` (and as
    ``Trainer(accumulate_grad_batches={...})``): it fills the step's accumulation
    slot, and its schedule is saved in checkpoints. Epochs before the first key
    take one batch per step, as in Lightning (``{4: 2}``: from the fifth epoch on,
    two batches per optimizer step).

    Args:
        scheduling: first epoch (counted from 0) -> batches per optimizer step.

    Example:
        >>> scheduler = GradientAccumulationScheduler(scheduling={4: 2, 8: 4})
        >>> [scheduler.get_accumulate_grad_batches(epoch) for epoch in (0, 4, 9)]
        [1, 2, 4]
    """

    def __init__(self, scheduling: dict[int, int]) -> None:
        if not isinstance(scheduling, Mapping) or not scheduling:
            raise TypeError(
                f"GradientAccumulationScheduler(scheduling={scheduling!r}) needs a non-empty "
                "dict {first_epoch: batches per step}, e.g. {0: 1, 4: 2}."
            )
        self.scheduling = dict(scheduling)
        super().__init__({0: 1, **self.scheduling})

    def going_to_accumulate_grad_batches(self) -> bool:
        """Whether any epoch takes more than one batch per optimizer step."""
        return self.accumulates

    def get_accumulate_grad_batches(self, epoch: int) -> int:
        """The batches per optimizer step in ``epoch``.

        Args:
            epoch: the epoch, counted from 0.
        """
        return self.batches_for_epoch(epoch)
