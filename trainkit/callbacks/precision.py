"""MixedPrecision: autocast, a gradient scaler for float16, or a model cast to bfloat16."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.base import Callback

if TYPE_CHECKING:
    from trainkit.module import Module
    from trainkit.trainer import Trainer

#: Accepted spellings, mapped to the canonical name.
PRECISIONS = {
    "32-true": "32-true",
    "32": "32-true",
    32: "32-true",
    "bf16-mixed": "bf16-mixed",
    "bf16": "bf16-mixed",
    "16-mixed": "16-mixed",
    "16": "16-mixed",
    16: "16-mixed",
    "bf16-true": "bf16-true",
}


def canonical_precision(precision: str | int) -> str:
    """The canonical name of a precision setting, or a clear error.

    Args:
        precision: e.g. "bf16-mixed", "16-mixed", "bf16-true", "32-true" (or 16, 32, "bf16").
    """
    try:
        return PRECISIONS[precision]
    except (KeyError, TypeError):
        raise ValueError(
            f"precision={precision!r} is not supported; use one of 'bf16-mixed', "
            "'16-mixed', 'bf16-true' or '32-true'."
        ) from None


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
        self._update_pending = False

    @property
    def state_key(self) -> str:
        return "MixedPrecision"

    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Create the scaler and, for "bf16-true", cast the model."""
        self._device_type = trainer.strategy.root_device.type
        if self.precision == "bf16-true":
            module.to(torch.bfloat16)
        if self.precision == "16-mixed" and stage == "fit" and self.scaler is None:
            self.scaler = torch.amp.GradScaler(self._device_type)
            if self._saved_scaler_state is not None:
                self.scaler.load_state_dict(self._saved_scaler_state)

    def forward_context(
        self, trainer: Trainer, module: Module
    ) -> AbstractContextManager[Any] | None:
        if self.dtype is None:
            return None
        return torch.autocast(device_type=self._device_type, dtype=self.dtype)

    def scale_loss(self, trainer: Trainer, module: Module, loss: torch.Tensor) -> torch.Tensor:
        return self.scaler.scale(loss) if self.scaler is not None else loss

    def prepare_optimizer_step(
        self, trainer: Trainer, module: Module, optimizer: torch.optim.Optimizer
    ) -> None:
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)
            self._update_pending = True

    def optimizer_step(
        self, trainer: Trainer, module: Module, optimizer: torch.optim.Optimizer
    ) -> bool:
        if self.scaler is None:
            return False
        # Skips the step when the unscaled gradients hold inf/NaN, then adapts the scale.
        self.scaler.step(optimizer)
        self.scaler.update()
        self._update_pending = False
        return True

    def on_before_zero_grad(
        self, trainer: Trainer, module: Module, optimizer: torch.optim.Optimizer
    ) -> None:
        # Another callback may have skipped the step (NonFiniteLoss("skip")); the
        # scaler still needs its update after unscale_, or the next unscale_ fails.
        if self.scaler is not None and self._update_pending:
            self.scaler.update()
            self._update_pending = False

    def state_dict(self) -> dict[str, Any]:
        return {"scaler": self.scaler.state_dict() if self.scaler is not None else None}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        saved = state_dict.get("scaler")
        if saved:
            if self.scaler is not None:
                self.scaler.load_state_dict(saved)
            else:
                self._saved_scaler_state = saved
