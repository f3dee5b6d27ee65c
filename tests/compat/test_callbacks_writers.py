"""LambdaCallback and BasePredictionWriter, as Lightning documents them."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import trainkit
from trainkit.callbacks import BasePredictionWriter, LambdaCallback

from ..helpers import QUIET, Classifier, blobs, loader


def test_lambda_callback_calls_the_given_functions() -> None:
    seen: list[tuple[str, int]] = []
    callback = LambdaCallback(
        on_train_epoch_end=lambda trainer, module: seen.append(("epoch", trainer.current_epoch)),
        on_fit_end=lambda trainer, module: seen.append(("end", trainer.global_step)),
    )
    trainer = trainkit.Trainer(max_epochs=2, callbacks=[callback], **QUIET)
    trainer.fit(Classifier(), loader(blobs(64), 16))
    assert seen == [("epoch", 0), ("epoch", 1), ("end", 8)]
    with pytest.raises(ValueError, match="not a callback hook"):
        LambdaCallback(on_nothing=print)


class Collect(BasePredictionWriter):
    def __init__(self, interval: str) -> None:
        super().__init__(interval)
        self.batches: list[tuple[int, int, torch.Tensor]] = []
        self.at_end: Any = None
        self.indices: list[Any] = []
        self.indices_at_end: Any = None

    def write_on_batch_end(
        self,
        trainer: Any,
        pl_module: Any,
        prediction: Any,
        batch_indices: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int,
    ) -> None:
        self.batches.append((dataloader_idx, batch_idx, prediction))
        self.indices.append(batch_indices)

    def write_on_epoch_end(
        self, trainer: Any, pl_module: Any, predictions: Any, batch_indices: Any
    ) -> None:
        self.at_end = predictions
        self.indices_at_end = batch_indices


def test_prediction_writer_per_batch_and_at_the_end() -> None:
    writer = Collect("batch_and_epoch")
    trainer = trainkit.Trainer(callbacks=[writer], **QUIET)
    returned = trainer.predict(Classifier(), loader(blobs(48), 16), return_predictions=False)
    assert returned is None
    assert [(d, b) for d, b, _ in writer.batches] == [(0, 0), (0, 1), (0, 2)]
    assert len(writer.at_end) == 3 and torch.equal(writer.at_end[0], writer.batches[0][2])


def test_prediction_writers_get_each_batchs_dataset_indices() -> None:
    # As in Lightning: each batch's indices, and at the end one list per dataloader.
    writer = Collect("batch_and_epoch")
    trainer = trainkit.Trainer(callbacks=[writer], limit_predict_batches=3, **QUIET)
    model, data = Classifier(), blobs(40)
    trainer.predict(model, loader(data, 8, shuffle=True))
    flat = [i for batch in writer.indices for i in batch]
    assert len(set(flat)) == 24 and set(flat) <= set(range(40)) and flat != list(range(24))
    for indices, (_, _, prediction) in zip(writer.indices, writer.batches, strict=True):
        with torch.no_grad():  # each prediction is that of the samples its indices name
            assert torch.equal(model(data.tensors[0][indices]).argmax(dim=1), prediction)
    assert writer.indices_at_end == [writer.indices]  # the prefetched batches left out

    # A loader whose batches cannot be traced: None per batch, an empty list at the end.
    class Loader(torch.utils.data.DataLoader):  # type: ignore[type-arg]
        pass

    writer = Collect("batch_and_epoch")
    trainer = trainkit.Trainer(callbacks=[writer], **QUIET)
    trainer.predict(Classifier(), Loader(blobs(16), batch_size=8))
    assert writer.indices == [None, None] and writer.indices_at_end == [[]]


def test_prediction_writer_with_several_dataloaders() -> None:
    class Two(Classifier):
        def predict_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> Any:
            return super().predict_step(batch, batch_idx)

    writer = Collect("epoch")
    trainer = trainkit.Trainer(callbacks=[writer], **QUIET)
    trainer.predict(Two(), [loader(blobs(32), 16), loader(blobs(16), 16)])
    assert writer.batches == [] and [len(p) for p in writer.at_end] == [2, 1]
    assert writer.indices_at_end == [[list(range(16)), list(range(16, 32))], [list(range(16))]]
    with pytest.raises(ValueError, match="write_interval"):
        BasePredictionWriter("step")


def test_return_predictions_false_keeps_nothing() -> None:
    import weakref

    alive: list[weakref.ref[torch.Tensor]] = []

    held_at_end: list[bool] = []

    class Tracked(Classifier):
        def predict_step(self, batch: Any, batch_idx: int) -> Any:
            prediction = super().predict_step(batch, batch_idx)
            alive.append(weakref.ref(prediction))
            return prediction

        def on_predict_end(self) -> None:
            held_at_end.extend(ref() is not None for ref in alive)

    trainer = trainkit.Trainer(**QUIET)
    assert trainer.predict(Tracked(), loader(blobs(64), 16), return_predictions=False) is None
    # while predict ran, no earlier batch's prediction was held on to (the last
    # one is still in the loop's hands when on_predict_end runs)
    assert held_at_end[:3] == [False] * 3
