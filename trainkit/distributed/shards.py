"""Sharded checkpoints of the FSDP strategy: every process writes and reads its own shards.

The folder's layout is :mod:`trainkit.checkpoint.sharded`'s. Writing (collective):

1. rank 0 picks and empties a staging folder beside the target;
2. ``torch.distributed.checkpoint.save`` writes each process's shards of the
   model and optimizer tensors there (rank 0 also the index);
3. the processes hash the shard files (each a share of them) and rank 0 writes
   :data:`~trainkit.checkpoint.sharded.META_FILE` with the rest of the checkpoint and the
   digests, then renames the staging folder to the target.

Written in the background (``FSDPStrategy(async_save=True)``), step 2 runs in a
thread on a process group of its own once the tensors are copied to memory,
and rank 0 does step 3 when the write has ended on every process, before any
later link (``last.ckpt``) or removal (top-k) of checkpoint files.

Reading: every process checks a share of the shard files against their
digests, then ``torch.distributed.checkpoint.load`` reads into tensors shaped
like this run's shards: a checkpoint written by another number of processes is
resharded on the way in.
"""

from __future__ import annotations

import copy
import os
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import distributed as dist
from torch import nn

from trainkit.checkpoint import sharded
from trainkit.checkpoint.files import CheckpointError, check_shards, load_folder_meta, save_atomic
from trainkit.distributed import sharding

if TYPE_CHECKING:
    from trainkit.strategies.base import Strategy


def parameter_names(module: nn.Module, optimizers: list[torch.optim.Optimizer]) -> list[list[str]]:
    """For each optimizer, the module's name of each parameter, in the optimizer's order."""
    names = {id(parameter): name for name, parameter in module.named_parameters()}
    return [
        [names[id(p)] for group in optimizer.param_groups for p in group["params"]]
        for optimizer in optimizers
    ]


def gathered(
    module: nn.Module, optimizers: list[torch.optim.Optimizer], checkpoint: dict[str, Any]
) -> dict[str, Any]:
    """``checkpoint`` with the full model and optimizer states (on rank 0; collective).

    Gathered tensor by tensor onto rank 0's CPU: the file rank 0 writes is the one
    a single process would (``FSDPStrategy(state_dict_type="full")``).
    """
    full = {**checkpoint, "state_dict": sharding.full_model_state(module)}
    if "optimizer_states" in checkpoint:
        full["optimizer_states"] = [
            sharding.full_optimizer_state(module, optimizer) for optimizer in optimizers
        ]
    return full


def save(
    strategy: Strategy,
    checkpoint: dict[str, Any],
    names: list[list[str]],
    path: str | os.PathLike[str],
    background: Any = None,
) -> Future[Any] | None:
    """Write ``checkpoint`` (with sharded tensors) as a sharded checkpoint folder at ``path``.

    Every process calls this at the same point.

    Args:
        strategy: the running strategy (its collectives and rank).
        checkpoint: the full checkpoint dict; ``state_dict`` and ``optimizer_states``
            hold this process's shards (DTensors).
        names: :func:`parameter_names` of the run's optimizers.
        path: the folder to write (replaced if it exists).
        background: a process group of its own (gloo) to write in the background
            with: the call returns once the tensors are copied, and the folder is
            committed (by rank 0, in order with later links and removals) once
            every process's shards are on disk. None: write now.

    Returns:
        With ``background``: the write under way (wait for it before the next save).
    """
    from torch.distributed.checkpoint.filesystem import FileSystemWriter
    from torch.distributed.checkpoint.state_dict_saver import async_save
    from torch.distributed.checkpoint.state_dict_saver import save as save_tensors

    tensors, meta = sharded.split(checkpoint, names if "optimizer_states" in checkpoint else [])
    target = Path(path)
    staging = Path(
        strategy.broadcast(str(sharded.staging_folder(target)) if strategy.is_global_zero else "")
    )
    if strategy.is_global_zero:
        sharded.settle()  # an earlier save of this folder must not land on top of this one
        sharded.remove(staging)  # an earlier save's, killed before it finished
        staging.mkdir(parents=True)
    strategy.barrier("a sharded checkpoint's staging folder")
    writer = FileSystemWriter(os.fspath(staging))
    meta[sharded.SHARDED_KEY]["world_size"] = strategy.world_size
    if background is not None:
        # The tensors are copied before this returns; training may change them after.
        written = async_save(tensors, storage_writer=writer, process_group=background)
        future = cast("Future[Any]", written)
        if strategy.is_global_zero:
            meta = copy.deepcopy(meta)
            sharded.later(lambda: _commit(future.result, meta, staging, target, None), target)
        return future
    save_tensors(tensors, storage_writer=writer)
    strategy.barrier("the shards of a checkpoint")
    digests = _share_of_digests(strategy, staging)
    if strategy.is_global_zero:
        _commit(lambda: None, meta, staging, target, digests)
    strategy.barrier("save_checkpoint")
    return None


def _commit(
    written: Any, meta: dict[str, Any], staging: Path, target: Path, digests: dict[str, str] | None
) -> None:
    # Rank 0, once every process's shards are on disk: the index file (with the
    # shards' digests) last, then the folder under its real name.
    written()
    if digests is None:  # written in the background: rank 0 hashes every file
        digests = {name: sharded.digest(staging / name) for name in sharded.shard_files(staging)}
    meta[sharded.SHARDED_KEY]["digests"] = digests
    save_atomic(meta, staging / sharded.META_FILE)
    sharded.commit(staging, target)


def load(strategy: Strategy, module: nn.Module, path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a sharded checkpoint folder into this process's shards (collective).

    Args:
        strategy: the running strategy.
        module: the set-up (sharded) module; its tensors give each saved tensor's layout.
        path: the checkpoint folder.

    Returns:
        The checkpoint dict, whose ``state_dict`` and optimizer states hold this
        process's shards.
    """
    folder = Path(path)
    meta = load_folder_meta(folder)
    digests = meta[sharded.SHARDED_KEY]["digests"]
    mine = sorted(digests)[strategy.global_rank :: strategy.world_size]
    try:
        check_shards(folder, {name: digests[name] for name in mine})
        failure: CheckpointError | None = None
    except CheckpointError as error:
        failure = error
    found = strategy.exchange("checking a checkpoint's shard files", [int(failure is not None)])
    if failure is not None:
        raise failure
    if any(flag for (flag,) in found):
        ranks = [rank for rank, (flag,) in enumerate(found) if flag]
        raise CheckpointError(
            f"Checkpoint {folder} is corrupt: process(es) {ranks} found shard files that are "
            "missing or do not match their recorded digests (their messages name the files); "
            "use another checkpoint, such as the previous one in its folder."
        )
    own = module.state_dict()
    parameters = dict(module.named_parameters())

    def template(key: str, size: torch.Size, dtype: torch.dtype) -> torch.Tensor:
        # Shaped like this run's tensor (a DTensor reads only its own shards);
        # anything else (a step counter, a key this model lacks) is read whole.
        name = sharded.parameter_of(key)
        like = parameters.get(name) if name is not None else own.get(key[len(sharded.MODEL) :])
        if like is not None and like.shape == size:
            return torch.empty_like(like, dtype=dtype)
        return torch.empty(size, dtype=dtype)

    tensors = sharded.read_tensors(folder, template, dist.group.WORLD)
    return sharded.join(meta, tensors)


def _share_of_digests(strategy: Strategy, folder: Path) -> dict[str, str]:
    # Each process hashes every N-th file, so the files are read back once in all.
    files = sharded.shard_files(folder)
    share = files[strategy.global_rank :: strategy.world_size]
    mine = {name: sharded.digest(folder / name) for name in share}
    gathered: list[Any] = [None] * strategy.world_size
    dist.all_gather_object(gathered, mine, group=strategy.process_group)
    return {name: value for share in gathered for name, value in share.items()}
