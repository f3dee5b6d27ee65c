"""Samplers for data parallelism."""

from __future__ import annotations

from collections.abc import Iterator

from torch.utils.data import Sampler


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
