"""Lightning's ``lightning.pytorch.utilities.grads`` names, served by trainkit."""

from __future__ import annotations

from trainkit.utilities.gradients import grad_norm

__all__ = ["grad_norm"]
