"""Lightning's ``lightning.pytorch.utilities.data`` names: a batch's size, a loader's length
on every rank, and a DataLoader's worker count for this machine."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch

from trainkit.lightning.utilities.exceptions import MisconfigurationException
from trainkit.lightning.utilities.rank_zero import rank_zero_warn

__all__ = ["extract_batch_size", "has_len_all_ranks", "suggested_max_num_workers"]


def suggested_max_num_workers(local_world_size: int) -> int:
    """An upper bound for a DataLoader's ``num_workers``: this process's share of the
    CPU cores it may run on, less one for the process itself (at least 1).

    Args:
        local_world_size: the training processes on this machine (the Trainer's
            ``devices``).

    Example:
        >>> suggested_max_num_workers(1) >= 1
        True
    """
    if local_world_size < 1:
        raise ValueError(
            f"suggested_max_num_workers(local_world_size={local_world_size}) counts the "
            "processes on this machine: pass 1 or more."
        )
    affinity = getattr(os, "sched_getaffinity", None)
    cores = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
    return max(1, cores // local_world_size - 1)


def _sizes(batch: Any) -> Iterator[int | None]:
    # Every leaf of the batch in order: a tensor's first dimension (1 for a scalar),
    # None for anything else that is not a collection.
    if isinstance(batch, torch.Tensor):
        yield int(batch.shape[0]) if batch.ndim > 0 else 1
    elif isinstance(batch, Mapping):
        for value in batch.values():
            yield from _sizes(value)
    elif isinstance(batch, Iterable) and not isinstance(batch, str):
        for item in batch:
            yield from _sizes(item)
    elif dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        for field in dataclasses.fields(batch):
            yield from _sizes(getattr(batch, field.name))
    else:
        yield None


def extract_batch_size(batch: Any) -> int:
    """The batch size of ``batch``: the first dimension of the first tensor in it.

    Mappings (by value), sequences and dataclasses are searched in order. Tensors
    of other first dimensions after it are warned about: pass the size yourself
    (``self.log(..., batch_size=n)``) when the first tensor is not the one to go by.

    Args:
        batch: a batch, as the dataloader yields it.

    Raises:
        MisconfigurationException: there is no tensor in ``batch`` (or it is nested
            too deeply to search).

    Example:
        >>> import torch
        >>> extract_batch_size({"image": torch.zeros(8, 3), "label": torch.zeros(8)})
        8
    """
    found: int | None = None
    try:
        for size in _sizes(batch):
            if size is None:
                continue
            if found is None:
                found = size
            elif size != found:
                rank_zero_warn(
                    f"The batch holds tensors of different first dimensions; its batch size "
                    f"is taken as {found}, the first tensor's. If that is not right, pass "
                    "it: self.log(..., batch_size=n)."
                )
                break
    except RecursionError:
        found = None
    if found is None:
        raise MisconfigurationException(
            f"No batch size found in a {type(batch).__name__}: it holds no tensor that says "
            "it (or is nested too deeply). Pass the size: self.log(..., batch_size=n)."
        )
    return found


def has_len_all_ranks(
    dataloader: object,
    strategy: Any,
    allow_zero_length_dataloader_with_multiple_devices: bool = False,
) -> bool:
    """Whether ``dataloader`` has a length; checks that no process's is 0 while another's is not.

    Collective: every process must call it.

    Args:
        dataloader: a DataLoader (or any iterable of batches).
        strategy: the Trainer's strategy (``trainer.strategy``).
        allow_zero_length_dataloader_with_multiple_devices: warn instead of raising
            when this process's loader is empty and another's is not.

    Raises:
        RuntimeError: this process's loader is empty while others are not (unless allowed).
    """
    try:
        length = len(dataloader)  # type: ignore[arg-type]
    except (TypeError, NotImplementedError):
        return False  # no length: nothing to compare
    total = strategy.reduce(torch.tensor(length, device=strategy.root_device), reduce_op="sum")
    name = type(dataloader).__name__
    if int(total) == 0:
        rank_zero_warn(f"The {name} has no batches on any process; check its data.")
    elif length == 0:
        if not allow_zero_length_dataloader_with_multiple_devices:
            raise RuntimeError(
                f"The {name} of this process has no batches while other processes' have some: "
                "give every process at least one batch (fewer processes, or more data)."
            )
        rank_zero_warn(
            f"The {name} of this process has no batches while other processes' have some; the "
            "processes run different numbers of batches."
        )
    return True
