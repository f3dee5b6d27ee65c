"""LearningRateMonitor as Lightning documents it: names, attributes, the logger check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import LearningRateMonitor
from trainkit.loggers import CSVLogger


def _fit(tmp_path: Path, model: trainkit.Module, monitor: LearningRateMonitor) -> None:
    options = {**QUIET, "logger": CSVLogger(tmp_path)}
    trainer = trainkit.Trainer(max_epochs=2, log_every_n_steps=1, callbacks=[monitor], **options)
    trainer.fit(model, loader(blobs(64), 32))


class Decaying(Classifier):
    """SGD with momentum and weight decay, halved every step."""

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=1.0, momentum=0.9, weight_decay=0.01)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }


def test_lr_momentum_and_weight_decay_names_and_values(tmp_path: Path) -> None:
    monitor = LearningRateMonitor(log_momentum=True, log_weight_decay=True)
    _fit(tmp_path, Decaying(), monitor)
    assert monitor.lrs == {"lr-SGD": [1.0, 0.5, 0.25, 0.125]}
    assert monitor.last_momentum_values == {"lr-SGD-momentum": 0.9}
    assert monitor.last_weight_decay_values == {"lr-SGD-weight_decay": 0.01}


def test_the_learning_rate_is_a_callback_metric_too(tmp_path: Path) -> None:
    # As Lightning's: another callback can monitor the learning rate.
    seen: list[float] = []

    class Reader(trainkit.Callback):
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            seen.append(float(trainer.callback_metrics["lr-SGD"]))

    monitor = LearningRateMonitor(log_momentum=True)
    options = {**QUIET, "logger": CSVLogger(tmp_path)}
    trainer = trainkit.Trainer(
        max_epochs=2, log_every_n_steps=1, callbacks=[monitor, Reader()], **options
    )
    trainer.fit(Decaying(), loader(blobs(64), 32))
    assert seen == [1.0, 0.5, 0.25, 0.125]
    assert float(trainer.callback_metrics["lr-SGD-momentum"]) == pytest.approx(0.9)


def test_epoch_interval_logs_once_per_epoch(tmp_path: Path) -> None:
    monitor = LearningRateMonitor(logging_interval="epoch")
    _fit(tmp_path, Decaying(), monitor)
    assert monitor.lrs == {"lr-SGD": [1.0, 0.25]}


def test_adam_momentum_is_its_first_beta(tmp_path: Path) -> None:
    class WithAdam(Classifier):
        def configure_optimizers(self) -> Any:
            return torch.optim.Adam(self.parameters(), lr=0.01, betas=(0.8, 0.99))

    monitor = LearningRateMonitor(log_momentum=True)
    _fit(tmp_path, WithAdam(), monitor)
    assert monitor.last_momentum_values == {"lr-Adam-momentum": 0.8}


def test_param_groups_use_their_names(tmp_path: Path) -> None:
    class Named(Classifier):
        def configure_optimizers(self) -> Any:
            first, second = self.net[0], self.net[2]
            return torch.optim.Adam(
                [
                    {"params": first.parameters(), "name": "encoder"},
                    {"params": second.parameters(), "lr": 0.5, "name": "head"},
                ],
                lr=0.1,
            )

    monitor = LearningRateMonitor(log_momentum=True, log_weight_decay=True)
    _fit(tmp_path, Named(), monitor)
    assert set(monitor.lrs) == {"lr-Adam/encoder", "lr-Adam/head"}
    assert set(monitor.last_momentum_values) == {
        "lr-Adam/encoder-momentum",
        "lr-Adam/head-momentum",
    }
    assert set(monitor.last_weight_decay_values) == {
        "lr-Adam/encoder-weight_decay",
        "lr-Adam/head-weight_decay",
    }


def test_a_single_named_group_carries_its_name(tmp_path: Path) -> None:
    class OneNamed(Classifier):
        def configure_optimizers(self) -> Any:
            return torch.optim.SGD([{"params": self.parameters(), "name": "all"}], lr=0.1)

    monitor = LearningRateMonitor()
    _fit(tmp_path, OneNamed(), monitor)
    assert list(monitor.lrs) == ["lr-SGD/all"]


def test_scheduler_name_replaces_the_default(tmp_path: Path) -> None:
    class NamedScheduler(Decaying):
        def configure_optimizers(self) -> Any:
            config = super().configure_optimizers()
            config["lr_scheduler"]["name"] = "my-lr"
            return config

    monitor = LearningRateMonitor()
    _fit(tmp_path, NamedScheduler(), monitor)
    assert list(monitor.lrs) == ["my-lr"]


def test_values_reach_the_logger(tmp_path: Path) -> None:
    monitor = LearningRateMonitor()
    _fit(tmp_path, Decaying(), monitor)
    text = (tmp_path / "logs" / "version_0" / "metrics.csv").read_text()
    assert "lr-SGD" in text.splitlines()[0]


def test_training_without_a_logger_is_an_error() -> None:
    trainer = trainkit.Trainer(max_epochs=1, callbacks=[LearningRateMonitor()], **QUIET)
    with (
        pytest.warns(UserWarning, match="no logger"),
        pytest.raises(
            RuntimeError,
            match="Cannot use `LearningRateMonitor` callback with `Trainer` that has no logger",
        ),
    ):
        trainer.fit(Classifier(), loader(blobs(32), 32))


def test_a_warm_up_without_a_scheduler_is_logged_as_it_changes(tmp_path: Path) -> None:
    # Lightning's documented warm-up sets the learning rate in optimizer_step, with no
    # scheduler: the monitor logs it at the training metrics' steps and at each epoch's
    # start, as Lightning's does, so the warm-up shows in the logs.
    class WarmUp(Classifier):
        def optimizer_step(self, epoch: int, batch_idx: int, optimizer: Any, closure: Any) -> None:
            for group in optimizer.param_groups:
                group["lr"] = 0.1 * min(1.0, (self.trainer.global_step + 1) / 4)
            optimizer.step(closure=closure)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    monitor = LearningRateMonitor()
    logger = CSVLogger(tmp_path)
    options = {**QUIET, "logger": logger}
    trainer = trainkit.Trainer(max_epochs=2, log_every_n_steps=2, callbacks=[monitor], **options)
    trainer.fit(WarmUp(), loader(blobs(128), 32))  # 4 steps an epoch
    # Epoch 0's start (0.1, before any step), steps 1 and 3 (the rates steps 0 and 2
    # set), epoch 1's start, steps 5 and 7 (warm-up over).
    assert monitor.lrs["lr-SGD"] == pytest.approx([0.1, 0.025, 0.075, 0.1, 0.1, 0.1])
    rows = (Path(logger.log_dir) / "metrics.csv").read_text().splitlines()
    header = rows[0].split(",")
    steps = [row.split(",")[header.index("step")] for row in rows[1:]]
    lrs = [row.split(",")[header.index("lr-SGD")] for row in rows[1:]]
    assert [s for s, lr in zip(steps, lrs, strict=True) if lr] == ["0", "1", "3", "4", "5", "7"]
