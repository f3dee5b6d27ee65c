"""A CUDA run's training loader that would leave the GPU waiting gets one warning with the fix."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset, WeightedRandomSampler

from trainkit.distributed.sampling import (
    LARGE_DATASET,
    SamplerShare,
    advise_on_loading,
    evaluation_sampler,
    training_sampler,
)
from trainkit.strategies.single import SingleDeviceStrategy

CUDA = torch.device("cuda")


def _loader(size: int, **options: object) -> DataLoader[object]:
    return DataLoader(TensorDataset(torch.zeros(size, 1)), batch_size=64, **options)  # type: ignore[arg-type]


def test_a_large_training_set_loaded_in_process_without_pinning_is_warned_once() -> None:
    strategy = SingleDeviceStrategy(CUDA)  # built without touching a GPU
    loader = _loader(LARGE_DATASET)
    with pytest.warns(UserWarning, match=r"num_workers=0 .* and pin_memory=False .*num_workers=4"):
        strategy.prepare_dataloader(loader, training=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        strategy.prepare_dataloader(loader, training=True)  # said once
        strategy.prepare_dataloader(_loader(LARGE_DATASET), training=False)  # evaluation: never


@pytest.mark.parametrize(
    ("options", "advised"),
    [
        ({}, "num_workers=0 (each batch is loaded in the training process, between steps) and"),
        ({"num_workers": 2}, "has pin_memory=False"),
        ({"pin_memory": True}, "has num_workers=0"),
        ({"num_workers": 2, "pin_memory": True}, None),
    ],
)
def test_the_advice_names_what_is_missing(options: dict[str, object], advised: str | None) -> None:
    advice = advise_on_loading(_loader(LARGE_DATASET, **options), CUDA, announce=False)
    assert (advice is None) if advised is None else (advised in (advice or ""))


def test_small_data_cpu_runs_and_other_ranks_say_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert advise_on_loading(_loader(LARGE_DATASET - 1), CUDA, announce=True) is None
        assert advise_on_loading(_loader(LARGE_DATASET), torch.device("cpu"), announce=True) is None
        assert advise_on_loading(_loader(LARGE_DATASET), CUDA, announce=False) is not None


def _weighted() -> Any:
    return WeightedRandomSampler(torch.arange(1.0, 11.0), num_samples=7, replacement=True)


def test_a_share_of_the_users_sampler_deals_one_draw_out_across_the_ranks() -> None:
    # Each "rank" draws with its own random state, as processes would: the shares are
    # still of one draw, set by the job's seed and the epoch.
    shares = []
    for rank in range(2):
        torch.manual_seed(100 + rank)
        share = SamplerShare(_weighted(), num_replicas=2, rank=rank, drop_last=False)
        share.set_epoch(3)
        shares.append(list(share))
    torch.manual_seed(5)
    one = SamplerShare(_weighted(), num_replicas=1, rank=0, drop_last=False)
    one.set_epoch(3)
    drawn = list(one)
    assert len(drawn) == 7 and [len(s) for s in shares] == [4, 4]  # padded to 8
    padded = drawn + drawn[:1]
    assert shares == [padded[0::2], padded[1::2]]
    one.set_epoch(4)
    assert list(one) != drawn  # another epoch, another draw
    cut = SamplerShare(_weighted(), num_replicas=2, rank=1, drop_last=True)
    assert len(cut) == 3 and len(list(cut)) == 3


def test_only_the_default_samplers_are_replaced_by_a_distributed_split() -> None:
    data = TensorDataset(torch.zeros(10, 2))
    assert isinstance(training_sampler(DataLoader(data, shuffle=True), 2, 0), DistributedSampler)
    assert isinstance(training_sampler(DataLoader(data), 2, 0), DistributedSampler)
    kept = training_sampler(DataLoader(data, sampler=_weighted()), 2, 1)
    assert isinstance(kept, SamplerShare) and kept.rank == 1


def test_evaluation_takes_each_index_a_users_sampler_draws_once_across_the_ranks() -> None:
    from torch.utils.data import SubsetRandomSampler

    data = TensorDataset(torch.zeros(20, 2))
    subset = [1, 4, 6, 9, 13, 17, 18]
    shares = []
    for rank in range(2):
        torch.manual_seed(rank)  # each process's own random state
        loader = DataLoader(data, sampler=SubsetRandomSampler(subset))
        shares.append(list(evaluation_sampler(loader, 2, rank)))
    assert sorted(shares[0] + shares[1]) == subset  # no index twice, none padded in
    assert [len(s) for s in shares] == [4, 3]
    plain = evaluation_sampler(DataLoader(data), 2, 1)
    assert list(plain) == list(range(1, 20, 2))
