"""DeviceStatsMonitor: Lightning's metric names, on the logging steps, and its errors."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, MemoryLogger, blobs, loader
from trainkit.callbacks import device_stats
from trainkit.callbacks.device_stats import DeviceStatsMonitor

DATA = blobs(64, seed=3)  # 8 batches of 8
CPU = ("cpu_percent", "cpu_vm_percent", "cpu_swap_percent")


def _fit(monitor: DeviceStatsMonitor, **kwargs: Any) -> MemoryLogger:
    logger = MemoryLogger()
    trainer = trainkit.Trainer(
        max_steps=6,
        log_every_n_steps=2,
        limit_val_batches=4,
        val_check_interval=3,
        callbacks=[monitor],
        **{**QUIET, "logger": logger, **kwargs},
    )
    trainer.fit(Classifier(), loader(DATA, 8), loader(DATA, 8))
    return logger


def _rows(logger: MemoryLogger, hook: str) -> list[dict[str, float]]:
    prefix = f"DeviceStatsMonitor.{hook}/"
    return [row for row in logger.rows if any(key.startswith(prefix) for key in row)]


@pytest.mark.skipif(importlib.util.find_spec("psutil") is None, reason="needs psutil")
def test_cpu_figures_under_lightnings_names_on_logging_steps() -> None:
    logger = _fit(DeviceStatsMonitor())
    for hook in ("on_train_batch_start", "on_train_batch_end"):
        rows = _rows(logger, hook)
        # Steps 2, 4 and 6 are logging steps (log_every_n_steps=2).
        assert len(rows) == 3
        assert set(rows[0]) == {f"DeviceStatsMonitor.{hook}/{name}" for name in CPU}
        assert all(0.0 <= value <= 100.0 for row in rows for value in row.values())
    # Two validations of 4 batches: batches 2 and 4 of each.
    assert len(_rows(logger, "on_validation_batch_start")) == 4
    assert len(_rows(logger, "on_validation_batch_end")) == 4


def test_cpu_stats_false_logs_nothing_on_cpu() -> None:
    logger = _fit(DeviceStatsMonitor(cpu_stats=False))
    assert not any(key.startswith("DeviceStatsMonitor") for row in logger.rows for key in row)


def test_needs_a_logger() -> None:
    trainer = trainkit.Trainer(max_steps=1, callbacks=[DeviceStatsMonitor()], **QUIET)
    with pytest.raises(RuntimeError, match=r"Trainer\(logger=False\)"):
        trainer.fit(Classifier(), loader(DATA, 8))


def test_without_psutil_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_stats, "psutil_available", lambda: False)
    trainer = trainkit.Trainer(
        max_steps=1, callbacks=[DeviceStatsMonitor()], **{**QUIET, "logger": MemoryLogger()}
    )
    with pytest.raises(ModuleNotFoundError, match=r"trainkit\[psutil\]"):
        trainer.fit(Classifier(), loader(DATA, 8))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_cuda_memory_figures() -> None:
    logger = _fit(DeviceStatsMonitor(cpu_stats=True), accelerator="cuda", devices=1)
    row = _rows(logger, "on_train_batch_end")[0]
    prefix = "DeviceStatsMonitor.on_train_batch_end/"
    assert row[prefix + "allocated_bytes.all.current"] > 0
    assert prefix + "reserved_bytes.all.peak" in row
    assert prefix + "cpu_percent" in row
