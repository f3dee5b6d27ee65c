"""Lightning's documented LearningRateMonitor names, and callback error wording.

Ported ``pytest.raises(..., match=...)`` checks match on Lightning's key phrases,
so trainkit's messages carry them (after which they say how to fix the problem).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import EarlyStopping, LearningRateMonitor
from trainkit.loggers import CSVLogger


def _fit(tmp_path: Path, model: trainkit.Module, monitor: LearningRateMonitor) -> trainkit.Trainer:
    options = {**QUIET, "logger": CSVLogger(tmp_path)}
    trainer = trainkit.Trainer(max_epochs=2, log_every_n_steps=1, callbacks=[monitor], **options)
    trainer.fit(model, loader(blobs(64), 32))
    return trainer


def test_unnamed_param_groups_are_pg1_pg2(tmp_path: Path) -> None:
    class TwoGroups(Classifier):
        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(
                [
                    {"params": self.net[0].parameters()},
                    {"params": self.net[2].parameters(), "lr": 0.01},
                ],
                lr=0.1,
                momentum=0.9,
            )

    monitor = LearningRateMonitor(log_momentum=True, log_weight_decay=True)
    _fit(tmp_path, TwoGroups(), monitor)
    # No scheduler: logged at both epochs' starts and every step (log_every_n_steps=1).
    assert monitor.lrs == {"lr-SGD/pg1": [0.1] * 6, "lr-SGD/pg2": [0.01] * 6}
    assert set(monitor.last_momentum_values) == {"lr-SGD/pg1-momentum", "lr-SGD/pg2-momentum"}
    assert set(monitor.last_weight_decay_values) == {
        "lr-SGD/pg1-weight_decay",
        "lr-SGD/pg2-weight_decay",
    }


def test_two_optimizers_of_one_class_are_lr_sgd_and_lr_sgd_1(tmp_path: Path) -> None:
    class TwoOptimizers(Classifier):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch: Any, batch_idx: int) -> None:
            for optimizer in self.optimizers():
                x, y = batch
                loss = torch.nn.functional.cross_entropy(self(x), y)
                optimizer.zero_grad()
                self.manual_backward(loss)
                optimizer.step()

        def configure_optimizers(self) -> Any:
            return [
                torch.optim.SGD(self.net[0].parameters(), lr=0.1),
                torch.optim.SGD(self.net[2].parameters(), lr=0.2),
            ]

    monitor = LearningRateMonitor()
    _fit(tmp_path, TwoOptimizers(), monitor)
    assert list(monitor.lrs) == ["lr-SGD", "lr-SGD-1"]
    assert monitor.lrs["lr-SGD-1"] == [0.2] * 6


def test_step_interval_counts_batches_not_optimizer_steps(tmp_path: Path) -> None:
    """Manual optimization with two optimizers: global_step grows by 2 a batch."""

    class TwoSteps(Classifier):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch: Any, batch_idx: int) -> None:
            for optimizer in self.optimizers():
                x, y = batch
                optimizer.zero_grad()
                self.manual_backward(torch.nn.functional.cross_entropy(self(x), y))
                optimizer.step()

        def configure_optimizers(self) -> Any:
            first = torch.optim.Adam(self.parameters(), lr=0.01)
            second = torch.optim.Adam(self.parameters(), lr=0.01)
            return [first, second], [
                torch.optim.lr_scheduler.StepLR(first, 1),
                torch.optim.lr_scheduler.StepLR(second, 1),
            ]

    monitor = LearningRateMonitor(logging_interval="step")
    options = {**QUIET, "logger": CSVLogger(tmp_path)}
    trainer = trainkit.Trainer(max_epochs=1, log_every_n_steps=2, callbacks=[monitor], **options)
    trainer.fit(TwoSteps(), loader(blobs(8 * 4), 4))  # 8 batches, 16 optimizer steps
    assert trainer.global_step == 16
    assert {name: len(values) for name, values in monitor.lrs.items()} == {
        "lr-Adam": 4,
        "lr-Adam-1": 4,
    }


def test_no_momentum_warning_is_a_runtime_warning(tmp_path: Path) -> None:
    class WithASGD(Classifier):
        def configure_optimizers(self) -> Any:
            return torch.optim.ASGD(self.parameters(), lr=0.01)

    with pytest.warns(RuntimeWarning, match=r"optimizers do not have momentum\."):
        _fit(tmp_path, WithASGD(), LearningRateMonitor(log_momentum=True))


def test_no_logger_error_wording() -> None:
    trainer = trainkit.Trainer(max_epochs=1, callbacks=[LearningRateMonitor()], **QUIET)
    with (
        pytest.warns(UserWarning),
        pytest.raises(RuntimeError, match="`Trainer` that has no logger"),
    ):
        trainer.fit(Classifier(), loader(blobs(32), 32))


def test_early_stopping_mode_error_wording() -> None:
    with pytest.raises(ValueError, match=r"`mode` can be .* got unknown_option"):
        EarlyStopping(monitor="foo", mode="unknown_option")


def test_early_stopping_missing_metric_wording() -> None:
    stopper = EarlyStopping(monitor="val_missing")
    trainer = trainkit.Trainer(max_epochs=1, callbacks=[stopper], num_sanity_val_steps=0, **QUIET)
    data = loader(blobs(32), 32)
    expected = "Early stopping conditioned on metric `val_missing` which is not available"
    with pytest.raises(RuntimeError, match=expected):
        trainer.fit(Classifier(), data, data)


def test_early_stopping_not_strict_warns_a_runtime_warning() -> None:
    stopper = EarlyStopping(monitor="val_missing", strict=False)
    trainer = trainkit.Trainer(max_epochs=1, callbacks=[stopper], num_sanity_val_steps=0, **QUIET)
    data = loader(blobs(32), 32)
    with pytest.warns(RuntimeWarning, match="Early stopping conditioned on metric `val_missing`"):
        trainer.fit(Classifier(), data, data)


def test_subclasses_call_the_hooks_with_the_arguments_lightning_declares(tmp_path: Path) -> None:
    # Lightning declares these hooks as (trainer, *_): a subclass may pass only the
    # Trainer to super(). Each callback must still do its work.
    from trainkit.callbacks import Timer

    class MyMonitor(LearningRateMonitor):
        def on_train_start(self, trainer: Any, *_: Any) -> None:
            super().on_train_start(trainer)

        def on_train_epoch_start(self, trainer: Any, *_: Any) -> None:
            super().on_train_epoch_start(trainer)

    class MyTimer(Timer):
        def on_fit_start(self, trainer: Any, *_: Any) -> None:
            super().on_fit_start(trainer)

        def on_train_epoch_end(self, trainer: Any, *_: Any) -> None:
            super().on_train_epoch_end(trainer)

    timer = MyTimer()
    options = {**QUIET, "logger": CSVLogger(tmp_path)}
    trainer = trainkit.Trainer(max_epochs=2, callbacks=[MyMonitor(), timer], **options)
    trainer.fit(Classifier(), loader(blobs(64), 32))
    assert trainer.callback_metrics["lr-SGD"] == pytest.approx(0.1)
    assert timer.time_elapsed("train") > 0
