"""Checkpoint, the base of checkpointing callbacks, and ModelCheckpoint's every_n_epochs and
file_exists, as Lightning documents them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import (
    Callback,
    Checkpoint,
    EarlyStopping,
    ModelCheckpoint,
    OnExceptionCheckpoint,
)

SAVING = {**QUIET, "enable_checkpointing": True}


class MarksEpochs(Classifier):
    """Logs ``epoch_mark`` (the epoch, from 1) in its own ``on_train_epoch_end``."""

    def on_train_epoch_end(self) -> None:
        self.log("epoch_mark", float(self.current_epoch + 1))


class Recorder:
    """Records what ``epoch_mark`` is when its ``on_train_epoch_end`` runs."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
        value = trainer.callback_metrics.get("epoch_mark")
        self.seen.append(None if value is None else float(value))


class MyCheckpoint(Recorder, Checkpoint):
    pass


class PlainCallback(Recorder, Callback):
    pass


def test_the_checkpoint_callbacks_are_checkpoints(tmp_path: Path) -> None:
    assert issubclass(Checkpoint, Callback)
    assert isinstance(ModelCheckpoint(), Checkpoint)
    assert isinstance(OnExceptionCheckpoint(tmp_path), Checkpoint)
    assert not isinstance(EarlyStopping(monitor="val/loss"), Checkpoint)


def test_lightning_paths_serve_the_same_class() -> None:
    from trainkit.lightning.callbacks import Checkpoint as FromPackage
    from trainkit.lightning.callbacks.checkpoint import Checkpoint as FromModule

    assert FromPackage is Checkpoint and FromModule is Checkpoint


def test_a_users_checkpoint_sees_what_the_module_logged_at_epoch_end() -> None:
    # As Lightning runs checkpoint callbacks: their epoch-end hooks after the Module's.
    mine, plain = MyCheckpoint(), PlainCallback()
    trainer = trainkit.Trainer(max_epochs=2, callbacks=[mine, plain], **QUIET)
    trainer.fit(MarksEpochs(), loader(blobs(32), 16))
    assert mine.seen == [1.0, 2.0]
    assert plain.seen == [None, 1.0]  # a plain callback runs before the Module's hook


def test_a_configured_checkpoint_is_placed_after_the_other_callbacks() -> None:
    class Other(Callback):
        pass

    class Configures(Classifier):
        def configure_callbacks(self) -> list[Callback]:
            return [MyCheckpoint(), Other()]

    trainer = trainkit.Trainer(max_epochs=1, callbacks=[Other()], **QUIET)
    trainer.fit(Configures(), loader(blobs(32), 16))
    names = [type(callback).__name__ for callback in trainer.callbacks]
    assert names[-2:] == ["Other", "MyCheckpoint"]


@pytest.mark.parametrize(
    ("arguments", "every"),
    [
        ({}, 1),  # no schedule given: every epoch
        ({"every_n_epochs": 3}, 3),
        ({"every_n_epochs": 0}, 0),
        ({"every_n_train_steps": 5}, 0),
        ({"train_time_interval": 60.0}, 0),
    ],
)
def test_every_n_epochs_says_the_epoch_schedule(arguments: dict[str, Any], every: int) -> None:
    assert ModelCheckpoint(**arguments).every_n_epochs == every


def test_every_n_epochs_is_the_schedule_it_saves_on(tmp_path: Path) -> None:
    callback = ModelCheckpoint(dirpath=tmp_path, every_n_epochs=2, save_top_k=-1)
    trainer = trainkit.Trainer(max_epochs=4, callbacks=[callback], **SAVING)
    trainer.fit(Classifier(), loader(blobs(32), 16))
    assert callback.every_n_epochs == 2
    assert sorted(p.name for p in tmp_path.glob("*.ckpt")) == [
        "epoch=1-step=4.ckpt",
        "epoch=3-step=8.ckpt",
    ]


def test_file_exists_tells_whether_a_checkpoint_is_there(tmp_path: Path) -> None:
    callback = ModelCheckpoint(dirpath=tmp_path)
    trainer = trainkit.Trainer(max_epochs=1, callbacks=[callback], **SAVING)
    trainer.fit(Classifier(), loader(blobs(32), 16))
    assert callback.file_exists(callback.best_model_path, trainer) is True
    assert callback.file_exists(tmp_path / "missing.ckpt", trainer) is False


class _Rank1Trainer:
    """A process other than rank 0, whose strategy hands out rank 0's answer."""

    is_global_zero = False

    def __init__(self, rank_zero_answer: bool) -> None:
        self.sent: list[Any] = []
        self.strategy = self
        self._answer = rank_zero_answer

    def broadcast(self, obj: Any, src: int = 0) -> Any:
        self.sent.append(obj)
        return self._answer


def test_file_exists_answers_rank_zeros_finding_on_every_process(tmp_path: Path) -> None:
    here = tmp_path / "here.ckpt"
    torch.save({}, here)
    callback = ModelCheckpoint(dirpath=tmp_path)
    # Rank 0 found no file, though this process sees one: every process agrees on "no".
    rank_one = _Rank1Trainer(rank_zero_answer=False)
    trainer: Any = rank_one
    assert callback.file_exists(here, trainer) is False
    assert len(rank_one.sent) == 1  # one broadcast, whatever this process saw
    trainer = _Rank1Trainer(rank_zero_answer=True)
    assert callback.file_exists(tmp_path / "gone.ckpt", trainer) is True
