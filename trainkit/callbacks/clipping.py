"""GradientClipping: clip gradients right before the optimizer steps."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from trainkit.callbacks.base import Callback

if TYPE_CHECKING:
    from trainkit.callbacks.slots import StepSlots
    from trainkit.core.module import Module


class GradientClipping(Callback):
    """Clip gradients by total norm or by value, only on steps where the optimizer steps.

    The step clips right after the ``on_before_optimizer_step`` hooks (which see
    the gradients before clipping, as in Lightning), after mixed precision has
    unscaled them, so the threshold is in the units of the real gradients, and
    after all accumulated micro-batches.

    Args:
        max_norm: clip the total gradient norm to this (``clip_grad_norm_``).
        max_value: clip each gradient element to ``[-max_value, max_value]``.
        norm_type: the p of the p-norm for ``max_norm`` (``inf`` for the max norm).
        log_grad_norm: log the total norm *before* clipping as ``grad_norm``.

    Example:
        >>> clip = GradientClipping(max_norm=1.0, log_grad_norm=True)
    """

    def __init__(
        self,
        max_norm: float | None = None,
        max_value: float | None = None,
        norm_type: float = 2.0,
        log_grad_norm: bool = False,
    ) -> None:
        if (max_norm is None) == (max_value is None):
            raise ValueError("GradientClipping needs exactly one of max_norm and max_value.")
        for name, value in (("max_norm", max_norm), ("max_value", max_value)):
            if value is not None and not value > 0:
                raise ValueError(f"GradientClipping({name}={value!r}) must be positive.")
        if log_grad_norm and max_norm is None:
            raise ValueError("log_grad_norm needs max_norm (the norm is what it logs).")
        self.max_norm = max_norm
        self.max_value = max_value
        self.norm_type = float(norm_type)
        self.log_grad_norm = log_grad_norm

    def configure_step(self, slots: StepSlots) -> None:
        """Fill the step's clipping slot."""
        slots.set_clipping(self)

    @property
    def by_norm(self) -> bool:
        """Whether this clips the total norm (rather than each value)."""
        return self.max_norm is not None

    @property
    def gradient_clip_val(self) -> float:
        """The threshold, as ``Trainer(gradient_clip_val=...)`` names it."""
        threshold = self.max_norm if self.max_norm is not None else self.max_value
        assert threshold is not None  # the constructor demands one of them
        return threshold

    @property
    def gradient_clip_algorithm(self) -> str:
        """``"norm"`` or ``"value"``, as ``Trainer(gradient_clip_algorithm=...)`` names it."""
        return "norm" if self.by_norm else "value"

    def clip(self, optimizer: torch.optim.Optimizer, module: Module) -> None:
        """Clip the gradients of ``optimizer``'s parameters (logging the norm if asked).

        Args:
            optimizer: the optimizer about to step.
            module: the user's Module (logs ``grad_norm``).
        """
        parameters = [p for group in optimizer.param_groups for p in group["params"]]
        if self.max_value is not None:
            torch.nn.utils.clip_grad_value_(parameters, self.max_value)
            return
        assert self.max_norm is not None
        total = torch.nn.utils.clip_grad_norm_(parameters, self.max_norm, self.norm_type)
        if self.log_grad_norm:
            module.log("grad_norm", total)
