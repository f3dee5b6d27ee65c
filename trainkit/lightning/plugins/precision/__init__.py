"""Lightning's precision plugins, for ``Trainer(plugins=[...])``.

trainkit sets precision with ``Trainer(precision=...)`` (its ``MixedPrecision``
callback). These plugins say the same in Lightning's words, so a project passing
them runs unchanged: ``Precision()``, ``MixedPrecision(precision, device,
scaler=None)``, ``HalfPrecision(precision)``, ``DoublePrecision()``,
``FSDPPrecision(precision, scaler=None)``. The Trainer takes their precision (and
a float16 plugin's own ``GradScaler``) as if given ``precision=``; giving
``precision=`` too (other than the default) is an error, as in Lightning. A
subclass is refused, saying why: trainkit cannot run its overridden methods in
place of its own. Each also works on its own, as in Lightning
(``convert_module``, ``convert_input``, the init and forward contexts).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import torch
from torch import nn

from trainkit.callbacks.precision import MIXED_DTYPES
from trainkit.core.batches import convert_floating
from trainkit.core.optim import clip_optimizer_gradients
from trainkit.lightning._missing import submodule_or_missing
from trainkit.lightning.plugins._base import Plugin
from trainkit.trainer.options import canonical_precision
from trainkit.utilities.tensor_init import TRUE_DTYPES, default_dtype

__all__ = ["DoublePrecision", "FSDPPrecision", "HalfPrecision", "MixedPrecision", "Precision"]


class Precision(Plugin):
    """Full float32 (``"32-true"``); the base of the precision plugins."""

    precision: str = "32-true"

    def trainkit_plugin_settings(self) -> dict[str, Any]:
        return {"precision": self.precision}

    def _option(self) -> str:
        return f"Trainer(precision={self.precision!r})"

    def convert_module(self, module: nn.Module) -> nn.Module:
        """The module in this precision's parameter dtype (cast in place for a "true" one)."""
        dtype = TRUE_DTYPES.get(self.precision)
        return module.to(dtype) if dtype is not None else module

    def convert_input(self, data: Any) -> Any:
        """``data`` with its floating tensors in a "true" precision's dtype."""
        dtype = TRUE_DTYPES.get(self.precision)
        return convert_floating(data, dtype) if dtype is not None else data

    def tensor_init_context(self) -> AbstractContextManager[Any]:
        """Inside, floating tensors are made in a "true" precision's dtype."""
        return default_dtype(self.precision)

    def module_init_context(self) -> AbstractContextManager[Any]:
        """As :meth:`tensor_init_context`."""
        return self.tensor_init_context()

    def forward_context(self) -> AbstractContextManager[Any]:
        """What the step methods run in: the default dtype of a "true" precision."""
        return default_dtype(self.precision)

    def train_step_context(self) -> AbstractContextManager[Any]:
        """What ``training_step`` runs in (:meth:`forward_context`)."""
        return self.forward_context()

    def val_step_context(self) -> AbstractContextManager[Any]:
        """What ``validation_step`` runs in (:meth:`forward_context`)."""
        return self.forward_context()

    def test_step_context(self) -> AbstractContextManager[Any]:
        """What ``test_step`` runs in (:meth:`forward_context`)."""
        return self.forward_context()

    def predict_step_context(self) -> AbstractContextManager[Any]:
        """What ``predict_step`` runs in (:meth:`forward_context`)."""
        return self.forward_context()

    def unscale_gradients(self, optimizer: Any) -> None:
        """Divide ``optimizer``'s gradients by the loss scale (nothing to do without a scaler)."""
        scaler = getattr(self, "scaler", None)
        if scaler is not None:
            scaler.unscale_(getattr(optimizer, "optimizer", optimizer))

    def clip_gradients(
        self, optimizer: Any, clip_val: float = 0.0, gradient_clip_algorithm: str = "norm"
    ) -> None:
        """Clip the gradients of ``optimizer``'s parameters to ``clip_val`` (0: nothing).

        Args:
            optimizer: a torch optimizer (or Lightning's wrapper of one).
            clip_val: the largest norm ("norm") or absolute value ("value").
            gradient_clip_algorithm: "norm" or "value".
        """
        if clip_val > 0:
            clip_optimizer_gradients(optimizer, clip_val, gradient_clip_algorithm)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(precision={self.precision!r})"


class MixedPrecision(Precision):
    """Autocast: ``"bf16-mixed"``, or ``"16-mixed"`` with a ``GradScaler``.

    Args:
        precision: "16-mixed" or "bf16-mixed".
        device: where autocast runs ("cuda" or "cpu").
        scaler: for "16-mixed", the scaler to use (its initial scale, growth
            interval...); None: a default one.
    """

    def __init__(
        self, precision: str, device: str, scaler: torch.amp.GradScaler | None = None
    ) -> None:
        self.precision = _mixed(precision, scaler, type(self).__name__)
        self.device = device
        self.scaler = scaler

    def trainkit_plugin_settings(self) -> dict[str, Any]:
        return {"precision": self.precision, "scaler": self.scaler}

    def forward_context(self) -> AbstractContextManager[Any]:
        return torch.autocast(self.device, dtype=MIXED_DTYPES[self.precision])


class HalfPrecision(Precision):
    """The model in bfloat16 (``"bf16-true"``) or float16 (``"16-true"``).

    Args:
        precision: "bf16-true" or "16-true".
    """

    def __init__(self, precision: str = "16-true") -> None:
        if precision not in ("bf16-true", "16-true"):
            raise ValueError(
                f"HalfPrecision(precision={precision!r}) takes 'bf16-true' or '16-true'."
            )
        self.precision = precision


class DoublePrecision(Precision):
    """The model and each batch's floating tensors in float64 (``"64-true"``)."""

    precision = "64-true"


class FSDPPrecision(Precision):
    """A precision for the FSDP strategy; trainkit's FSDP reads ``Trainer(precision=)``.

    Args:
        precision: "32-true", "bf16-mixed", "bf16-true", "16-true" (trainkit's
            FSDP refuses "16-mixed" when the run starts).
        scaler: a ``GradScaler`` for "16-mixed".
    """

    def __init__(self, precision: str, scaler: torch.amp.GradScaler | None = None) -> None:
        canonical = canonical_precision(precision)
        if canonical in MIXED_DTYPES:
            _mixed(canonical, scaler, type(self).__name__)
        elif scaler is not None:
            raise ValueError(f"FSDPPrecision(precision={precision!r}) takes no scaler.")
        self.precision = canonical
        self.scaler = scaler

    def trainkit_plugin_settings(self) -> dict[str, Any]:
        return {"precision": self.precision, "scaler": self.scaler}


def _mixed(precision: str, scaler: Any, name: str) -> str:
    canonical = canonical_precision(precision)
    if canonical not in MIXED_DTYPES:
        raise ValueError(f"{name}(precision={precision!r}) takes '16-mixed' or 'bf16-mixed'.")
    if scaler is not None and canonical == "bf16-mixed":
        raise ValueError(
            f"{name}(precision='bf16-mixed') uses no gradient scaler; drop scaler= "
            "(bfloat16 has float32's range)."
        )
    return canonical


def __getattr__(name: str) -> Any:
    # Lightning's submodules reached as attributes, as after importing Lightning.
    return submodule_or_missing(__name__, name, __all__)
