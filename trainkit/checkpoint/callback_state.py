"""A callback's state in checkpoints, for any object used as a callback.

As in Lightning, a callback need not subclass ``trainkit.Callback`` (a ported
class, a test's Mock): trainkit then reads what it has, and uses the defaults of
``Callback`` for what it lacks. Checkpointing and launching read callbacks'
states through these functions.
"""

from __future__ import annotations

from typing import Any


def callback_state_key(callback: object) -> str:
    """The key of ``callback``'s state in a checkpoint: its ``state_key``, else its class name.

    Args:
        callback: one of the run's callbacks.
    """
    key = getattr(callback, "state_key", None)
    return key if isinstance(key, str) else type(callback).__qualname__


def callback_state(callback: object) -> dict[str, Any]:
    """What ``callback`` saves in a checkpoint: its ``state_dict()`` when that gives a dict.

    Args:
        callback: one of the run's callbacks.
    """
    state_dict = getattr(callback, "state_dict", None)
    state = state_dict() if callable(state_dict) else None
    return state if isinstance(state, dict) else {}


def load_callback_state(callback: object, state: dict[str, Any]) -> None:
    """Hand ``callback`` the state it saved, if it has a ``load_state_dict``.

    Args:
        callback: one of the run's callbacks.
        state: what :func:`callback_state` returned when the checkpoint was saved.
    """
    load_state_dict = getattr(callback, "load_state_dict", None)
    if callable(load_state_dict):
        load_state_dict(state)


def call_hook(callback: object, name: str, *args: Any) -> None:
    """Call ``callback``'s hook ``name`` with ``args``, if it has one.

    Args:
        callback: one of the run's callbacks.
        name: the hook, e.g. "on_save_checkpoint".
        *args: its arguments, ``(trainer, module, ...)``.
    """
    hook = getattr(callback, name, None)
    if callable(hook):
        hook(*args)
