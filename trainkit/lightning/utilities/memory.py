"""Lightning's ``lightning.pytorch.utilities.memory`` names."""

from __future__ import annotations

import gc
from typing import Any

import torch

from trainkit.tuner.batch_size_scaling import is_oom_error

__all__ = [
    "garbage_collection_cuda",
    "is_cuda_out_of_memory",
    "is_cudnn_snafu",
    "is_oom_error",
    "is_out_of_cpu_memory",
    "recursive_detach",
]


def garbage_collection_cuda() -> None:
    """Collect Python's garbage, then give the CUDA cache's unused memory back (if CUDA is up)."""
    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        torch.cuda.empty_cache()


def recursive_detach(in_dict: Any, to_cpu: bool = False) -> Any:
    """``in_dict`` (any nesting of dicts, lists, tuples) with every tensor detached.

    Args:
        in_dict: the collection.
        to_cpu: also move the tensors to the CPU.

    Example:
        >>> out = recursive_detach({"loss": torch.ones(1, requires_grad=True) * 2, "n": 3})
        >>> out["loss"].requires_grad, out["n"]
        (False, 3)
    """
    if isinstance(in_dict, torch.Tensor):
        tensor = in_dict.detach()
        return tensor.cpu() if to_cpu else tensor
    if isinstance(in_dict, dict):
        return type(in_dict)({k: recursive_detach(v, to_cpu) for k, v in in_dict.items()})
    if isinstance(in_dict, (list, tuple)) and not hasattr(in_dict, "_fields"):
        return type(in_dict)(recursive_detach(v, to_cpu) for v in in_dict)
    if isinstance(in_dict, tuple):  # a named tuple
        return type(in_dict)(*(recursive_detach(v, to_cpu) for v in in_dict))
    return in_dict


def _message(exception: BaseException) -> str:
    if isinstance(exception, RuntimeError) and len(exception.args) == 1:
        return str(exception.args[0])
    return ""


def is_cuda_out_of_memory(exception: BaseException) -> bool:
    """Whether ``exception`` is CUDA running out of memory."""
    if isinstance(exception, torch.cuda.OutOfMemoryError):
        return True
    message = _message(exception)
    return "CUDA" in message and "out of memory" in message


def is_cudnn_snafu(exception: BaseException) -> bool:
    """Whether ``exception`` is cuDNN's CUDNN_STATUS_NOT_SUPPORTED (its out-of-memory)."""
    return "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED." in _message(exception)


def is_out_of_cpu_memory(exception: BaseException) -> bool:
    """Whether ``exception`` is the CPU allocator failing."""
    return "DefaultCPUAllocator: can't allocate memory" in _message(exception)
