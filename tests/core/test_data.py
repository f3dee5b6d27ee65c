"""Batches of every common shape reach the device intact; batch sizes are inferred."""

from __future__ import annotations

import math
from collections import namedtuple
from dataclasses import InitVar, dataclass, field
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

import trainkit
from trainkit.core.data import extract_batch_size, limit_batches, move_data_to_device, num_batches

Pair = namedtuple("Pair", ["x", "y"])


@dataclass
class Sample:
    x: torch.Tensor
    meta: dict[str, Any]
    tag: str = "t"
    cache: list[int] = field(default_factory=list, init=False)


class Movable:
    """An object with its own .to(), like a user's batch class."""

    def __init__(self) -> None:
        self.moved_to: torch.device | None = None

    def to(self, device: torch.device) -> Movable:
        self.moved_to = device
        return self


META = torch.device("meta")  # a second device that exists on every machine


def test_nested_containers_keep_their_types_and_move_every_tensor() -> None:
    movable = Movable()
    batch = {
        "pair": Pair(torch.ones(2), [torch.zeros(3), 7]),
        "sample": Sample(torch.ones(1), {"ids": torch.arange(3)}),
        "text": "hello",
        "obj": movable,
        "tuple": (torch.ones(1), None),
    }
    moved = move_data_to_device(batch, META)
    assert isinstance(moved["pair"], Pair)
    assert moved["pair"].x.device == META and moved["pair"].y[0].device == META
    assert moved["pair"].y[1] == 7
    assert isinstance(moved["sample"], Sample)
    assert moved["sample"].x.device == META and moved["sample"].meta["ids"].device == META
    assert moved["sample"].tag == "t"
    assert moved["text"] == "hello" and moved["tuple"][1] is None
    assert moved["obj"] is movable and movable.moved_to == META
    assert batch["pair"].x.device.type == "cpu"  # the original is untouched


@dataclass
class Graph:
    """A dataclass batch with an InitVar and its own in-place ``to`` (returning None),
    as a molecular-graph batch class is written."""

    parts: InitVar[list[torch.Tensor]]
    V: torch.Tensor = field(init=False)

    def __post_init__(self, parts: list[torch.Tensor]) -> None:
        self.V = torch.cat(parts)

    def to(self, device: torch.device) -> None:
        self.V = self.V.to(device)


def test_an_objects_own_to_moves_it_even_a_dataclass_and_in_place() -> None:
    # As in Lightning: an object whose class has `to` is moved by it (not rebuilt
    # field by field, which an InitVar forbids), and a `to` that returns None
    # moved the object in place, which is kept.
    graph = Graph([torch.ones(2), torch.zeros(1)])
    moved = move_data_to_device((graph, torch.ones(1)), META)
    assert moved[0] is graph and graph.V.device == META and graph.V.shape == (3,)
    assert moved[1].device == META


def test_batches_already_on_the_device_are_returned_as_they_are() -> None:
    batch = (torch.ones(2), torch.zeros(2))
    assert move_data_to_device(batch, torch.device("cpu")) is batch


def test_extract_batch_size() -> None:
    assert extract_batch_size(torch.ones(5, 3)) == 5
    assert extract_batch_size((torch.ones(4, 2), torch.ones(4))) == 4
    assert extract_batch_size({"a": "text", "b": [torch.ones(6)]}) == 6
    assert extract_batch_size(Sample(torch.ones(3, 1), {})) == 3
    assert extract_batch_size("no tensors") == 1
    # Past containers without a tensor, as Lightning searches: (file names, images).
    assert extract_batch_size((["a.png", "b.png"], torch.ones(2, 3))) == 2
    assert extract_batch_size({"path": ["a", "b", "c"], "x": torch.ones(3, 1)}) == 3


def test_epoch_means_weigh_each_batch_by_its_size_past_a_list_of_names() -> None:
    # Five samples in batches of 2, 2, 1: the mean of batch_idx weighted by size is 0.8.
    from tests.helpers import QUIET, Classifier

    class Named(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            _names, x, y = batch
            self.log("idx", float(batch_idx), on_step=False, on_epoch=True)
            return super().training_step((x, y), batch_idx)

    data = [(f"s{i}", torch.randn(8), 0) for i in range(5)]
    trainer = trainkit.Trainer(max_epochs=1, **QUIET)
    trainer.fit(Named(), DataLoader(data, batch_size=2))
    assert float(trainer.callback_metrics["idx"]) == pytest.approx(0.8)


def test_num_batches_and_limits() -> None:
    class Stream(IterableDataset[int]):
        def __iter__(self) -> Any:
            return iter(range(3))

    assert num_batches(DataLoader(TensorDataset(torch.ones(10)), batch_size=4)) == 3
    assert num_batches(DataLoader(Stream())) == math.inf
    assert limit_batches(10, 0.25, "limit") == 2
    assert limit_batches(10, 0.01, "limit") == 1  # a non-zero fraction runs a batch
    assert limit_batches(10, 20, "limit") == 10
    assert limit_batches(math.inf, 5, "limit") == 5
    with pytest.raises(ValueError, match=r"limit=0.5 is a fraction, but the dataloader has no"):
        limit_batches(math.inf, 0.5, "limit")


def test_fit_moves_namedtuple_batches_through_the_loop() -> None:
    seen: list[type] = []

    class NamedBatches(trainkit.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)

        def training_step(self, batch: Pair, batch_idx: int) -> torch.Tensor:
            seen.append(type(batch))
            return torch.nn.functional.mse_loss(self.layer(batch.x), batch.y)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = [Pair(torch.randn(4, 2), torch.randn(4, 1)) for _ in range(3)]
    trainkit.Trainer(
        max_epochs=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        accelerator="cpu",
    ).fit(NamedBatches(), data)
    assert seen == [Pair, Pair, Pair]


def test_datamodule_without_loaders_says_what_to_define() -> None:
    with pytest.raises(NotImplementedError, match="has no train_dataloader"):
        trainkit.DataModule().train_dataloader()


def _quiet_trainer(**options: Any) -> trainkit.Trainer:
    return trainkit.Trainer(
        max_epochs=3,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        logger=False,
        **options,
    )


def test_an_empty_training_dataloader_is_an_error_naming_it() -> None:
    from tests.helpers import Classifier

    empty = DataLoader(TensorDataset(torch.zeros(0, 8), torch.zeros(0, dtype=torch.long)))
    with pytest.raises(ValueError, match=r"training dataloader has no batches \(0 samples"):
        _quiet_trainer().fit(Classifier(), empty)


def test_drop_last_with_fewer_samples_than_a_batch_is_an_error() -> None:
    from tests.helpers import Classifier, blobs

    short = DataLoader(blobs(10), batch_size=16, drop_last=True)
    with pytest.raises(ValueError, match=r"10 samples, batch_size=16, drop_last=True"):
        _quiet_trainer().fit(Classifier(), short)


def test_limit_train_batches_zero_still_skips_training_on_empty_data() -> None:
    from tests.helpers import Classifier

    empty = DataLoader(TensorDataset(torch.zeros(0, 8), torch.zeros(0, dtype=torch.long)))
    trainer = _quiet_trainer(limit_train_batches=0)
    trainer.fit(Classifier(), empty)
    assert trainer.global_step == 0


def test_a_training_iterable_without_length_that_yields_nothing_is_an_error() -> None:
    from tests.helpers import Classifier

    class Nothing(IterableDataset[Any]):
        def __iter__(self) -> Any:
            return iter(())

    trainer = _quiet_trainer()
    with pytest.raises(ValueError, match="yielded no batches in epoch 0"):
        trainer.fit(Classifier(), DataLoader(Nothing(), batch_size=4))


def test_no_persistent_dataloader_worker_outlives_a_run() -> None:
    import multiprocessing

    from tests.helpers import QUIET, Classifier, blobs

    def persistent() -> DataLoader[Any]:
        return DataLoader(blobs(64), batch_size=32, num_workers=1, persistent_workers=True)

    before = len(multiprocessing.active_children())
    train, val, test = persistent(), persistent(), persistent()
    trainer = trainkit.Trainer(max_epochs=2, num_sanity_val_steps=0, **QUIET)
    model = Classifier()
    trainer.fit(model, train, val)
    assert train._iterator is None and val._iterator is None
    assert len(multiprocessing.active_children()) == before
    trainer.test(model, test, verbose=False)
    assert test._iterator is None
    assert len(multiprocessing.active_children()) == before
    trainer.fit_loop.max_epochs = 3  # the loaders start their workers again
    trainer.fit(model, train, val)
    assert trainer.current_epoch == 3 and len(multiprocessing.active_children()) == before


def test_samplers_are_told_the_epoch_once_for_training_and_at_each_validation() -> None:
    # As Lightning: each sampler once per epoch; validation's samplers too (sanity check,
    # then each epoch's validation), so an epoch-seeded validation sampler varies as there.
    from tests.helpers import QUIET, Classifier, blobs

    class Recording(torch.utils.data.SequentialSampler):
        def __init__(self, data: Any, calls: list[int]) -> None:
            super().__init__(data)
            self.calls = calls

        def set_epoch(self, epoch: int) -> None:
            self.calls.append(epoch)

    train_calls: list[int] = []
    val_calls: list[int] = []
    data, val = blobs(32), blobs(16, seed=1)
    trainkit.Trainer(max_epochs=2, **QUIET).fit(
        Classifier(),
        DataLoader(data, batch_size=16, sampler=Recording(data, train_calls)),
        DataLoader(val, batch_size=16, sampler=Recording(val, val_calls)),
    )
    assert train_calls == [0, 1] and val_calls == [0, 0, 1]
