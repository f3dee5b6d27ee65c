"""Timer: stage times, stopping after a duration, and the duration carried across a resume."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import ModelCheckpoint
from trainkit.callbacks import timer as timer_module
from trainkit.callbacks.timer import Timer

DATA = blobs(64, seed=3)  # 8 batches of 8


class FakeClock:
    """``time.monotonic`` for the Timer: moves only when a test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Tick(trainkit.Callback):
    def __init__(self, clock: FakeClock, seconds: float) -> None:
        self.clock, self.seconds = clock, seconds

    def on_train_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
        self.clock.now += self.seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(timer_module.time, "monotonic", fake)
    return fake


def _fit(timer: Timer, clock: FakeClock, max_epochs: int = 3, **kwargs: Any) -> trainkit.Trainer:
    torch.manual_seed(0)
    # Tick runs before the Timer, so the Timer sees the batch's time.
    trainer = trainkit.Trainer(
        max_epochs=max_epochs, callbacks=[Tick(clock, 10.0), timer], **{**QUIET, **kwargs}
    )
    trainer.fit(Classifier(), loader(DATA, 8))
    return trainer


@pytest.mark.parametrize(
    "duration", ["00:00:00:35", timedelta(seconds=35), {"seconds": 35}], ids=str
)
def test_step_interval_stops_at_the_first_batch_past_the_duration(
    clock: FakeClock, duration: Any
) -> None:
    timer = Timer(duration=duration, verbose=False)
    trainer = _fit(timer, clock)
    assert trainer.global_step == 4  # 40 s >= 35 s after the 4th batch
    assert timer.time_elapsed("train") == 40.0
    assert timer.time_remaining() == -5.0
    assert timer.start_time("train") == 1000.0 and timer.end_time("train") == 1040.0


def test_epoch_interval_finishes_the_epoch(clock: FakeClock) -> None:
    trainer = _fit(Timer(duration="00:00:00:35", interval="epoch", verbose=False), clock)
    assert trainer.global_step == 8 and trainer.current_epoch == 1


def test_without_duration_it_only_measures(clock: FakeClock) -> None:
    timer = Timer()
    trainer = _fit(timer, clock, max_epochs=1)
    assert trainer.global_step == 8
    assert timer.time_elapsed() == 80.0 and timer.time_remaining() is None


def test_validate_and_test_are_timed(clock: FakeClock) -> None:
    class SlowEval(trainkit.Callback):
        def on_validation_batch_end(self, *args: Any) -> None:
            clock.now += 1.0

        def on_test_batch_end(self, *args: Any) -> None:
            clock.now += 2.0

    timer = Timer()
    trainer = trainkit.Trainer(max_epochs=1, callbacks=[SlowEval(), timer], **QUIET)
    model = Classifier()
    trainer.validate(model, loader(DATA, 16))  # 4 batches
    trainer.test(model, loader(DATA, 32))  # 2 batches
    assert timer.time_elapsed("validate") == 4.0
    assert timer.time_elapsed("test") == 4.0
    assert timer.time_elapsed("train") == 0.0 and timer.start_time("train") is None


def test_state_holds_each_stage_and_a_resume_counts_the_time_before(
    clock: FakeClock, tmp_path: Path
) -> None:
    # The first run is cut after 2 steps (20 s); the resumed one may train 15 s more.
    first = Timer(duration="00:00:00:35", verbose=False)
    run_kwargs: dict[str, Any] = {"default_root_dir": tmp_path, "enable_checkpointing": True}
    trainer = trainkit.Trainer(
        max_steps=2,
        callbacks=[
            Tick(clock, 10.0),
            first,
            ModelCheckpoint(every_n_train_steps=1, save_last=True),
        ],
        **{**QUIET, **run_kwargs},
    )
    trainer.fit(Classifier(), loader(DATA, 8))
    saved = trainkit.checkpoint.files.load(tmp_path / "checkpoints" / "last.ckpt")
    elapsed = saved["callbacks"]["Timer"]["time_elapsed"]
    assert set(elapsed) == {"train", "sanity_check", "validate", "test", "predict"}
    assert elapsed["train"] == 20.0
    resumed = Timer(duration="00:00:00:35", verbose=False)
    trainer = trainkit.Trainer(
        max_epochs=3,
        callbacks=[
            Tick(clock, 10.0),
            resumed,
            ModelCheckpoint(every_n_train_steps=1, save_last=True),
        ],
        **{**QUIET, **run_kwargs},
    )
    trainer.fit(Classifier(), loader(DATA, 8), ckpt_path="last")
    assert trainer.global_step == 4  # 20 s before + 2 batches = 40 s >= 35 s
    assert resumed.time_elapsed() == 40.0


def test_resume_with_time_left_is_exact(tmp_path: Path) -> None:
    def run(max_steps: int, ckpt: str | None) -> Classifier:
        torch.manual_seed(0)
        model = Classifier()
        trainer = trainkit.Trainer(
            max_steps=max_steps,
            seed=0,
            default_root_dir=tmp_path,
            callbacks=[
                Timer(duration={"days": 1}),
                ModelCheckpoint(every_n_train_steps=1, save_last=True),
            ],
            **{**QUIET, "enable_checkpointing": True},
        )
        trainer.fit(model, loader(DATA, 8, shuffle=True), ckpt_path=ckpt)
        return model

    full = run(12, None)
    for file in (tmp_path / "checkpoints").iterdir():
        file.unlink()
    run(5, None)
    resumed = run(12, "last")
    assert all(
        torch.equal(a, b) for a, b in zip(full.parameters(), resumed.parameters(), strict=True)
    )


def test_bad_arguments_say_the_format() -> None:
    with pytest.raises(ValueError, match="DD:HH:MM:SS"):
        Timer(duration="1:00:00")
    with pytest.raises(ValueError, match=r"'step'.*'epoch'"):
        Timer(interval="batch")
    with pytest.raises(ValueError, match="timedelta's arguments"):
        Timer(duration={"hourz": 1})
    with pytest.raises(ValueError, match="unknown stage"):
        Timer().time_elapsed("training")
