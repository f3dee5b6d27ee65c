"""ModelSummary as Lightning documents it: rows by depth, parameter totals, module modes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import ModelSummary
from trainkit.callbacks.model_summary import summarize


class Tower(trainkit.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Dropout())
        self.head = torch.nn.Linear(8, 2)
        self.net[2].eval()
        self.head.requires_grad_(False)


def _rows(text: str) -> list[list[str]]:
    lines = [line for line in text.splitlines() if "|" in line][1:]
    return [[cell.strip() for cell in line.split("|")][1:4] for line in lines]


def test_depth_one_lists_direct_children_with_counts() -> None:
    text = summarize(Tower())
    assert _rows(text) == [["net", "Sequential", "40"], ["head", "Linear", "18"]]
    assert "40        Trainable params" in text
    assert "18        Non-trainable params" in text
    assert "58        Total params" in text
    assert "4         Modules in train mode" in text
    assert "1         Modules in eval mode" in text


def test_depth_minus_one_lists_every_layer() -> None:
    names = [row[0] for row in _rows(summarize(Tower(), max_depth=-1))]
    assert names == ["net", "net.0", "net.1", "net.2", "head"]


def test_callback_prints_the_summary_at_fit_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    options = {**QUIET, "enable_model_summary": True}
    trainer = trainkit.Trainer(
        max_epochs=1, callbacks=[ModelSummary(max_depth=-1)], default_root_dir=tmp_path, **options
    )
    trainer.fit(Classifier(), loader(blobs(32), 32))
    out = capsys.readouterr().out
    assert "net.0" in out and "Total params" in out


def test_max_depth_zero_prints_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trainer = trainkit.Trainer(
        max_epochs=1, callbacks=[ModelSummary(max_depth=0)], default_root_dir=tmp_path, **QUIET
    )
    trainer.fit(Classifier(), loader(blobs(32), 32))
    assert "Total params" not in capsys.readouterr().out
