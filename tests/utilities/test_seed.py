"""seed_everything: reproducible streams; with workers=True, distinct per rank and worker."""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import trainkit
from tests.helpers import QUIET
from trainkit.strategies import SingleDeviceStrategy


class RandomDraws(Dataset[torch.Tensor]):
    """Each item is a draw from the generator of the process that loads it."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.rand(1)


class PretendRank(SingleDeviceStrategy):
    """One process that the Trainer takes for global rank ``rank`` (it sets rank_zero_only)."""

    def __init__(self, rank: int) -> None:
        super().__init__(torch.device("cpu"))
        self.rank = rank

    @property
    def global_rank(self) -> int:
        return self.rank


def _draws(rank: str, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """What each of 2 workers draws in one epoch, through the Trainer's loader preparation."""
    monkeypatch.setenv("RANK", rank)
    trainkit.seed_everything(0, workers=True)
    seen: list[float] = []

    class Collect(trainkit.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)

        def predict_step(self, batch: Any, batch_idx: int) -> None:
            seen.extend(batch.flatten().tolist())

    loader = DataLoader(RandomDraws(), batch_size=2, num_workers=2)
    trainkit.Trainer(strategy=PretendRank(int(rank)), **QUIET).predict(Collect(), loader)
    return seen


def test_workers_get_distinct_reproducible_streams_per_rank(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rank0 = _draws("0", monkeypatch)
    assert _draws("0", monkeypatch) == rank0  # reproducible
    assert len(set(rank0)) == 8  # no two workers repeat each other
    rank1 = _draws("1", monkeypatch)
    assert not set(rank0) & set(rank1)  # another rank, other streams


def test_without_workers_seeding_the_loader_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trainkit.seed_everything(0)
    assert "TRAINKIT_SEED_WORKERS" not in os.environ
    from trainkit.core.data import with_worker_seeding

    loader = DataLoader(RandomDraws(), num_workers=2)
    assert with_worker_seeding(loader) is loader


def test_captured_states_restore_every_generator_also_from_the_older_list_form() -> None:
    import random

    import numpy

    from trainkit.utilities.seed import capture_rng_states, restore_rng_states

    def draw() -> tuple[float, float, float]:
        return random.random(), float(numpy.random.rand()), float(torch.rand(1))

    states = capture_rng_states()
    # Python's generator travels as one int64 tensor (one value to pickle and
    # digest in a checkpoint, not 625 ints)...
    assert isinstance(states["python"]["state"], torch.Tensor)
    assert states["python"]["state"].dtype == torch.int64
    expected = draw()
    restore_rng_states(states)
    assert draw() == expected
    # ...and checkpoints written before that kept a list of ints: still restored.
    states["python"]["state"] = states["python"]["state"].tolist()
    restore_rng_states(states)
    assert draw() == expected


class IterableDraws(torch.utils.data.IterableDataset[torch.Tensor]):
    """Four draws from the generator of the worker that iterates it."""

    def __iter__(self) -> Any:
        return (torch.rand(1) for _ in range(4))


def test_a_loader_over_an_iterable_dataset_is_seeded_too() -> None:
    # It takes no sampler: the loader is rebuilt with its batch size and the seeding alone.
    from trainkit.core.data import with_worker_seeding
    from trainkit.utilities.seed import seed_worker

    def draws() -> list[float]:
        trainkit.seed_everything(0, workers=True)
        loader = with_worker_seeding(DataLoader(IterableDraws(), batch_size=2, num_workers=2))
        assert loader.worker_init_fn is seed_worker and loader.batch_size == 2
        return [value for batch in loader for value in batch.flatten().tolist()]

    first = draws()
    assert len(first) == 8 and len(set(first)) == 8  # each worker its own stream
    assert draws() == first  # reproducible
