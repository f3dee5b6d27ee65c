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


class WarmUp(EarlyStopping):
    """Ignores its first ``warmup`` checks, as a Lightning subclass does it: by
    overriding ``_evaluate_stopping_criteria`` and calling ``super()``."""

    def __init__(self, warmup: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.warmup, self.calls, self.reason = warmup, 0, None

    def _evaluate_stopping_criteria(self, current: torch.Tensor) -> tuple[bool, str | None]:
        self.calls += 1
        if self.calls <= self.warmup:
            return False, "warming up"
        should_stop, reason = super()._evaluate_stopping_criteria(current)
        if should_stop:
            self.reason = reason
        return should_stop, reason


def test_a_subclass_overriding_evaluate_stopping_criteria_decides() -> None:
    stopper = WarmUp(3, monitor="val_loss", patience=1)
    _fit(stopper, [1.0] * 8)  # never improves after the first value it sees
    # Checks 1-3 warm up; check 4 sets the best, check 5 stops (as in Lightning).
    assert stopper.calls == 5 and stopper.stopped_epoch == 4
    assert stopper.reason is not None and "did not improve" in stopper.reason
    assert stopper.stopping_reason_code is EarlyStoppingReason.PATIENCE_EXHAUSTED


def test_a_subclass_overriding_should_skip_check_is_obeyed() -> None:
    class AfterEpoch4(EarlyStopping):
        def _should_skip_check(self, trainer: Any) -> bool:
            return trainer.current_epoch < 4 or super()._should_skip_check(trainer)

    stopper = AfterEpoch4(monitor="val_loss", patience=0)
    _fit(stopper, [1.0] * 8)
    assert stopper.stopped_epoch == 5


def test_run_early_stopping_check_from_a_batch_hook_checks_every_step() -> None:
    class EveryStep(EarlyStopping):
        def on_train_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
            self._run_early_stopping_check(trainer)

    class StepScore(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            self.log("step_score", 1.0)  # never improves after the first step
            return super().training_step(batch, batch_idx)

    stopper = EveryStep(monitor="step_score", patience=2, check_on_train_epoch_end=False)
    trainer = trainkit.Trainer(max_epochs=3, callbacks=[stopper], **QUIET)
    trainer.fit(StepScore(), loader(blobs(256), 16))  # 16 steps an epoch
    assert trainer.global_step == 3 and stopper.wait_count == 2
    assert trainer.current_epoch == 1 and stopper.stopped_epoch == 0
