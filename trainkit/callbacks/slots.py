"""The training step's slots: what the step-shaping callbacks contribute.

The optimization step (``trainkit/loops/step.py``) has one fixed order: forward
context, loss scaling, backward, unscale, clip, non-finite check, optimizer
step, zero_grad. Four parts of it are configurable, each through one typed slot
that holds at most one contributor:

``precision``
    autocast around the step methods and, for float16, a gradient scaler
    (:class:`~trainkit.callbacks.MixedPrecision`).
``clipping``
    clips gradients after the ``on_before_optimizer_step`` hooks
    (:class:`~trainkit.callbacks.GradientClipping`).
``accumulation``
    how many micro-batches each optimizer step takes, per epoch
    (:class:`~trainkit.callbacks.GradientAccumulation`).
``nonfinite``
    watches the loss for NaN and infinity, and may veto a step
    (:class:`~trainkit.callbacks.NonFiniteLoss`).

A callback declares its contribution in ``Callback.configure_step(slots)``; the
Trainer collects the slots once, when it is built. Strategies that cannot honour
a contribution ask the slots what the step does (:attr:`StepSlots.scales_loss`,
:attr:`StepSlots.accumulates`, :attr:`StepSlots.clips_by_norm`), never which
callbacks are present.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch

if TYPE_CHECKING:
    from trainkit.core.module import Module

# The Trainer argument that is shorthand for each slot's callback.
_ARGUMENTS = {
    "precision": "precision",
    "clipping": "gradient_clip_val",
    "accumulation": "accumulate_grad_batches",
    "nonfinite": "",
}


class PrecisionPart(Protocol):
    """Mixed precision: a context around the step methods, and a float16 gradient scaler."""

    @property
    def scales_loss(self) -> bool:
        """Whether the loss is scaled before backward (float16 with a gradient scaler)."""

    @property
    def scaler(self) -> torch.amp.GradScaler | None:
        """The gradient scaler while fit runs with float16, else None."""

    def forward_context(self) -> AbstractContextManager[Any] | None:
        """A context entered around each step method (autocast), or None."""

    @property
    def converts_input(self) -> bool:
        """Whether each batch goes through :meth:`convert_input` before its transfer."""

    def convert_input(self, batch: Any) -> Any:
        """The batch in the dtypes the precision computes in."""


class ClippingPart(Protocol):
    """Gradient clipping, applied after the ``on_before_optimizer_step`` hooks."""

    @property
    def by_norm(self) -> bool:
        """Whether it clips the total norm (which must see every gradient) rather than values."""

    def clip(self, optimizer: torch.optim.Optimizer, module: Module) -> None:
        """Clip the gradients of ``optimizer``'s parameters in place."""


def clip_settings(part: ClippingPart | None) -> tuple[float | None, str]:
    """``(gradient_clip_val, gradient_clip_algorithm)`` of the step's clipping slot.

    What the Module's ``configure_gradient_clipping`` hook and ``clip_gradients``
    receive, and what ``trainer.gradient_clip_val`` reports, whichever way the
    clipping was asked for (the Trainer's arguments or a GradientClipping
    callback): ``(None, "norm")`` without clipping, as Lightning's defaults. A
    contributor of its own that names no threshold counts as ``(None, "norm")``.

    Args:
        part: the clipping slot's contributor, or None.

    Example:
        >>> from trainkit.callbacks import GradientClipping
        >>> clip_settings(GradientClipping(max_value=0.5)), clip_settings(None)
        ((0.5, 'value'), (None, 'norm'))
    """
    value = getattr(part, "gradient_clip_val", None)
    algorithm = getattr(part, "gradient_clip_algorithm", None) if value is not None else None
    return value, algorithm or "norm"


class AccumulationPart(Protocol):
    """Gradient accumulation: micro-batches per optimizer step, by epoch."""

    def batches_for_epoch(self, epoch: int) -> int:
        """k, the micro-batches per optimizer step in ``epoch``."""

    @property
    def accumulates(self) -> bool:
        """Whether any epoch takes more than one micro-batch per step."""


class NonFinitePart(Protocol):
    """Watches the training loss for NaN and infinity."""

    @property
    def vetoes_steps(self) -> bool:
        """Whether it decides before each step (skipping non-finite windows)."""

    def observe(self, loss: torch.Tensor, global_step: int) -> None:
        """See each loss before backward (may raise, or remember the window is not finite)."""

    def allow_step(self, global_step: int) -> bool:
        """Whether the optimizer may step (only asked when :attr:`vetoes_steps`)."""

    def end_window(self) -> None:
        """The gradients were cleared: a new accumulation window starts."""


@dataclass
class StepSlots:
    """The step's configurable parts; each slot holds at most one contributor."""

    precision: PrecisionPart | None = None
    clipping: ClippingPart | None = None
    accumulation: AccumulationPart | None = None
    nonfinite: NonFinitePart | None = None

    def set_precision(self, part: PrecisionPart) -> None:
        """Fill the precision slot.

        Args:
            part: the contributor.
        """
        self._check_free("precision", self.precision, part)
        self.precision = part

    def set_clipping(self, part: ClippingPart) -> None:
        """Fill the clipping slot.

        Args:
            part: the contributor.
        """
        self._check_free("clipping", self.clipping, part)
        self.clipping = part

    def set_accumulation(self, part: AccumulationPart) -> None:
        """Fill the accumulation slot.

        Args:
            part: the contributor.
        """
        self._check_free("accumulation", self.accumulation, part)
        self.accumulation = part

    def set_nonfinite(self, part: NonFinitePart) -> None:
        """Fill the non-finite loss slot.

        Args:
            part: the contributor.
        """
        self._check_free("nonfinite", self.nonfinite, part)
        self.nonfinite = part

    @staticmethod
    def _check_free(slot: str, taken: object, part: object) -> None:
        if taken is None:
            return
        new, old = type(part).__name__, type(taken).__name__
        argument = _ARGUMENTS[slot]
        via = f" (through the Trainer's {argument}= argument and/or in callbacks)"
        if new == old:
            raise ValueError(f"{new} is given twice{via if argument else ''}; use one.")
        raise ValueError(
            f"The training step's {slot} slot is filled twice, by {old} and by {new}; "
            "keep one of them."
        )

    # ------------------------------------------ what strategies ask the step
    @property
    def scales_loss(self) -> bool:
        """Whether the loss is scaled before backward (float16 mixed precision)."""
        return self.precision is not None and self.precision.scales_loss

    @property
    def accumulates(self) -> bool:
        """Whether optimizer steps take more than one micro-batch."""
        return self.accumulation is not None and self.accumulation.accumulates

    @property
    def clips_by_norm(self) -> bool:
        """Whether gradients are clipped by their total norm (which must see every gradient)."""
        return self.clipping is not None and self.clipping.by_norm

    def steps_in_epoch(self, batches: float, epoch: int) -> float:
        """Optimizer steps an epoch of ``batches`` batches takes (``inf`` when unknown).

        Args:
            batches: batches in the epoch.
            epoch: the epoch, counted from 0.

        Example:
            >>> StepSlots().steps_in_epoch(10, 0)
            10
        """
        if self.accumulation is None or batches == math.inf:
            return batches
        return math.ceil(batches / self.accumulation.batches_for_epoch(epoch))
