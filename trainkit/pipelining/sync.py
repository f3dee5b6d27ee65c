"""The collectives that bring the ranks of a (data, pipe) mesh back into agreement.

:class:`~trainkit.pipelining.pipeline.RankPipeline` trains each layer on the pipe
rank that owns it, so the ranks drift apart in three ways, each undone here:

- the data replicas of a stage hold different gradients: :func:`average_gradients`;
- a rank's copy of the layers it does not own goes stale: :func:`broadcast_from`;
- each rank's optimizer has state only for its own parameters, but a checkpoint
  needs a single-process optimizer's state: :func:`gather_optimizer_state`.

Tensors travel as one flat tensor per dtype, one collective each, rather than
one collective per tensor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn


def average_gradients(
    parameters: Iterable[nn.Parameter], group: dist.ProcessGroup, size: int
) -> None:
    """Average the ``.grad`` of ``parameters`` over ``group``, in place.

    Args:
        parameters: this rank's stage's parameters; those without a ``.grad`` are skipped.
        group: the data group: the ranks holding the same stage.
        size: the number of ranks in ``group``.
    """
    # One all-reduce per dtype over a flat copy, rather than one per parameter.
    # Data replicas run the same stage, so they agree on which grads exist.
    grads = [p.grad for p in parameters if p.grad is not None]
    for dtype in sorted({g.dtype for g in grads}, key=str):
        group_grads = [g for g in grads if g.dtype == dtype]
        flat = torch.cat([g.reshape(-1) for g in group_grads])
        dist.all_reduce(flat, group=group)
        flat.div_(size)
        _copy_back(flat, group_grads)


def broadcast_from(
    tensors: list[Tensor], *, owner: int, rank: int, group: dist.ProcessGroup
) -> None:
    """Overwrite ``tensors`` on every rank of ``group`` with the values on rank ``owner``.

    Call it under ``torch.no_grad()`` when ``tensors`` are parameters.

    Args:
        tensors: the same tensors (shapes, dtypes, order) on every rank of ``group``.
        owner: the group rank whose values everyone takes.
        rank: this rank's place in ``group``.
        group: the ranks to broadcast over.
    """
    for dtype in sorted({t.dtype for t in tensors}, key=str):
        same_dtype = [t for t in tensors if t.dtype == dtype]
        flat = torch.cat([t.detach().reshape(-1) for t in same_dtype])
        dist.broadcast(flat, group=group, group_src=owner)
        if owner != rank:
            _copy_back(flat, same_dtype)


def gather_optimizer_state(
    optimizer: torch.optim.Optimizer,
    param_owner: Mapping[int, int],
    *,
    pipe_rank: int,
    pipe_size: int,
    pipe_group: dist.ProcessGroup,
) -> dict[str, Any]:
    """The state dict a single-process ``optimizer`` over the full model would have.

    Each parameter's state is taken from the pipe rank that owns it, whatever
    the other ranks hold; the result is the same on every rank (collective).

    Args:
        optimizer: built over the full model's parameters, in the same order on every rank.
        param_owner: the owning pipe rank of each parameter, by ``id(parameter)``.
        pipe_rank: this rank's place in ``pipe_group``.
        pipe_size: the number of ranks in ``pipe_group``.
        pipe_group: the ranks holding the stages of one model replica.

    Raises:
        ValueError: if an optimizer parameter has no owner in ``param_owner``.
    """
    state_dict = optimizer.state_dict()
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    owned: dict[int, tuple[dict[str, Any], set[str]]] = {}
    for index, parameter in enumerate(parameters):
        owner = param_owner.get(id(parameter))
        if owner is None:
            raise ValueError(f"Optimizer parameter {index} is not in the pipelined layers.")
        if owner == pipe_rank and index in state_dict["state"]:
            owned[index] = _portable(state_dict["state"][index])
    gathered: list[dict[int, tuple[dict[str, Any], set[str]]]] = [{}] * pipe_size
    if pipe_size > 1:
        dist.all_gather_object(gathered, owned, group=pipe_group)
    else:
        gathered = [owned]
    state: dict[int, dict[str, Any]] = {}
    for owner_rank, entries in enumerate(gathered):
        for index in sorted(entries):
            if owner_rank == pipe_rank:
                state[index] = state_dict["state"][index]
            else:
                values, on_device = entries[index]
                device = parameters[index].device
                state[index] = {k: v.to(device) if k in on_device else v for k, v in values.items()}
    return {"state": dict(sorted(state.items())), "param_groups": state_dict["param_groups"]}


def _copy_back(flat: Tensor, tensors: list[Tensor]) -> None:
    offset = 0
    for tensor in tensors:
        tensor.copy_(flat[offset : offset + tensor.numel()].view_as(tensor))
        offset += tensor.numel()


def _portable(entry: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """An optimizer state entry with its tensors on the CPU, and which were on a device.

    Pickled device tensors would be rebuilt on the *sender's* device; the receiver
    moves them to its own copy of the parameter's device instead.
    """
    values = {k: v.cpu() if isinstance(v, Tensor) else v for k, v in entry.items()}
    on_device = {k for k, v in entry.items() if isinstance(v, Tensor) and v.device.type != "cpu"}
    return values, on_device
