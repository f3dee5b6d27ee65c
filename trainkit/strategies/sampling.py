"""Samplers for data parallelism."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from typing import Any

from torch.utils.data import DataLoader, DistributedSampler, RandomSampler, Sampler


def training_sampler(
    dataloader: DataLoader[Any], num_replicas: int, rank: int
) -> DistributedSampler[Any]:
    """Rank ``rank``'s share of a training dataloader's data, reshuffled each epoch.

    Every rank draws the same permutation (the same seed: ``seed_everything``'s,
    else 0) and takes its share; the loop's ``set_epoch`` reshuffles each epoch.
    The loader's shuffling and ``drop_last`` are kept.

    Args:
        dataloader: the user's training dataloader.
        num_replicas: how many shares the data is dealt into.
        rank: which share this process takes.
    """
    sampler: DistributedSampler[Any] = DistributedSampler(
        dataloader.dataset,
        num_replicas=num_replicas,
        rank=rank,
        shuffle=isinstance(dataloader.sampler, RandomSampler),
        seed=int(os.environ.get("TRAINKIT_GLOBAL_SEED", "0")),
        drop_last=dataloader.drop_last,
    )
    repeated = sampler.total_size - len(dataloader.dataset)  # type: ignore[arg-type]
    if repeated > 0 and rank == 0:
        warnings.warn(
            f"The training data has {len(dataloader.dataset)} samples, not a multiple of "  # type: ignore[arg-type]
            f"the {num_replicas} processes: each epoch repeats {repeated} of them so that every "
            "process gets as many, and the steps that hold them differ from one process "
            "training on the whole batch. Pass drop_last=True to the training DataLoader "
            f"to leave {len(dataloader.dataset) % num_replicas} out instead (then DDP matches "  # type: ignore[arg-type]
            "one process exactly), or use a size divisible by the number of processes.",
            UserWarning,
            stacklevel=2,
        )
    return sampler


class EvenSplitSampler(Sampler[int]):
    """Rank ``rank``'s share of ``length`` indices, in order, without padding.

    For evaluation: unlike ``DistributedSampler``, no index is repeated to even
    out the shares, so each sample counts exactly once (ranks may get one sample
    more or less; metrics are reduced as weighted sums).

    Args:
        length: the dataset's length.
        world_size: the number of processes.
        rank: this process's rank.

    Example:
        >>> list(EvenSplitSampler(5, 2, 1))
        [1, 3]
    """

    def __init__(self, length: int, world_size: int, rank: int) -> None:
        self.length, self.world_size, self.rank = length, world_size, rank

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.rank, self.length, self.world_size))

    def __len__(self) -> int:
        return len(range(self.rank, self.length, self.world_size))
