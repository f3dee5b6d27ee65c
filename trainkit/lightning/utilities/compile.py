"""Lightning's ``lightning.pytorch.utilities.compile``: a module back from ``torch.compile``.

``torch.compile(module)`` returns a wrapper (torch's ``OptimizedModule``) that is not
a ``LightningModule``. The Trainer's entry points take that wrapper as it is and
train the module inside it; these helpers are for code that wants the module
itself. Where trainkit differs from Lightning: :func:`from_compiled` compiles the
module's forward (every call of the module, hooks included), as
``Trainer(compile=...)`` does, where Lightning also wraps the step methods.
"""

from __future__ import annotations

from typing import Any

from trainkit.core.module import Module
from trainkit.utilities.compile import compiled_parts

__all__ = ["from_compiled", "to_uncompiled"]


def from_compiled(model: Any) -> Module:
    """The Module that ``torch.compile`` wrapped, its calls going through the compiled code.

    The Module is changed in place, as ``Module.compile()`` changes it, with the
    backend and settings the ``torch.compile`` call was given; :func:`to_uncompiled`
    undoes it.

    Args:
        model: what ``torch.compile(module)`` returned.

    Raises:
        ValueError: ``model`` is not what ``torch.compile`` returns, or it wraps
            something other than a Module.
    """
    parts = compiled_parts(model)
    if parts is None:
        raise ValueError(
            f"from_compiled takes what torch.compile(module) returns (an OptimizedModule); "
            f"got a {type(model).__name__}. Pass the result of torch.compile."
        )
    module, context = parts
    if not isinstance(module, Module):
        raise ValueError(
            f"from_compiled expects a compiled LightningModule; torch.compile was given a "
            f"{type(module).__name__}. Subclass trainkit.lightning.LightningModule."
        )
    module._compiled_call_impl = context(module._call_impl)
    return module


def to_uncompiled(model: Any) -> Module:
    """The Module without compilation: from ``torch.compile``'s result or :func:`from_compiled`'s.

    Args:
        model: what ``torch.compile(module)`` returned, or a compiled Module.

    Raises:
        ValueError: ``model`` is a Module that is not compiled, or neither kind.
    """
    parts = compiled_parts(model)
    module = parts[0] if parts is not None else model
    if not isinstance(module, Module):
        raise ValueError(
            f"to_uncompiled takes a LightningModule or what torch.compile returned for one; "
            f"got a {type(module).__name__}."
        )
    if parts is None and module._compiled_call_impl is None:
        raise ValueError(
            f"to_uncompiled was given a {type(module).__name__} that is not compiled; it "
            "takes what torch.compile returned, or a Module from from_compiled."
        )
    module._compiled_call_impl = None
    return module


def _maybe_unwrap_optimized(model: Any) -> Module:
    # Lightning's private helper, which projects import to accept either kind of model.
    if compiled_parts(model) is not None:
        return from_compiled(model)
    if isinstance(model, Module):
        return model
    raise TypeError(
        f"`model` must be a LightningModule or what torch.compile returned for one, got "
        f"`{type(model).__qualname__}`."
    )
