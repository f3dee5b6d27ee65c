"""A CUDA run's training loader that would leave the GPU waiting gets one warning with the fix."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from trainkit.distributed.sampling import LARGE_DATASET, advise_on_loading
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
