"""LambdaCallback: a callback made of functions, one per hook."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainkit.callbacks.base import Callback


class LambdaCallback(Callback):
    """A callback whose hooks are the functions given by hook name.

    Each function takes the hook's arguments, ``(trainer, module, ...)``.

    Args:
        **hooks: hook name -> function, e.g. ``on_train_epoch_end=print_epoch``.

    Example:
        >>> seen = []
        >>> callback = LambdaCallback(on_fit_start=lambda trainer, module: seen.append("start"))
        >>> callback.on_fit_start(None, None); seen
        ['start']
    """

    def __init__(self, **hooks: Callable[..., Any]) -> None:
        for name, function in hooks.items():
            if not name.startswith(("on_", "setup", "teardown")) or not callable(
                getattr(Callback, name, None)
            ):
                raise ValueError(
                    f"LambdaCallback({name}=...): {name!r} is not a callback hook; hooks are "
                    "named like on_train_epoch_end, setup, teardown."
                )
            if not callable(function):
                raise TypeError(f"LambdaCallback({name}=...) needs a function.")
            setattr(self, name, function)
