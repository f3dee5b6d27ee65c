"""TQDMProgressBar's log lines (timing, stable metric order) and its cleared sanity bar."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import trainkit
from tests.callbacks.test_progress import MODULE, FakeTrainer, run_validation
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import progress
from trainkit.callbacks.progress import TQDMProgressBar, format_duration, format_rate


class Clock:
    """A ``time.monotonic`` the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(progress.time, "monotonic", fake)
    return fake


def test_a_plain_line_has_the_rate_the_elapsed_time_and_the_eta(
    clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    bar = TQDMProgressBar(print_every_n_steps=10, plain=True, timing=True)
    trainer = FakeTrainer(num_training_batches=100)
    bar.setup(trainer, MODULE, "fit")
    bar.on_train_epoch_start(trainer, MODULE)
    for batch_idx in range(20):
        clock.now += 0.25  # 4 batches a second
        bar.on_train_batch_end(trainer, MODULE, None, None, batch_idx)
    clock.now += 0.5
    bar.on_train_epoch_end(trainer, MODULE)
    lines = capsys.readouterr().out.splitlines()
    # 10 batches in 2.5 s; 90 left at that rate take 22.5 s.
    metrics = " | loss 0.1235 | acc 0.9"
    assert lines[0] == "epoch 0 | step 10/100 | 4 it/s | elapsed 2.5s | eta 22.5s" + metrics
    assert lines[1] == "epoch 0 | step 20/100 | 4 it/s | elapsed 5.0s | eta 20.0s" + metrics
    assert lines[2] == "epoch 0 | end (20 batches) | 3.64 it/s | elapsed 5.5s" + metrics


def test_a_resumed_epoch_counts_only_the_batches_it_ran(
    clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    bar = TQDMProgressBar(print_every_n_steps=10, plain=True, timing=True)
    trainer: Any = FakeTrainer(num_training_batches=100)
    trainer.state = SimpleNamespace(batch_idx=60)  # resumed after batch 60
    bar.setup(trainer, MODULE, "fit")
    bar.on_train_epoch_start(trainer, MODULE)
    for batch_idx in range(60, 70):
        clock.now += 0.5
        bar.on_train_batch_end(trainer, MODULE, None, None, batch_idx)
    # 10 batches (not 70) in 5 s; 30 left.
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("epoch 0 | step 70/100 | 2 it/s | elapsed 5.0s | eta 15.0s |")


def test_an_epoch_of_unknown_length_has_no_eta(
    clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    bar = TQDMProgressBar(print_every_n_steps=2, plain=True, timing=True)
    trainer = FakeTrainer(num_training_batches=float("inf"))
    bar.setup(trainer, MODULE, "fit")
    bar.on_train_epoch_start(trainer, MODULE)
    for batch_idx in range(2):
        clock.now += 0.1
        bar.on_train_batch_end(trainer, MODULE, None, None, batch_idx)
    assert capsys.readouterr().out.startswith("epoch 0 | step 2 | 10 it/s | elapsed 0.2s | loss")


def test_evaluation_lines_have_the_rate_and_elapsed_time(
    clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    bar = TQDMProgressBar(plain=True, timing=True)
    trainer = FakeTrainer()
    bar.setup(trainer, MODULE, "fit")
    bar.on_validation_start(trainer, MODULE)
    for batch_idx in range(4):
        clock.now += 0.5
        bar.on_validation_batch_end(trainer, MODULE, None, None, batch_idx)
    bar.on_validation_end(trainer, MODULE)
    assert capsys.readouterr().out == "validation | epoch 0 | 2 it/s | elapsed 2.0s | acc 0.9\n"


def test_plain_lines_read_no_clock_per_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    # The timing costs nothing between lines: the clock is read at epoch start and per line.
    reads = []
    monkeypatch.setattr(progress.time, "monotonic", lambda: reads.append(1) or 5.0)
    bar = TQDMProgressBar(print_every_n_steps=50, plain=True, timing=True)
    trainer = FakeTrainer(num_training_batches=1000)
    bar.setup(trainer, MODULE, "fit")
    bar.on_train_epoch_start(trainer, MODULE)
    for batch_idx in range(1000):
        bar.on_train_batch_end(trainer, MODULE, None, None, batch_idx)
    assert len(reads) == 1 + 1000 // 50


def test_durations_and_rates_read_like_tqdm() -> None:
    assert format_duration(0.04) == "0.0s"
    assert format_duration(59.94) == "59.9s"
    assert format_duration(61) == "1m01s"
    assert format_duration(3 * 3600 + 5) == "3h00m05s"
    assert format_rate(30, 2.0) == "15 it/s"
    assert format_rate(1, 4.0) == "4 s/it"
    assert format_rate(0, 1.0) == "? it/s"


def test_the_trainers_own_bar_prints_timing_in_a_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    options = {**QUIET, "enable_progress_bar": True}
    trainer = trainkit.Trainer(max_epochs=1, default_root_dir=tmp_path, **options)
    bar = trainer.progress_bar_callback
    assert bar is not None and bar.timing
    trainer.fit(Classifier(), loader(blobs(96), 32))
    out = capsys.readouterr().out  # not a terminal: plain lines
    timing = r"[\d.]+ (it/s|s/it) \| elapsed [\d.]+s"
    assert re.search(r"^epoch 0 \| end \(3 batches\) \| " + timing + r" \|", out, re.M)


class Shuffled(Classifier):
    """Logs the same progress-bar metrics in an order its argument picks."""

    def __init__(self, names: list[str]) -> None:
        super().__init__()
        self.names = names

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = super().training_step(batch, batch_idx)
        for i, name in enumerate(self.names):
            self.log(name, float(i), prog_bar=True)
        return loss


def test_metric_columns_keep_their_order_between_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    columns = []
    for names in (["zeta", "alpha", "mid"], ["mid", "zeta", "alpha"]):
        bar = TQDMProgressBar(plain=True, print_every_n_steps=1)
        trainer = trainkit.Trainer(max_steps=2, callbacks=[bar], default_root_dir=tmp_path, **QUIET)
        trainer.fit(Shuffled(names), loader(blobs(64), 32))
        line = capsys.readouterr().out.splitlines()[0]
        columns.append([part.split()[0] for part in line.split(" | ")[2:]])
    assert columns[0] == columns[1] == ["alpha", "mid", "train/loss", "zeta"]


def screen(output: str) -> list[str]:
    """What a terminal shows after ``output``: carriage returns overwrite, ESC[A moves up."""
    rows: list[list[str]] = [[]]
    row = col = 0
    for token in re.split(r"(\x1b\[[0-9;]*[A-Za-z]|\r|\n)", output):
        if token == "\r":
            col = 0
        elif token == "\n":
            row, col = row + 1, 0
            if row == len(rows):
                rows.append([])
        elif token == "\x1b[A":
            row = max(row - 1, 0)
        elif token.startswith("\x1b"):
            continue
        else:
            line = rows[row]
            line.extend(" " * (col + len(token) - len(line)))
            line[col : col + len(token)] = token
            col += len(token)
    return ["".join(line).rstrip() for line in rows]


def test_the_sanity_check_bar_is_cleared_when_it_ends(capsys: pytest.CaptureFixture[str]) -> None:
    bar = TQDMProgressBar(plain=False)
    trainer = FakeTrainer(num_training_batches=3)
    bar.setup(trainer, MODULE, "fit")
    trainer.sanity_checking = True
    run_validation(bar, trainer, batches=2)
    out = capsys.readouterr().out
    assert "Sanity Checking" in out  # it was drawn
    assert not any(screen(out)), screen(out)  # and nothing of it is left


def test_a_fit_in_a_terminal_leaves_no_sanity_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bar = TQDMProgressBar(plain=False)
    trainer = trainkit.Trainer(max_epochs=1, callbacks=[bar], default_root_dir=tmp_path, **QUIET)
    trainer.fit(Classifier(), loader(blobs(64), 32), loader(blobs(64), 32))
    shown = "\n".join(screen(capsys.readouterr().out))
    assert "Sanity Checking" not in shown
    assert "Epoch 0: 100%" in shown
