"""Lightning's ``lightning.pytorch.utilities.memory`` names."""

from __future__ import annotations

from typing import Any

import torch

from trainkit.tuner.batch_size_scaling import CPU_OOM, CUDA_OOM, CUDNN_OOM, is_oom_error, says
from trainkit.tuner.trial import free_memory as garbage_collection_cuda

__all__ = [
    "garbage_collection_cuda",
    "is_cuda_out_of_memory",
    "is_cudnn_snafu",
    "is_oom_error",
    "is_out_of_cpu_memory",
    "recursive_detach",
]


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


def is_cuda_out_of_memory(exception: BaseException) -> bool:
    """Whether ``exception`` is CUDA running out of memory."""
    return isinstance(exception, torch.cuda.OutOfMemoryError) or says(exception, CUDA_OOM)


def is_cudnn_snafu(exception: BaseException) -> bool:
    """Whether ``exception`` is cuDNN's CUDNN_STATUS_NOT_SUPPORTED (its out-of-memory)."""
    return says(exception, CUDNN_OOM)


def is_out_of_cpu_memory(exception: BaseException) -> bool:
    """Whether ``exception`` is the CPU allocator failing."""
    return says(exception, CPU_OOM)
