"""EarlyStopping as Lightning documents it: thresholds, check_finite, state."""

from __future__ import annotations

import io
import math
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import EarlyStopping
from trainkit.callbacks.early_stopping import EarlyStoppingReason


class Scripted(Classifier):
    """Logs ``val_loss`` from a list, one value per epoch."""

    def __init__(self, values: list[float]) -> None:
        super().__init__()
        self.values = values

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.values[self.current_epoch])


def _fit(stopper: EarlyStopping, values: list[float]) -> trainkit.Trainer:
    trainer = trainkit.Trainer(
        max_epochs=len(values), callbacks=[stopper], num_sanity_val_steps=0, **QUIET
    )
    trainer.fit(Scripted(values), loader(blobs(32), 32), loader(blobs(32), 32))
    return trainer


def test_stopped_epoch_is_0_until_a_stop_as_in_lightning() -> None:
    # Ported code compares it with 0 (a refit's callback starts from there).
    stopper = EarlyStopping(monitor="val_loss", patience=1)
    assert stopper.stopped_epoch == 0 and stopper.wait_count == 0
    legacy = {**stopper.state_dict(), "stopped_epoch": None}  # older trainkit files
    stopper.load_state_dict(legacy)
    assert stopper.stopped_epoch == 0


def test_patience_counts_checks_without_improvement() -> None:
    stopper = EarlyStopping(monitor="val_loss", patience=2)
    trainer = _fit(stopper, [1.0, 0.9, 0.95, 0.91, 0.5, 0.4])
    assert stopper.stopped_epoch == 3
    assert trainer.current_epoch == 4  # the stopping epoch completed
    assert stopper.wait_count == 2
    assert float(stopper.best_score) == pytest.approx(0.9)
    assert stopper.stopping_reason_code is EarlyStoppingReason.PATIENCE_EXHAUSTED


def test_min_delta_is_the_least_improvement_that_counts() -> None:
    stopper = EarlyStopping(monitor="val_loss", patience=1, min_delta=0.1)
    _fit(stopper, [1.0, 0.95, 0.5])
    assert stopper.stopped_epoch == 1


def test_mode_max() -> None:
    stopper = EarlyStopping(monitor="val_loss", mode="max", patience=1)
    _fit(stopper, [0.1, 0.2, 0.15, 0.3])
    assert stopper.stopped_epoch == 2


def test_stopping_threshold_stops_once_reached() -> None:
    stopper = EarlyStopping(monitor="val_loss", stopping_threshold=0.5, patience=10)
    _fit(stopper, [1.0, 0.6, 0.4, 0.3])
    assert stopper.stopped_epoch == 2
    assert stopper.stopping_reason_code is EarlyStoppingReason.STOPPING_THRESHOLD
    assert stopper.stopping_reason is not None
    assert "Stopping threshold reached" in stopper.stopping_reason


def test_divergence_threshold_stops_once_exceeded() -> None:
    stopper = EarlyStopping(monitor="val_loss", divergence_threshold=5.0, patience=10)
    _fit(stopper, [1.0, 2.0, 6.0, 0.1])
    assert stopper.stopped_epoch == 2
    assert stopper.stopping_reason_code is EarlyStoppingReason.DIVERGENCE_THRESHOLD


def test_check_finite_stops_on_nan() -> None:
    stopper = EarlyStopping(monitor="val_loss", patience=10)
    _fit(stopper, [1.0, math.nan, 0.5])
    assert stopper.stopped_epoch == 1
    assert stopper.stopping_reason_code is EarlyStoppingReason.NON_FINITE_METRIC


def test_check_finite_false_does_not_stop_on_inf() -> None:
    stopper = EarlyStopping(monitor="val_loss", patience=10, check_finite=False)
    trainer = _fit(stopper, [1.0, math.inf, 0.5])
    assert stopper.stopped_epoch == 0  # as in Lightning: no stop
    assert stopper.stopping_reason_code is EarlyStoppingReason.NOT_STOPPED
    assert trainer.current_epoch == 3


def test_strict_false_skips_a_missing_metric() -> None:
    stopper = EarlyStopping(monitor="missing", strict=False)
    with pytest.warns(UserWarning, match="'missing'"):
        trainer = _fit(stopper, [1.0, 1.0])
    assert trainer.current_epoch == 2


def test_check_on_train_epoch_end_reads_a_training_metric() -> None:
    class TrainMetric(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = super().training_step(batch, batch_idx)
            self.log("train_metric", 1.0, on_epoch=True, on_step=False)
            return loss

    stopper = EarlyStopping(monitor="train_metric", patience=1, check_on_train_epoch_end=True)
    trainer = trainkit.Trainer(max_epochs=5, callbacks=[stopper], **QUIET)
    trainer.fit(TrainMetric(), loader(blobs(32), 32))
    assert stopper.stopped_epoch == 1


def test_log_rank_zero_only_is_accepted() -> None:
    stopper = EarlyStopping(monitor="val_loss", log_rank_zero_only=True, verbose=True)
    assert stopper.log_rank_zero_only


def test_state_dict_round_trip_keeps_the_reason() -> None:
    stopper = EarlyStopping(monitor="val_loss", patience=1)
    _fit(stopper, [1.0, 2.0, 3.0])
    state = stopper.state_dict()
    assert set(state) >= {"wait_count", "stopped_epoch", "best_score", "patience"}
    assert state["stopping_reason"] == EarlyStoppingReason.PATIENCE_EXHAUSTED.value
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    restored = EarlyStopping(monitor="val_loss")
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    assert restored.wait_count == 1 and restored.stopped_epoch == 1 and restored.patience == 1
    assert float(restored.best_score) == 1.0
    assert restored.stopping_reason_code is EarlyStoppingReason.PATIENCE_EXHAUSTED
    assert restored.stopping_reason_message == stopper.stopping_reason_message


def test_state_key_names_monitor_and_mode() -> None:
    assert EarlyStopping(monitor="val_loss").state_key == (
        "EarlyStopping{'monitor': 'val_loss', 'mode': 'min'}"
    )


def test_monitor_op_follows_mode() -> None:
    assert EarlyStopping(monitor="val_loss").monitor_op is torch.lt
    assert EarlyStopping(monitor="val_loss", mode="max").monitor_op is torch.gt
