"""Where new tensors are made: skipping initialization, and a precision's default dtype.

``Trainer.init_module()`` builds a model under these (through its strategy's
``tensor_init_context``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
from torch.overrides import TorchFunctionMode


class _SkipInit(TorchFunctionMode):
    # torch.nn.init's functions dispatch through __torch_function__ while a mode is
    # active: answering with the tensor as it is skips the initialization.
    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if getattr(func, "__module__", None) == "torch.nn.init":
            return kwargs["tensor"] if "tensor" in kwargs else args[0]
        return func(*args, **kwargs)


def skipped_init(enabled: bool) -> AbstractContextManager[Any]:
    """Inside, ``torch.nn.init``'s random initializers leave tensors as they are (if enabled).

    The layers of ``torch.nn`` initialize their parameters with them (``uniform_``,
    ``kaiming_uniform_``, ``normal_``, ...), so they are made without the work.

    Args:
        enabled: False returns a context that changes nothing.

    Example:
        >>> weight = torch.zeros(2, 2)
        >>> with skipped_init(True):
        ...     torch.nn.init.uniform_(weight).sum().item()
        0.0
        >>> with skipped_init(True):
        ...     layer = torch.nn.Linear(2, 2)  # not initialized: whatever the memory held
    """
    return _SkipInit() if enabled else nullcontext()


#: The "true" precisions: the model (and its new tensors) in this dtype.
TRUE_DTYPES = {"bf16-true": torch.bfloat16, "16-true": torch.float16, "64-true": torch.float64}


@contextlib.contextmanager
def default_dtype(precision: str) -> Iterator[None]:
    """Inside, floating tensors are made in the dtype of a "true" precision
    ("bf16-true", "16-true", "64-true").

    Args:
        precision: the Trainer's canonical precision; any other leaves the default.
    """
    dtype = TRUE_DTYPES.get(precision)
    if dtype is None:
        yield
        return
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


@contextlib.contextmanager
def made_on(device: torch.device, precision: str) -> Iterator[None]:
    """Inside, tensors are made on ``device``, in the dtype of a "true" precision.

    Args:
        device: where (the meta device: nowhere yet).
        precision: the Trainer's canonical precision.
    """
    with device, default_dtype(precision):
        yield
