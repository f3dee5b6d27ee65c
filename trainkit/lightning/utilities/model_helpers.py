"""Lightning's ``lightning.pytorch.utilities.model_helpers`` names, on trainkit's rule."""

from __future__ import annotations

import functools
from typing import Any
from unittest.mock import Mock

from torch import nn

__all__ = ["get_torchvision_model", "is_overridden"]


def get_torchvision_model(model_name: str, **kwargs: Any) -> nn.Module:
    """A torchvision model by name (``torchvision.models.get_model``).

    Args:
        model_name: the model's name, e.g. ``"resnet18"``.
        kwargs: passed to the model's builder (``weights="DEFAULT"``, ``num_classes=``).

    Raises:
        ModuleNotFoundError: torchvision is not installed.
        ValueError: torchvision has no model of that name.

    Example:
        >>> get_torchvision_model("resnet18", num_classes=3).fc.out_features
        3
    """
    try:
        from torchvision import models
    except ImportError as error:
        raise ModuleNotFoundError(
            f"get_torchvision_model({model_name!r}) needs torchvision: pip install torchvision"
        ) from error
    model: nn.Module = models.get_model(model_name, **kwargs)
    return model


def is_overridden(
    method_name: str, instance: object | None = None, parent: type | None = None
) -> bool:
    """Whether ``instance``'s class overrides ``parent``'s method ``method_name``.

    As in Lightning, an attribute is judged by the function it runs: a
    ``functools.wraps`` wrapper by the function it wraps, a ``Mock(wraps=f)`` by
    ``f`` (a ``Mock`` that wraps nothing does not override), a ``functools.partial``
    by its function. (The Trainer calls any hook set on an instance, a ``Mock``
    included.)

    Args:
        method_name: the method's name, e.g. ``"training_step"``.
        instance: a Module, DataModule or Callback (None: False).
        parent: the class that defines the default (by default the trainkit class
            ``instance`` is: Module, DataModule or Callback).

    Raises:
        ValueError: no ``parent`` was given and ``instance`` is none of those, or
            ``parent`` has no such method.

    Example:
        >>> import trainkit
        >>> class Net(trainkit.Module):
        ...     def training_step(self, batch, batch_idx): ...
        >>> is_overridden("training_step", Net()), is_overridden("validation_step", Net())
        (True, False)
    """
    from trainkit.callbacks.base import Callback
    from trainkit.core.data import DataModule
    from trainkit.core.module import Module

    if instance is None:
        return False
    if parent is None:
        parent = next((c for c in (Module, DataModule, Callback) if isinstance(instance, c)), None)
        if parent is None:
            raise ValueError(
                f"is_overridden({method_name!r}, <{type(instance).__name__}>): pass parent=, "
                "the class that defines the method; it is found by itself only for a Module, "
                "a DataModule or a Callback."
            )
    if getattr(instance, method_name, None) is None:
        return False
    if getattr(parent, method_name, None) is None:
        raise ValueError(
            f"is_overridden({method_name!r}, parent={parent.__name__}): {parent.__name__} "
            f"has no method {method_name!r} to override; check the name or the parent."
        )
    # Judged by what the attribute runs, compared by code with the parent's method.
    method = _unwrapped(getattr(instance, method_name))
    if method is None:
        return False  # a Mock that wraps nothing
    return _code(method) is not _code(_unwrapped(getattr(parent, method_name)))


def _unwrapped(method: Any) -> Any:
    # The function a functools.wraps wrapper (or a context manager) or a Mock(wraps=...)
    # wraps, a partial's function; None for a Mock that wraps nothing.
    method = getattr(method, "__wrapped__", method)
    if isinstance(method, Mock):
        return method._mock_wraps
    return method.func if isinstance(method, functools.partial) else method


def _code(method: Any) -> object:
    # A bound method's function's code; a callable object without code is its own.
    function = getattr(method, "__func__", method)
    return getattr(function, "__code__", function)
