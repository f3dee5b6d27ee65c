"""EarlyStopping: stops at the right check, survives resume, explains missing metrics."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from trainkit.callbacks.early_stopping import EarlyStopping

MODULE: Any = None


@dataclass
class FakeTrainer:
    """The Trainer attributes EarlyStopping reads and writes."""

    callback_metrics: dict[str, torch.Tensor] = field(default_factory=dict)
    current_epoch: int = 0
    sanity_checking: bool = False
    should_stop: bool = False
    is_global_zero: bool = True
    num_val_batches: list[float] = field(default_factory=lambda: [10.0])
    val_check_interval: int | float = 1.0
    check_val_every_n_epoch: int | None = 1


def validate(stopper: EarlyStopping, trainer: FakeTrainer, value: float) -> None:
    """One epoch whose validation logged ``value`` under the monitored name: the end
    of validation, then of the epoch (one check, wherever the stopper checks)."""
    trainer.callback_metrics[stopper.monitor] = torch.tensor(value)
    stopper.on_validation_end(trainer, MODULE)
    stopper.on_train_epoch_end(trainer, MODULE)


def checks_until_stop(stopper: EarlyStopping, values: list[float]) -> int | None:
    """Feed one value per epoch; return the 1-based check that stopped training."""
    trainer = FakeTrainer()
    stopper.setup(trainer, MODULE, "fit")
    for epoch, value in enumerate(values):
        trainer.current_epoch = epoch
        validate(stopper, trainer, value)
        if trainer.should_stop:
            assert stopper.stopped_epoch == epoch
            return epoch + 1
    return None


def test_min_mode_stops_after_patience_checks_without_improvement() -> None:
    stopper = EarlyStopping("val/loss", mode="min", patience=2)
    # 5 and 4 improve; 4.5 and 4.2 do not (best stays 4): stop at the 4th check.
    assert checks_until_stop(stopper, [5, 4, 4.5, 4.2, 3.0, 2.0]) == 4
    assert stopper.best_score == 4.0
    assert stopper.stopping_reason is not None
    assert "did not improve in the last 2 checks" in stopper.stopping_reason


def test_improvement_resets_the_count() -> None:
    stopper = EarlyStopping("val/loss", patience=2)
    assert checks_until_stop(stopper, [5, 6, 4, 6, 3, 6, 6, 1]) == 7


def test_max_mode_with_min_delta() -> None:
    stopper = EarlyStopping("val/acc", mode="max", patience=1, min_delta=0.1)
    # 0.55 is higher but not by more than 0.1: no improvement, stop at check 2.
    assert checks_until_stop(stopper, [0.5, 0.55, 0.9]) == 2
    assert stopper.best_score == 0.5


def test_min_mode_with_min_delta() -> None:
    stopper = EarlyStopping("val/loss", patience=2, min_delta=0.1)
    # 0.95 is too small a gain; 0.85 < 1.0 - 0.1 improves and resets the count.
    assert checks_until_stop(stopper, [1.0, 0.95, 0.85, 0.86, 0.9, 0.1]) == 5
    assert stopper.best_score == pytest.approx(0.85)


def test_patience_zero_stops_at_first_non_improvement() -> None:
    assert checks_until_stop(EarlyStopping("m", patience=0), [3, 2, 2]) == 3


def test_state_dict_round_trip_continues_counting() -> None:
    stopper = EarlyStopping("val/loss", patience=3)
    trainer = FakeTrainer()
    for value in (1.0, 2.0, 2.0):  # best 1.0, two checks without improvement
        validate(stopper, trainer, value)
    assert stopper.wait_count == 2

    buffer = io.BytesIO()
    torch.save(stopper.state_dict(), buffer)  # must load under weights_only=True
    buffer.seek(0)
    resumed = EarlyStopping("val/loss", patience=3)
    resumed.load_state_dict(torch.load(buffer, weights_only=True))
    assert resumed.best_score == 1.0

    trainer = FakeTrainer(current_epoch=3)
    validate(resumed, trainer, 1.5)
    assert trainer.should_stop
    assert resumed.stopped_epoch == 3


def test_missing_metric_strict_names_the_close_match() -> None:
    stopper = EarlyStopping("val/los")
    trainer = FakeTrainer(
        callback_metrics={"val/loss": torch.tensor(1.0), "loss": torch.tensor(2.0)}
    )
    with pytest.raises(RuntimeError) as error:
        stopper.on_validation_end(trainer, MODULE)
    message = str(error.value)
    assert "Did you mean 'val/loss'?" in message
    assert "'loss', 'val/loss'" in message
    assert "self.log('val/los'" in message


def test_missing_metric_not_strict_warns_once_and_skips() -> None:
    stopper = EarlyStopping("val/acc", strict=False, patience=0)
    trainer = FakeTrainer(callback_metrics={"loss": torch.tensor(2.0)})
    with pytest.warns(UserWarning, match="val/acc") as record:
        stopper.on_validation_end(trainer, MODULE)
        stopper.on_validation_end(trainer, MODULE)
    assert len(record) == 1
    assert not trainer.should_stop
    assert stopper.wait_count == 0


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_value_stops_with_reason(bad: float) -> None:
    stopper = EarlyStopping("val/loss", patience=10)
    assert checks_until_stop(stopper, [1.0, bad, 0.5]) == 2
    assert stopper.stopping_reason is not None
    assert "not finite" in stopper.stopping_reason


def test_sanity_check_and_standalone_validate_do_not_count() -> None:
    stopper = EarlyStopping("val/loss", patience=0)
    trainer = FakeTrainer(sanity_checking=True)
    stopper.setup(trainer, MODULE, "fit")
    validate(stopper, trainer, 1.0)
    assert stopper.best_score == math.inf

    stopper.setup(trainer, MODULE, "validate")
    trainer.sanity_checking = False
    validate(stopper, trainer, 1.0)
    assert stopper.best_score == math.inf


def test_check_on_train_epoch_end() -> None:
    stopper = EarlyStopping("train/loss", patience=0, check_on_train_epoch_end=True)
    trainer = FakeTrainer(callback_metrics={"train/loss": torch.tensor(1.0)})
    stopper.on_validation_end(trainer, MODULE)
    assert stopper.best_score == math.inf  # not checked after validation
    stopper.on_train_epoch_end(trainer, MODULE)
    assert stopper.best_score == 1.0
    stopper.on_train_epoch_end(trainer, MODULE)
    assert trainer.should_stop


def test_none_checks_at_the_epoch_end_when_validation_ends_each_epoch() -> None:
    # The defaults: validation once per epoch, at its end. As in Lightning, the
    # check waits for the epoch's end, where training metrics are reduced too.
    stopper = EarlyStopping("train/loss", patience=0)
    trainer = FakeTrainer(callback_metrics={"train/loss": torch.tensor(1.0)})
    stopper.setup(trainer, MODULE, "fit")
    stopper.on_validation_end(trainer, MODULE)
    assert stopper.best_score == math.inf  # not checked after validation
    stopper.on_train_epoch_end(trainer, MODULE)
    assert stopper.best_score == 1.0


@pytest.mark.parametrize(
    ("interval", "every"),
    [(0.5, 1), (100, 1), (1, 1), (1.0, 2), (1.0, None)],
    ids=["twice-an-epoch", "every-100-batches", "every-batch", "every-2-epochs", "across-epochs"],
)
def test_none_checks_after_each_validation_otherwise(interval: float, every: int | None) -> None:
    stopper = EarlyStopping("val/loss", patience=0)
    trainer = FakeTrainer(
        callback_metrics={"val/loss": torch.tensor(1.0)},
        val_check_interval=interval,
        check_val_every_n_epoch=every,
    )
    stopper.setup(trainer, MODULE, "fit")
    stopper.on_train_epoch_end(trainer, MODULE)
    assert stopper.best_score == math.inf  # not checked at the epoch's end
    stopper.on_validation_end(trainer, MODULE)
    assert stopper.best_score == 1.0


def test_no_validation_checks_at_the_epoch_end_and_explains_a_missing_metric() -> None:
    stopper = EarlyStopping("val/loss")
    trainer = FakeTrainer(num_val_batches=[], callback_metrics={"loss": torch.tensor(1.0)})
    stopper.setup(trainer, MODULE, "fit")
    with pytest.raises(RuntimeError, match="no validation batches") as error:
        stopper.on_train_epoch_end(trainer, MODULE)
    assert "at each training epoch's end" in str(error.value)


def test_state_key_tells_two_callbacks_apart() -> None:
    first = EarlyStopping("val/loss", mode="min")
    second = EarlyStopping("val/acc", mode="max")
    assert first.state_key == "EarlyStopping{'monitor': 'val/loss', 'mode': 'min'}"
    assert first.state_key != second.state_key


def test_verbose_prints_the_reason_on_rank_zero_only(capsys: pytest.CaptureFixture[str]) -> None:
    stopper = EarlyStopping("m", patience=0, verbose=True)
    checks_until_stop(stopper, [1.0, 1.0])
    assert "did not improve" in capsys.readouterr().out

    quiet = EarlyStopping("m", patience=0, verbose=True)
    trainer = FakeTrainer(is_global_zero=False)
    validate(quiet, trainer, 1.0)
    validate(quiet, trainer, 1.0)
    assert trainer.should_stop  # every rank decides the same way
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"mode": "maximum"}, "'min'"),
        ({"patience": -1}, "patience=-1"),
        ({"min_delta": -0.1}, "min_delta=-0.1"),
    ],
)
def test_invalid_arguments_say_what_is_wrong(kwargs: dict[str, Any], text: str) -> None:
    with pytest.raises(ValueError, match=text):
        EarlyStopping("val/loss", **kwargs)
