"""LearningRateMonitor: the right names, values and steps reach every logger."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from trainkit.callbacks.lr_monitor import LearningRateMonitor

MODULE: Any = None


class FakeLogger:
    """Records every ``log_metrics`` call."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, float], int]] = []

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self.calls.append((dict(metrics), step))


@dataclass
class SchedulerConfig:
    """Stands in for trainkit.core.optim.LRSchedulerConfig."""

    scheduler: Any
    interval: str = "epoch"
    frequency: int = 1
    name: str | None = None
    optimizer_index: int = 0


@dataclass
class FakeTrainer:
    optimizers: list[torch.optim.Optimizer]
    lr_scheduler_configs: list[SchedulerConfig] = field(default_factory=list)
    loggers: list[FakeLogger] = field(default_factory=lambda: [FakeLogger(), FakeLogger()])
    is_global_zero: bool = True
    global_step: int = 0
    current_epoch: int = 0
    log_every_n_steps: int = 2
    callback_metrics: dict[str, torch.Tensor] = field(default_factory=dict)


def sgd(lr: float = 0.1, **kwargs: Any) -> torch.optim.SGD:
    return torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=lr, **kwargs)


def train(
    monitor: LearningRateMonitor, trainer: FakeTrainer, epochs: int, steps_per_epoch: int
) -> None:
    """Drive the hooks like the loop; step-interval schedulers step after each batch."""
    monitor.on_fit_start(trainer, MODULE)
    monitor.on_train_start(trainer, MODULE)
    for epoch in range(epochs):
        trainer.current_epoch = epoch
        monitor.on_train_epoch_start(trainer, MODULE)
        for batch_idx in range(steps_per_epoch):
            monitor.on_train_batch_start(trainer, MODULE, None, batch_idx)
            for optimizer in trainer.optimizers:
                optimizer.step()
            trainer.global_step += 1
            for config in trainer.lr_scheduler_configs:
                if config.interval == "step":
                    config.scheduler.step()
        for config in trainer.lr_scheduler_configs:
            if config.interval == "epoch":
                config.scheduler.step()


def test_epoch_scheduler_logs_each_epoch_to_every_logger() -> None:
    optimizer = sgd(0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    trainer = FakeTrainer([optimizer], [SchedulerConfig(scheduler, interval="epoch")])
    monitor = LearningRateMonitor()
    train(monitor, trainer, epochs=3, steps_per_epoch=4)
    assert monitor.lrs == {"lr-SGD": [0.1, 0.05, 0.025]}
    expected = [({"lr-SGD": 0.1}, 0), ({"lr-SGD": 0.05}, 4), ({"lr-SGD": 0.025}, 8)]
    for logger in trainer.loggers:
        assert logger.calls == expected


def test_step_scheduler_logs_every_n_steps() -> None:
    optimizer = sgd(1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    trainer = FakeTrainer([optimizer], [SchedulerConfig(scheduler, interval="step")])
    monitor = LearningRateMonitor()
    train(monitor, trainer, epochs=1, steps_per_epoch=5)
    # Every 2 steps, before the batch whose step's metrics the loggers get (steps 1
    # and 3, as Lightning): after 1 and 3 halvings.
    assert trainer.loggers[0].calls == [({"lr-SGD": 0.5}, 1), ({"lr-SGD": 0.125}, 3)]


def test_logging_interval_epoch_overrides_step_scheduler() -> None:
    optimizer = sgd(1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    trainer = FakeTrainer([optimizer], [SchedulerConfig(scheduler, interval="step")])
    monitor = LearningRateMonitor(logging_interval="epoch")
    train(monitor, trainer, epochs=2, steps_per_epoch=3)
    assert trainer.loggers[0].calls == [({"lr-SGD": 1.0}, 0), ({"lr-SGD": 0.125}, 3)]


def test_accumulated_batches_sharing_a_step_log_once() -> None:
    trainer = FakeTrainer([sgd()], log_every_n_steps=1)
    monitor = LearningRateMonitor(logging_interval="step")
    monitor.on_train_start(trainer, MODULE)
    for batch_idx in range(4):  # four micro-batches, global_step still 0
        monitor.on_train_batch_start(trainer, MODULE, None, batch_idx)
    assert len(trainer.loggers[0].calls) == 1


def test_param_groups_get_pg_suffixes() -> None:
    first, second = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(
        [{"params": first.parameters()}, {"params": second.parameters(), "lr": 0.01}], lr=0.1
    )
    trainer = FakeTrainer([optimizer])
    monitor = LearningRateMonitor()
    train(monitor, trainer, epochs=1, steps_per_epoch=1)
    assert trainer.loggers[0].calls == [({"lr-SGD/pg1": 0.1, "lr-SGD/pg2": 0.01}, 0)]


def test_same_class_optimizers_get_index_and_scheduler_name_wins() -> None:
    optimizers = [sgd(0.1), sgd(0.2), torch.optim.Adam(torch.nn.Linear(2, 2).parameters(), lr=0.3)]
    scheduler = torch.optim.lr_scheduler.StepLR(optimizers[2], step_size=10)
    configs = [SchedulerConfig(scheduler, name="lr-generator", optimizer_index=2)]
    trainer = FakeTrainer(optimizers, configs)
    monitor = LearningRateMonitor()
    train(monitor, trainer, epochs=1, steps_per_epoch=1)
    assert trainer.loggers[0].calls == [({"lr-generator": 0.3, "lr-SGD": 0.1, "lr-SGD-1": 0.2}, 0)]


def test_duplicate_scheduler_names_are_rejected() -> None:
    optimizers = [sgd(), sgd()]
    configs = [
        SchedulerConfig(torch.optim.lr_scheduler.StepLR(opt, 1), name="lr", optimizer_index=i)
        for i, opt in enumerate(optimizers)
    ]
    with pytest.raises(ValueError, match="distinct 'name'"):
        LearningRateMonitor().on_train_start(FakeTrainer(optimizers, configs), MODULE)


def test_log_momentum_reads_momentum_or_betas() -> None:
    optimizers = [sgd(momentum=0.9), torch.optim.Adam(torch.nn.Linear(2, 2).parameters())]
    trainer = FakeTrainer(optimizers)
    monitor = LearningRateMonitor(log_momentum=True)
    train(monitor, trainer, epochs=1, steps_per_epoch=1)
    metrics, _ = trainer.loggers[0].calls[0]
    assert metrics["lr-SGD-momentum"] == 0.9
    assert metrics["lr-Adam-momentum"] == 0.9
    assert monitor.momentums == {"lr-SGD-momentum": [0.9], "lr-Adam-momentum": [0.9]}


def test_log_momentum_warns_for_optimizers_without_it() -> None:
    trainer = FakeTrainer([torch.optim.Adagrad(torch.nn.Linear(2, 2).parameters())])
    with pytest.warns(UserWarning, match="Adagrad has no 'momentum'"):
        train(LearningRateMonitor(log_momentum=True), trainer, epochs=1, steps_per_epoch=1)
    # Logged as 0, as Lightning documents it (the warning says so).
    assert trainer.loggers[0].calls == [({"lr-Adagrad": 0.01, "lr-Adagrad-momentum": 0.0}, 0)]


def test_no_logger_warns_how_to_fix() -> None:
    trainer = FakeTrainer([sgd()], loggers=[])
    with pytest.warns(UserWarning, match="Pass a logger"):
        LearningRateMonitor().on_fit_start(trainer, MODULE)


def test_other_ranks_log_nothing() -> None:
    trainer = FakeTrainer([sgd()], is_global_zero=False)
    monitor = LearningRateMonitor(logging_interval="step")
    train(monitor, trainer, epochs=2, steps_per_epoch=4)
    assert trainer.loggers[0].calls == []
    assert monitor.lrs == {}


def test_invalid_interval_says_what_is_allowed() -> None:
    with pytest.raises(ValueError, match="'step', 'epoch', or None"):
        LearningRateMonitor(logging_interval="batch")
