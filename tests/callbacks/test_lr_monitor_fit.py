"""LearningRateMonitor inside a real fit writes the LR sequence to the logger."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import Classifier, blobs, loader
from trainkit.callbacks import LearningRateMonitor
from trainkit.loggers import CSVLogger


class Halving(Classifier):
    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=1.0)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
        config = {"scheduler": scheduler, "interval": "step"}
        return {"optimizer": optimizer, "lr_scheduler": config}


def test_step_interval_learning_rates_reach_the_csv(tmp_path: Path) -> None:
    monitor = LearningRateMonitor()
    trainer = trainkit.Trainer(
        max_epochs=1,
        log_every_n_steps=1,
        logger=CSVLogger(tmp_path),
        callbacks=[monitor],
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        accelerator="cpu",
    )
    trainer.fit(Halving(), loader(blobs(128), 32))  # 4 steps
    with open(Path(trainer.log_dir) / "metrics.csv", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r.get("lr-SGD")]
    assert [(int(r["step"]), float(r["lr-SGD"])) for r in rows] == [
        (0, 1.0),
        (1, 0.5),
        (2, 0.25),
        (3, 0.125),
    ]
    assert monitor.lrs["lr-SGD"] == pytest.approx([1.0, 0.5, 0.25, 0.125])
