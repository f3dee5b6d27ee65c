"""Samplers for data parallelism."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import (
    DataLoader,
    DistributedSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
)


def _seed() -> int:
    # The job's seed (seed_everything's, else 0): the same on every rank.
    return int(os.environ.get("TRAINKIT_GLOBAL_SEED", "0"))


def users_sampler(dataloader: DataLoader[Any]) -> bool:
    """Whether the loader's sampler is the user's own, not the one ``shuffle`` chose."""
    return type(dataloader.sampler) not in (SequentialSampler, RandomSampler)


def training_sampler(dataloader: DataLoader[Any], num_replicas: int, rank: int) -> Sampler[Any]:
    """Rank ``rank``'s share of a training dataloader's data, reshuffled each epoch.

    Every rank draws the same permutation (the same seed: ``seed_everything``'s,
    else 0) and takes its share; the loop's ``set_epoch`` reshuffles each epoch.
    The loader's shuffling and ``drop_last`` are kept. A sampler of the user's own
    (a ``WeightedRandomSampler``, a curriculum) is kept too: each rank takes its
    share of what it draws (:class:`SamplerShare`).

    Args:
        dataloader: the user's training dataloader.
        num_replicas: how many shares the data is dealt into.
        rank: which share this process takes.
    """
    if users_sampler(dataloader):
        return SamplerShare(dataloader.sampler, num_replicas, rank, dataloader.drop_last)
    sampler: DistributedSampler[Any] = DistributedSampler(
        dataloader.dataset,
        num_replicas=num_replicas,
        rank=rank,
        shuffle=isinstance(dataloader.sampler, RandomSampler),
        seed=_seed(),
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


def evaluation_sampler(dataloader: DataLoader[Any], parts: int, part: int) -> Sampler[Any]:
    """Process ``part``'s share of an evaluation dataloader's data, without padding:
    each sample (each index a sampler of the user's own draws) is evaluated once.

    Args:
        dataloader: the user's evaluation dataloader.
        parts: how many shares the data is split into.
        part: which share this process takes.
    """
    if users_sampler(dataloader):  # a subset of the dataset, say
        return SamplerShare(dataloader.sampler, parts, part, drop_last=False, padded=False)
    return EvenSplitSampler(len(dataloader.dataset), parts, part)  # type: ignore[arg-type]


class SamplerShare(Sampler[Any]):
    """Rank ``rank``'s share of what a sampler of the user's draws each epoch.

    Each epoch the sampler's indices are drawn once, with torch's random state set
    from the job's seed and the epoch (so every rank draws the same indices, and a
    resumed epoch draws them again), and dealt out in turn: rank ``r`` takes
    indices ``r``, ``r + n``, ... of the draw. The draw is padded from its start to
    a multiple of the ranks, or cut to one with ``drop_last`` (as
    ``DistributedSampler`` does with a dataset). A sampler with its own generator
    draws from that: seed it the same on every rank.

    For evaluation (``padded=False``) the draw is neither padded nor cut: each index
    drawn is evaluated once, as :class:`EvenSplitSampler` splits a dataset.

    Args:
        sampler: the user's sampler (its ``set_epoch``, if any, is called too).
        num_replicas: how many shares the draw is dealt into.
        rank: which share this process takes.
        drop_last: cut the draw instead of padding it.
        padded: give every rank as many indices (training's shares step together).

    Example:
        >>> share = SamplerShare([5, 1, 4, 2, 3], num_replicas=2, rank=1, drop_last=False)
        >>> list(share), len(share)
        ([1, 2, 5], 3)
    """

    def __init__(
        self, sampler: Any, num_replicas: int, rank: int, drop_last: bool, padded: bool = True
    ) -> None:
        self.sampler, self.num_replicas, self.rank = sampler, num_replicas, rank
        self.drop_last, self.padded, self.epoch = drop_last, padded, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        set_epoch = getattr(self.sampler, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(epoch)

    def _total(self, drawn: int) -> int:
        if not self.padded:
            return drawn
        if self.drop_last:
            return drawn - drawn % self.num_replicas
        return -(-drawn // self.num_replicas) * self.num_replicas

    def __iter__(self) -> Iterator[Any]:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(_seed() + self.epoch)
            drawn = list(self.sampler)
        total = self._total(len(drawn))
        while drawn and len(drawn) < total:  # padded from the start, as DistributedSampler
            drawn += drawn[: total - len(drawn)]
        return iter(drawn[self.rank : total : self.num_replicas])

    def __len__(self) -> int:
        return len(range(self.rank, self._total(len(self.sampler)), self.num_replicas))


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


#: Below this many samples a training set loads fast enough however it is loaded.
LARGE_DATASET = 10_000
_ADVISED: set[int] = set()


def advise_on_loading(dataloader: Any, device: Any, announce: bool) -> str | None:
    """Warn once when a CUDA run's training loader leaves its GPU waiting for data.

    With ``num_workers=0`` every batch is loaded in the training process between
    steps; with ``pin_memory=False`` the copy to the GPU cannot overlap with
    compute (trainkit moves pinned batches with ``non_blocking=True``). Both only
    matter on a GPU and for a dataset of some size.

    Args:
        dataloader: the training dataloader.
        device: the device the run computes on.
        announce: whether this process warns (global rank 0).

    Returns:
        The advice (also warned, once per loader), or None.

    Example:
        >>> import torch
        >>> from torch.utils.data import TensorDataset
        >>> big = DataLoader(TensorDataset(torch.zeros(20_000, 1)), batch_size=64)
        >>> "num_workers=0" in advise_on_loading(big, torch.device("cuda"), announce=False)
        True
        >>> advise_on_loading(big, torch.device("cpu"), announce=False) is None
        True
    """
    if getattr(device, "type", None) != "cuda" or not isinstance(dataloader, DataLoader):
        return None
    try:
        size = len(dataloader.dataset)  # type: ignore[arg-type]
    except TypeError:
        return None
    slow = []
    if dataloader.num_workers == 0:
        slow.append("num_workers=0 (each batch is loaded in the training process, between steps)")
    if not dataloader.pin_memory:
        slow.append("pin_memory=False (the copy to the GPU cannot overlap with compute)")
    if size < LARGE_DATASET or not slow:
        return None
    advice = (
        f"The training DataLoader ({size} samples) has {' and '.join(slow)}, so the GPU may "
        "wait for data. Try DataLoader(..., num_workers=4, pin_memory=True, "
        "persistent_workers=True) (more workers for costly decoding or augmentation; "
        "prefetch_factor for how many batches each worker loads ahead)."
    )
    if announce and id(dataloader) not in _ADVISED:
        _ADVISED.add(id(dataloader))
        warnings.warn(advice, stacklevel=3)
    return advice
