"""Names projects import from Lightning's deeper modules: a batch's size, loaders' lengths
over processes, the trainer's state class, the writers' and timer's intervals, the
summary function, merge_dicts and the other small helpers."""

from __future__ import annotations

import dataclasses
import importlib.util
import statistics
import warnings
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset

import trainkit
from trainkit.lightning.utilities.data import extract_batch_size, has_len_all_ranks
from trainkit.lightning.utilities.exceptions import MisconfigurationException

from ..helpers import QUIET, Classifier, blobs, loader

HAS_LIGHTNING = importlib.util.find_spec("lightning") is not None


@dataclasses.dataclass
class Sample:
    label: str
    image: torch.Tensor


BATCHES: list[Any] = [
    torch.zeros(6, 2),
    torch.tensor(3.0),  # a scalar: one sample
    {"image": torch.zeros(8, 3), "label": torch.zeros(8)},
    ["a string first", (torch.zeros(5), torch.zeros(5))],
    Sample("x", torch.zeros(4, 4)),
    {"meta": {"ids": [1, 2]}, "x": torch.zeros(7)},
]


def test_extract_batch_size_takes_the_first_tensors_first_dimension() -> None:
    assert [extract_batch_size(batch) for batch in BATCHES] == [6, 1, 8, 5, 4, 7]


def test_extract_batch_size_warns_about_tensors_of_other_sizes_and_refuses_none() -> None:
    with pytest.warns(UserWarning, match="taken as 8, the first tensor's") as caught:
        assert extract_batch_size((torch.zeros(8, 2), torch.zeros(3))) == 8
    assert "batch_size=n" in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # equal sizes: nothing to say
        assert extract_batch_size((torch.zeros(8, 2), torch.zeros(8))) == 8
    for nothing in ([], [1, 2, 3], "text", None):
        with pytest.raises(MisconfigurationException, match="batch_size=n"):
            extract_batch_size(nothing)


@pytest.mark.skipif(not HAS_LIGHTNING, reason="compares with Lightning, not installed")
def test_extract_batch_size_agrees_with_lightnings() -> None:
    from lightning.pytorch.utilities.data import extract_batch_size as lightnings

    assert [extract_batch_size(b) for b in BATCHES] == [lightnings(b) for b in BATCHES]


class Endless(IterableDataset[int]):
    def __iter__(self) -> Any:
        yield from range(3)


def test_has_len_all_ranks_on_one_process() -> None:
    strategy = trainkit.Trainer(**QUIET).strategy
    assert has_len_all_ranks(loader(blobs(8), 4), strategy) is True
    assert has_len_all_ranks(DataLoader(Endless()), strategy) is False
    with pytest.warns(UserWarning, match="no batches on any process"):
        assert has_len_all_ranks(loader(blobs(0), 4), strategy) is True


def test_has_len_all_ranks_refuses_a_process_without_batches_among_others() -> None:
    from tests.distributed import workers
    from tests.distributed.spawn import run_processes

    refused = run_processes(workers.loader_lengths, 2, 1, False)
    assert refused[0] == "True"
    assert refused[1].startswith("RuntimeError: The DataLoader of this process has no batches")
    assert run_processes(workers.loader_lengths, 2, 1, True) == ["True", "True"]


def test_trainer_state_is_the_class_of_trainer_state() -> None:
    from trainkit.lightning.trainer.states import TrainerFn, TrainerState, TrainerStatus

    trainer = trainkit.Trainer(max_steps=1, **QUIET)
    assert isinstance(trainer.state, TrainerState)
    trainer.fit(Classifier(), loader(blobs(32)))
    assert trainer.state.finished and not trainer.state.stopped
    assert trainer.state.fn == TrainerFn.FITTING and trainer.state.status == TrainerStatus.FINISHED

    class Failing(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            raise RuntimeError("boom")

    failed = trainkit.Trainer(max_steps=1, **QUIET)
    with pytest.raises(RuntimeError, match="boom"):
        failed.fit(Failing(), loader(blobs(32)))
    assert failed.state.stopped and not failed.state.finished


def test_the_prediction_writers_interval_is_lightnings_enum() -> None:
    from trainkit.lightning.callbacks import BasePredictionWriter
    from trainkit.lightning.callbacks.prediction_writer import WriteInterval

    written: list[str] = []

    class Writer(BasePredictionWriter):
        def write_on_batch_end(self, *args: Any) -> None:
            written.append("batch")

        def write_on_epoch_end(self, *args: Any) -> None:
            written.append("epoch")

    writer = Writer(write_interval=WriteInterval.BATCH_AND_EPOCH)
    assert writer.interval is WriteInterval.BATCH_AND_EPOCH and writer.interval == "batch_and_epoch"
    assert writer.interval.on_batch and writer.interval.on_epoch
    assert Writer("epoch").interval.on_epoch and not Writer("epoch").interval.on_batch
    trainkit.Trainer(callbacks=[writer], **QUIET).predict(Classifier(), loader(blobs(64)))
    assert written == ["batch", "batch", "epoch"]


def test_the_timers_interval_enum_is_taken_by_the_timer() -> None:
    from trainkit.lightning.callbacks import Timer
    from trainkit.lightning.callbacks.timer import Interval

    # Out of time from the start: nothing trains (as under Lightning).
    timer = Timer(duration={"seconds": 0}, interval=Interval.epoch)
    trainer = trainkit.Trainer(max_epochs=3, callbacks=[timer], **QUIET)
    trainer.fit(Classifier(), loader(blobs(64)))
    assert trainer.global_step == 0
    timer = Timer(duration={"days": 1}, interval=Interval.step)
    trainer = trainkit.Trainer(max_epochs=3, callbacks=[timer], **QUIET)
    trainer.fit(Classifier(), loader(blobs(64)))
    assert trainer.current_epoch == 3
    assert Interval.step == "step" and Interval("epoch") is Interval.epoch


def test_summarize_returns_the_summary_object() -> None:
    from trainkit.lightning.utilities.model_summary import ModelSummary as Short
    from trainkit.lightning.utilities.model_summary.model_summary import (
        ModelSummary,
        get_formatted_model_size,
        summarize,
    )

    summary = summarize(Classifier(), max_depth=-1)
    assert Short is ModelSummary and isinstance(summary, ModelSummary)
    assert summary.layer_names == ["net", "net.0", "net.1", "net.2"]
    assert summary.total_parameters == 8 * 32 + 32 + 32 * 3 + 3
    assert "Total params" in str(summary)
    assert get_formatted_model_size(summary.model_size) == f"{summary.model_size:,.3f}"


def test_merge_dicts_aggregates_each_key_and_nested_dicts() -> None:
    from trainkit.lightning.loggers.logger import merge_dicts

    first = {"loss": 1.0, "acc": 0.5, "nested": {"n": 1, "kept": 7}}
    second = {"loss": 3.0, "acc": None, "extra": 2, "nested": {"n": 4}}
    merged = merge_dicts([first, second], {"acc": max, "nested": {"n": sum}})
    assert merged == {"loss": 2.0, "acc": 0.5, "nested": {"n": 5, "kept": 7}, "extra": 2}
    assert merge_dicts([first, second], default_func=min)["loss"] == 1.0
    assert merge_dicts([{"a": 1}, {"a": 2}, {"a": 6}])["a"] == statistics.mean([1, 2, 6])


def test_the_small_names_behave_as_lightnings() -> None:
    from torch.nn.parallel import DistributedDataParallel

    from trainkit.callbacks import BackboneFinetuning
    from trainkit.lightning.callbacks.finetuning import multiplicative
    from trainkit.lightning.core.optimizer import do_nothing_closure
    from trainkit.lightning.utilities import types

    assert multiplicative(3) == 2.0 and BackboneFinetuning().lambda_func is multiplicative
    assert Classifier().fabric is None  # as for a module a Trainer runs
    assert do_nothing_closure() is None
    assert types.DistributedDataParallel is DistributedDataParallel
    assert "DistributedDataParallel" in types.__all__


def test_the_hook_classes_are_the_bases_lightning_has() -> None:
    from trainkit.lightning.core.hooks import CheckpointHooks, DataHooks, ModelHooks

    module, data = Classifier(), trainkit.DataModule()
    assert isinstance(module, ModelHooks) and isinstance(module, CheckpointHooks)
    assert isinstance(module, DataHooks) and isinstance(data, DataHooks)
    assert not isinstance(data, ModelHooks) and not isinstance(data, CheckpointHooks)

    class Source(DataHooks):  # a data class of a project's own, on Lightning's base
        pass

    source = Source()
    assert source.prepare_data_per_node and source.setup("fit") is None
    batch = [torch.ones(2)]
    assert source.transfer_batch_to_device(batch, torch.device("cpu"), 0)[0] is batch[0]
    with pytest.raises(NotImplementedError, match=r"Source has no train_dataloader\(\)"):
        source.train_dataloader()
