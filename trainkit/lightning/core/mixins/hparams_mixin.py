"""Lightning's ``lightning.pytorch.core.mixins.hparams_mixin`` path, served by trainkit."""

from __future__ import annotations

from trainkit.core.hyperparameters import HyperparametersMixin

__all__ = ["HyperparametersMixin"]
