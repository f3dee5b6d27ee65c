"""MixedPrecision: autocast, a gradient scaler for float16, or a model cast to bfloat16."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.base import Callback
from trainkit.trainer.options import canonical_precision

if TYPE_CHECKING:
    from trainkit.callbacks.slots import StepSlots
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

__all__ = ["MixedPrecision", "canonical_precision"]


class MixedPrecision(Callback):
    """Run steps in lower precision.

    - ``"bf16-mixed"``: parameters and optimizer state stay float32; the step
      methods run under ``torch.autocast`` with bfloat16 (CPU and CUDA).
    - ``"16-mixed"``: the same with float16, plus a ``GradScaler``: the loss is
      scaled before backward, gradients are unscaled before the
      ``on_before_optimizer_step`` hooks (so clipping sees real gradients), and a
      step whose gradients overflowed is skipped (not an error) while the scale
      adapts. The scaler's state is saved in checkpoints.
    - ``"bf16-true"``: the model itself is cast to bfloat16 (half the memory;
      less accurate), and the steps run under bfloat16 autocast.
    - ``"32-true"``: full float32 (this callback then does nothing).

    ``Trainer(precision=...)`` adds this callback for you.

    Args:
        precision: one of the names above.

    Example:
        >>> MixedPrecision("bf16-mixed").dtype
        torch.bfloat16
    """

    def __init__(self, precision: str | int = "bf16-mixed") -> None:
        self.precision = canonical_precision(precision)
        self.dtype: torch.dtype | None = {
            "bf16-mixed": torch.bfloat16,
            "16-mixed": torch.float16,
            "bf16-true": torch.bfloat16,
        }.get(self.precision)
        self.scaler: torch.amp.GradScaler | None = None
        self._device_type = "cpu"
        self._saved_scaler_state: dict[str, Any] | None = None

    @property
    def state_key(self) -> str:
        return "MixedPrecision"

    def configure_step(self, slots: StepSlots) -> None:
        """Fill the step's precision slot: autocast and, for float16, the scaler."""
        slots.set_precision(self)

    @property
    def scales_loss(self) -> bool:
        """Whether the loss is scaled before backward: float16 ("16-mixed") is."""
        return self.precision == "16-mixed"

    def forward_context(self) -> AbstractContextManager[Any] | None:
        """Autocast to this precision's dtype around each step method (None for 32-true)."""
        if self.dtype is None:
            return None
        return torch.autocast(device_type=self._device_type, dtype=self.dtype)

    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Create the scaler and, for "bf16-true", cast the model."""
        self._device_type = trainer.strategy.root_device.type
        if self.precision == "bf16-true":
            module.to(torch.bfloat16)
        if self.scales_loss and stage == "fit" and self.scaler is None:
            self.scaler = torch.amp.GradScaler(self._device_type)
            if self._saved_scaler_state is not None:
                self.scaler.load_state_dict(self._saved_scaler_state)

    def state_dict(self) -> dict[str, Any]:
        return {"scaler": self.scaler.state_dict() if self.scaler is not None else None}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        saved = state_dict.get("scaler")
        if saved:
            if self.scaler is not None:
                self.scaler.load_state_dict(saved)
            else:
                self._saved_scaler_state = saved
