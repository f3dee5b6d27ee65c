"""The checks :class:`~trainkit.pipelining.pipeline.RankPipeline` runs alike on every rank.

A pipeline's ranks wait on each other in collectives, so a bad argument that
stops one rank and not its peers leaves the peers hanging. Every check here runs
on every rank with the same inputs (the constructor's arguments, or the batch
shape the first stage shares with the rest) before any collective that could
hang, so a bad argument stops every rank with the same error.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import torch.distributed as dist
from torch import Tensor, nn

from trainkit.utilities.messages import did_you_mean

#: A batch's inputs shape and dtype: the stages are built (and cached) per key.
BatchKey = tuple[tuple[int, ...], str]


def even_sizes(num_layers: int, pipe_size: int) -> list[int]:
    """Layers per stage for ``num_layers`` split into ``pipe_size`` consecutive slices.

    Args:
        num_layers: how many layers the model has.
        pipe_size: how many stages to split them into; earlier stages take the remainder.

    Example:
        >>> even_sizes(8, 3)
        [3, 3, 2]
    """
    base, extra = divmod(num_layers, pipe_size)
    return [base + (1 if stage < extra else 0) for stage in range(pipe_size)]


def checked_sizes(
    layers: nn.Sequential,
    sizes: Sequence[int] | None,
    pipe_size: int,
    micro_batches: int,
    schedule: str,
    schedules: Collection[str],
) -> list[int]:
    """``sizes`` (or an even split) after checking every argument of ``RankPipeline``.

    Each rank checks the same arguments before any collective, so a bad one stops
    every rank with the same error instead of leaving some waiting.

    Args:
        layers: the full model.
        sizes: layers per stage, or ``None`` for :func:`even_sizes`.
        pipe_size: number of pipeline stages; must divide the world size.
        micro_batches: micro-batches per batch.
        schedule: the schedule's name, one of ``schedules``.
        schedules: the known schedule names.

    Raises:
        RuntimeError: if the default process group is not initialised.
        ValueError: for any argument that does not fit the world, the model or the schedule.
    """
    if not dist.is_initialized():
        raise RuntimeError("RankPipeline needs an initialised process group.")
    world_size = dist.get_world_size()
    if pipe_size < 1 or world_size % pipe_size != 0:
        raise ValueError(
            f"The world size {world_size} is not divisible by pipe_size={pipe_size}; "
            "the world must be data_size x pipe_size ranks."
        )
    if len(layers) < pipe_size:
        raise ValueError(
            f"The model has {len(layers)} layers, fewer than pipe_size={pipe_size}: "
            "every pipeline stage needs at least one layer."
        )
    checked = list(sizes) if sizes is not None else even_sizes(len(layers), pipe_size)
    if len(checked) != pipe_size or min(checked) < 1 or sum(checked) != len(layers):
        raise ValueError(
            f"sizes={checked} must be {pipe_size} positive layer counts that sum to "
            f"the model's {len(layers)} layers."
        )
    if schedule not in schedules:
        raise ValueError(
            f"Unknown pipeline schedule {schedule!r}; choose one of {sorted(schedules)}."
            + did_you_mean(schedule, schedules)
        )
    if micro_batches < 1 or (schedule == "1f1b" and micro_batches < pipe_size):
        raise ValueError(
            f"micro_batches={micro_batches} is too small: it must be at least 1, "
            f"and at least pipe_size={pipe_size} for the '1f1b' schedule."
        )
    return checked


def parameter_owners(layers: nn.Sequential, layer_owner: Sequence[int]) -> dict[int, int]:
    """The stage that owns each parameter of ``layers``, by ``id(parameter)``.

    Args:
        layers: the full model.
        layer_owner: the stage of each layer, one entry per layer.

    Raises:
        ValueError: if layers of different stages share a parameter (tied parameters
            across pipeline stages are not supported).
    """
    param_owner: dict[int, int] = {}
    for index, layer in enumerate(layers):
        for parameter in layer.parameters():
            owner = param_owner.setdefault(id(parameter), layer_owner[index])
            if owner != layer_owner[index]:
                raise ValueError(
                    f"Layer {index} shares a parameter with a layer of another stage; "
                    "tied parameters across pipeline stages are not supported."
                )
    return param_owner


def agree_on_batch(
    inputs: Tensor | None,
    target: Tensor | None,
    *,
    micro_batches: int,
    pipe_size: int,
    pipe_group: dist.ProcessGroup,
) -> BatchKey:
    """The micro-batch shape, learnt by every pipe rank from the first stage.

    Only the first stage sees ``inputs``, but every stage must know when the
    shape changes (its receive buffers are sized by it). One small all-gather
    tells them, and lets every rank raise the same error for bad arguments
    instead of leaving its peers waiting in the pipeline.

    Args:
        inputs: the batch's inputs on the first stage (anything elsewhere).
        target: the batch's targets on the last stage (anything elsewhere).
        micro_batches: how many equal parts the batch must split into.
        pipe_size: the number of ranks in ``pipe_group``.
        pipe_group: the ranks holding the stages of one model replica.

    Raises:
        ValueError: on every pipe rank alike, if the first stage has no batched
            ``inputs``, the batch does not split into ``micro_batches`` equal parts,
            or the last stage's ``target`` has another number of rows.
    """
    rows = target.shape[0] if isinstance(target, Tensor) and target.dim() > 0 else None
    shape: BatchKey | None = None
    if isinstance(inputs, Tensor) and inputs.dim() > 0:
        shape = (tuple(inputs.shape), str(inputs.dtype))
    local = (shape, rows)
    gathered = [local]
    if pipe_size > 1:
        gathered = [local] * pipe_size
        dist.all_gather_object(gathered, local, group=pipe_group)
    key, rows = gathered[0][0], gathered[-1][1]
    if key is None:
        raise ValueError("The first pipeline stage needs `inputs`: a tensor with a batch dim.")
    batch = key[0][0]
    if batch == 0 or batch % micro_batches != 0:
        raise ValueError(
            f"A batch of {batch} rows does not split into micro_batches="
            f"{micro_batches} equal parts; use a batch size divisible by it "
            "(and drop_last=True in the DataLoader)."
        )
    if rows != batch:
        raise ValueError(
            f"The last pipeline stage needs `target` with the inputs' {batch} rows; got "
            f"{'none' if rows is None else rows}."
        )
    return key
