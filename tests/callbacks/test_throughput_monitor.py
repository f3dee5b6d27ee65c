"""ThroughputMonitor: Lightning's metric names and values, with a fake clock."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, MemoryLogger, blobs, loader
from trainkit.callbacks import throughput_monitor
from trainkit.callbacks.throughput_monitor import ThroughputMonitor

DATA = blobs(64, seed=3)  # 8 batches of 8


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Tick(trainkit.Callback):
    """Training batches take 0.5 s, evaluation ones 0.25 s (ticked before the monitor reads)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def on_train_batch_end(self, *args: Any) -> None:
        self.clock.now += 0.5

    def on_validation_batch_end(self, *args: Any, **kwargs: Any) -> None:
        self.clock.now += 0.25

    def on_test_batch_end(self, *args: Any, **kwargs: Any) -> None:
        self.clock.now += 0.25


class Counted(Classifier):
    flops_per_batch = 100


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(throughput_monitor.time, "perf_counter", fake)
    return fake


def _fit(clock: Clock, model: Classifier, **kwargs: Any) -> MemoryLogger:
    logger = MemoryLogger()
    monitor = ThroughputMonitor(lambda batch: batch[0].size(0), window_size=2)
    trainer = trainkit.Trainer(
        log_every_n_steps=2,
        callbacks=[Tick(clock), monitor],
        **{**QUIET, "logger": logger, "num_sanity_val_steps": 0, **kwargs},
    )
    trainer.fit(model, loader(DATA, 8), loader(DATA, 8))
    return logger


def test_training_and_validation_rates(clock: Clock) -> None:
    logger = _fit(clock, Counted(), max_steps=6, val_check_interval=3, limit_val_batches=4)
    train = [row for row in logger.rows if "train/time" in row]
    # Steps 2, 4, 6 log; validation (after batch 3) does not count as training time.
    assert [row["train/time"] for row in train] == [1.0, 2.0, 3.0]
    assert [row["train/samples"] for row in train] == [16, 32, 48]
    for row in train:
        assert row["train/device/batches_per_sec"] == pytest.approx(2.0)
        assert row["train/device/samples_per_sec"] == pytest.approx(16.0)
        assert row["train/device/flops_per_sec"] == pytest.approx(200.0)
        assert row["epoch"] == 0
        # One process: no job-wide rates; a CPU: no MFU.
        assert "train/samples_per_sec" not in row and "train/device/mfu" not in row
    validate = [row for row in logger.rows if "validate/time" in row]
    # Two validations of 4 batches; every 2nd batch logs.
    assert [row["validate/batches"] for row in validate] == [2, 4, 2, 4]
    assert all(row["validate/device/batches_per_sec"] == pytest.approx(4.0) for row in validate)


def test_only_whole_accumulation_windows_are_logged(clock: Clock) -> None:
    logger = _fit(clock, Counted(), max_steps=4, accumulate_grad_batches=2, limit_val_batches=0)
    train = [row for row in logger.rows if "train/time" in row]
    # 4 steps of 2 batches: steps 2 and 4 log, after batches 4 and 8.
    assert [row["train/batches"] for row in train] == [4, 8]
    assert [row["train/time"] for row in train] == [2.0, 4.0]


def test_without_flops_per_batch_warns_and_logs_no_flops(clock: Clock) -> None:
    with pytest.warns(UserWarning, match="flops_per_batch"):
        logger = _fit(clock, Classifier(), max_steps=2, limit_val_batches=0)
    row = next(row for row in logger.rows if "train/time" in row)
    assert "train/device/samples_per_sec" in row
    assert not any("flops" in key for key in row)


def test_test_stage(clock: Clock) -> None:
    logger = MemoryLogger()
    trainer = trainkit.Trainer(
        log_every_n_steps=4,
        callbacks=[Tick(clock), ThroughputMonitor(lambda batch: batch[0].size(0), window_size=3)],
        **{**QUIET, "logger": logger},
    )
    with pytest.warns(UserWarning, match="flops_per_batch"):
        trainer.test(Classifier(), loader(DATA, 8))
    rows = [row for row in logger.rows if "test/batches" in row]
    assert [row["test/batches"] for row in rows] == [4, 8]
    assert all(row["test/device/batches_per_sec"] == pytest.approx(4.0) for row in rows)


def test_unknown_arguments() -> None:
    with pytest.raises(TypeError, match="window_size and separator"):
        ThroughputMonitor(len, windowsize=3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_on_a_gpu_rates_are_positive() -> None:
    logger = MemoryLogger()
    trainer = trainkit.Trainer(
        max_steps=8,
        log_every_n_steps=4,
        callbacks=[ThroughputMonitor(lambda batch: batch[0].size(0), window_size=4)],
        **{**QUIET, "logger": logger, "accelerator": "cuda", "devices": 1},
    )
    trainer.fit(Counted(), loader(DATA, 8))
    rows = [row for row in logger.rows if "train/device/samples_per_sec" in row]
    assert rows and all(row["train/device/samples_per_sec"] > 0 for row in rows)
