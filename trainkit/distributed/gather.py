"""Gathering tensors from every process, with gradients when asked (``Module.all_gather``)."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


class _GatherWithGradients(torch.autograd.Function):
    """``all_gather`` whose backward sends each process the gradient of its own input.

    The gradient of a process's input is the sum, over every process, of the
    gradient that process's loss has for that input's slot of the gathered
    tensor (a reduce-scatter of sums, done here as one all-reduce, which every
    backend has).
    """

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, group: Any) -> torch.Tensor:
        ctx.group = group
        ctx.rank = dist.get_rank(group=group)
        parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size(group=group))]
        dist.all_gather(parts, tensor, group=group)
        return torch.stack(parts)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        summed = grad.contiguous().clone()
        dist.all_reduce(summed, group=ctx.group)
        return summed[ctx.rank], None


def gather(tensor: torch.Tensor, group: Any = None, sync_grads: bool = False) -> torch.Tensor:
    """``tensor`` from every process of ``group``, stacked along a new first dimension.

    Args:
        tensor: a tensor of the same shape and dtype on every process.
        group: the process group (None: every process of the job).
        sync_grads: let gradients flow back to each process's ``tensor``.

    Returns:
        A tensor of shape ``(group size, *tensor.shape)``, in rank order.
    """
    tensor = tensor.contiguous()
    if sync_grads:
        return _GatherWithGradients.apply(tensor, group)  # type: ignore[no-any-return]
    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size(group=group))]
    dist.all_gather(parts, tensor.detach(), group=group)
    return torch.stack(parts)
