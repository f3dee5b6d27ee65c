"""EarlyStopping inside a real fit stops at the right epoch."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import EarlyStopping
from trainkit.callbacks.early_stopping import EarlyStoppingReason

# The monitored value per epoch: improves twice, then stalls.
SCORES = [1.0, 0.8, 0.6, 0.7, 0.65, 0.9, 0.5, 0.4]


class Scripted(Classifier):
    """Logs a scripted validation loss, one value per epoch."""

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val/score", SCORES[self.current_epoch])


@pytest.mark.parametrize(("patience", "last_epoch"), [(1, 3), (2, 4), (3, 5)])
def test_stops_after_patience_checks_without_improvement(patience: int, last_epoch: int) -> None:
    epochs: list[int] = []

    class Record(trainkit.Callback):
        def on_train_epoch_start(self, trainer: trainkit.Trainer, module: Any) -> None:
            epochs.append(trainer.current_epoch)

    stopper = EarlyStopping(monitor="val/score", mode="min", patience=patience)
    trainer = trainkit.Trainer(
        max_epochs=len(SCORES), callbacks=[stopper, Record()], num_sanity_val_steps=0, **QUIET
    )
    trainer.fit(Scripted(), loader(blobs(64), 32), loader(blobs(32), 32))
    # Best is 0.6 at epoch 2; epochs 3, 4, 5 do not improve on it.
    assert epochs == list(range(last_epoch + 1))
    assert stopper.stopped_epoch == last_epoch
    assert stopper.best_score == pytest.approx(0.6)


def test_sanity_check_values_do_not_count() -> None:
    class NanInSanity(Scripted):
        def validation_step(self, batch: Any, batch_idx: int) -> None:
            value = float("nan") if self.trainer.sanity_checking else 1.0
            self.log("val/score", torch.tensor(value))

    stopper = EarlyStopping(monitor="val/score", patience=5)
    trainer = trainkit.Trainer(max_epochs=2, callbacks=[stopper], **QUIET)
    trainer.fit(NanInSanity(), loader(blobs(64), 32), loader(blobs(32), 32))
    assert trainer.current_epoch == 2 and stopper.stopped_epoch == 0  # no stop
    assert stopper.stopping_reason_code is EarlyStoppingReason.NOT_STOPPED


def test_monitoring_a_training_epoch_metric_at_epoch_end() -> None:
    class TrainScore(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            self.log("train/score", 1.0, on_step=False, on_epoch=True)
            return super().training_step(batch, batch_idx)

    stopper = EarlyStopping(monitor="train/score", patience=1, check_on_train_epoch_end=True)
    trainer = trainkit.Trainer(max_epochs=10, callbacks=[stopper], **QUIET)
    trainer.fit(TrainScore(), loader(blobs(64), 32))
    # Epoch 0 sets the best (no "missing metric" error); epoch 1 does not improve.
    assert trainer.current_epoch == 2 and stopper.stopped_epoch == 1


class TrainAndValScores(Classifier):
    """Logs a scripted training epoch metric, and validation's (when it runs) the same."""

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.log("train/score", SCORES[self.current_epoch], on_step=False, on_epoch=True)
        return super().training_step(batch, batch_idx)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val/score", SCORES[self.current_epoch])


@pytest.mark.parametrize("validates", [True, False], ids=["with-validation", "no-validation"])
def test_default_check_reads_a_training_epoch_metric(validates: bool) -> None:
    # check_on_train_epoch_end=None with validation once per epoch (or none) checks
    # at the epoch's end, where the epoch's training metric exists, as in Lightning.
    stopper = EarlyStopping(monitor="train/score", patience=1)
    trainer = trainkit.Trainer(
        max_epochs=len(SCORES), callbacks=[stopper], num_sanity_val_steps=0, **QUIET
    )
    val = loader(blobs(32), 32) if validates else None
    trainer.fit(TrainAndValScores(), loader(blobs(64), 32), val)
    # Best is 0.6 at epoch 2; epoch 3 does not improve on it.
    assert stopper.stopped_epoch == 3 and trainer.current_epoch == 4


def test_default_check_with_validation_every_other_epoch_waits_for_validation() -> None:
    # Validation in epochs 1, 3, 5, 7 (0.8, 0.7, 0.9, 0.4): checked after each
    # validation run only (epochs 0, 2, 4 hold no new value), so 0.9 at epoch 5 is
    # the first check without improvement.
    stopper = EarlyStopping(monitor="val/score", patience=1)
    trainer = trainkit.Trainer(
        max_epochs=len(SCORES),
        callbacks=[stopper],
        num_sanity_val_steps=0,
        check_val_every_n_epoch=2,
        **QUIET,
    )
    trainer.fit(TrainAndValScores(), loader(blobs(64), 32), loader(blobs(32), 32))
    assert stopper.stopped_epoch == 5 and float(stopper.best_score) == pytest.approx(0.7)
