"""MixedPrecision: autocast, a gradient scaler for float16, or a model cast to another dtype."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.base import Callback
from trainkit.core.batches import convert_floating
from trainkit.trainer.options import canonical_precision
from trainkit.utilities.tensor_init import TRUE_DTYPES, default_dtype

if TYPE_CHECKING:
    from trainkit.callbacks.slots import StepSlots
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

__all__ = ["COMPUTE_DTYPES", "MIXED_DTYPES", "MixedPrecision", "canonical_precision"]

#: The autocast precisions and the dtype each computes in.
MIXED_DTYPES = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}
#: Every precision but "32-true" and the dtype its steps compute in.
COMPUTE_DTYPES = {**MIXED_DTYPES, **TRUE_DTYPES}


class MixedPrecision(Callback):
    """Run steps in lower (or higher) precision.

    - ``"bf16-mixed"``: parameters and optimizer state stay float32; the step
      methods run under ``torch.autocast`` with bfloat16 (CPU and CUDA).
    - ``"16-mixed"``: the same with float16, plus a ``GradScaler``: the loss is
      scaled before backward, gradients are unscaled before the
      ``on_before_optimizer_step`` hooks (so clipping sees real gradients), and a
      step whose gradients overflowed is skipped (not an error) while the scale
      adapts. The scaler's state is saved in checkpoints.
    - ``"bf16-true"`` / ``"16-true"``: the model itself is cast to bfloat16 /
      float16 (half the memory; less accurate), and the steps run under autocast
      to that dtype. ``"16-true"`` has no scaler: small gradients may underflow.
    - ``"64-true"``: the model is cast to float64, each batch's floating-point
      tensors are cast to float64 before the batch transfer hooks, and tensors the
      step methods make are float64 by default (no autocast: it has no float64).
    - ``"32-true"``: full float32 (this callback then does nothing).

    ``Trainer(precision=...)`` adds this callback for you.

    Args:
        precision: one of the names above.
        scaler: for "16-mixed", the ``GradScaler`` to use (its initial scale, growth
            interval, ...); None: a default one, made when fit starts.

    Example:
        >>> MixedPrecision("bf16-mixed").dtype
        torch.bfloat16
    """

    def __init__(
        self, precision: str | int = "bf16-mixed", scaler: torch.amp.GradScaler | None = None
    ) -> None:
        self.precision = canonical_precision(precision)
        if scaler is not None and self.precision != "16-mixed":
            raise ValueError(
                f"MixedPrecision({self.precision!r}) scales no loss: only '16-mixed' takes a "
                "scaler; drop scaler=."
            )
        self.dtype: torch.dtype | None = COMPUTE_DTYPES.get(self.precision)
        self.scaler: torch.amp.GradScaler | None = scaler
        self._device_type = "cpu"
        self._saved_scaler_state: dict[str, Any] | None = None
        self._cpu_said = False  # float16 on the CPU is said once

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
        """Autocast to this precision's dtype around each step method (None for 32-true);
        for 64-true, float64 as the default dtype."""
        if self.dtype is None:
            return None
        if self.dtype == torch.float64:
            return default_dtype(self.precision)
        return torch.autocast(device_type=self._device_type, dtype=self.dtype)

    def convert_input(self, batch: Any) -> Any:
        """The batch as the step methods receive it: for 64-true, its floating-point
        tensors in float64 (the others keep their dtype)."""
        return convert_floating(batch, torch.float64)

    @property
    def converts_input(self) -> bool:
        """Whether each batch goes through :meth:`convert_input` (64-true only)."""
        return self.precision == "64-true"

    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Create the scaler and, for a "true" precision, cast the model."""
        self._device_type = trainer.strategy.root_device.type
        if self.precision == "16-mixed" and self._device_type == "cpu" and not self._cpu_said:
            self._cpu_said = True
            trainer.warn(
                "precision='16-mixed' on the CPU: trainkit runs float16 autocast with a "
                "gradient scaler, as asked (Lightning switches to 'bf16-mixed' here), so the "
                "step methods' outputs are float16. Pass precision='bf16-mixed' for bfloat16."
            )
        if self.precision in TRUE_DTYPES:
            module.to(TRUE_DTYPES[self.precision])
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
