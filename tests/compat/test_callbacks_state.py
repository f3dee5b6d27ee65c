"""Callback state in checkpoints (state_key, state_dict), on_exception, checkpoint hooks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import Callback, ModelCheckpoint
from trainkit.checkpoint.files import load


class Counter(Callback):
    """Counts training batches; its state goes into checkpoints."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.count = 0
        self.loaded: dict[str, Any] | None = None
        self.saw_checkpoint_keys: list[str] = []

    @property
    def state_key(self) -> str:
        return self._generate_state_key(what=self.what)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, *args: Any) -> None:
        self.count += 1

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.loaded = state_dict
        self.count = state_dict["count"]

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        checkpoint["counter_note"] = f"{self.what}:{self.count}"

    def on_load_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        self.saw_checkpoint_keys = sorted(checkpoint)


def _trainer(tmp_path: Path, callbacks: list[Callback], epochs: int) -> trainkit.Trainer:
    options = {**QUIET, "enable_checkpointing": True}
    return trainkit.Trainer(
        max_epochs=epochs, callbacks=callbacks, default_root_dir=tmp_path, **options
    )


def test_state_key_is_the_class_name_plus_arguments() -> None:
    assert Counter("batches").state_key == "Counter{'what': 'batches'}"
    assert Callback().state_key == "Callback"


def test_states_are_saved_under_their_keys_and_restored_on_resume(tmp_path: Path) -> None:
    first, second = Counter("a"), Counter("b")
    _trainer(tmp_path, [first, second], epochs=1).fit(Classifier(), loader(blobs(64), 32))
    checkpoint = load(tmp_path / "checkpoints" / "last.ckpt")
    assert checkpoint["callbacks"]["Counter{'what': 'a'}"] == {"count": 2}
    assert checkpoint["callbacks"]["Counter{'what': 'b'}"] == {"count": 2}
    assert checkpoint["counter_note"] == "b:2"  # on_save_checkpoint may add entries

    resumed = Counter("a")
    trainer = _trainer(tmp_path, [resumed, ModelCheckpoint()], epochs=2)
    trainer.fit(Classifier(), loader(blobs(64), 32), ckpt_path="last")
    assert resumed.loaded == {"count": 2}
    assert resumed.count == 4
    assert "state_dict" in resumed.saw_checkpoint_keys  # the full checkpoint dict
    assert "callbacks" in resumed.saw_checkpoint_keys


def test_on_exception_receives_the_exception() -> None:
    seen: list[BaseException] = []

    class Watch(Callback):
        def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
            seen.append(exception)

    class Failing(Classifier):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            raise ValueError("boom")

    trainer = trainkit.Trainer(max_epochs=1, callbacks=[Watch()], **QUIET)
    with pytest.raises(ValueError, match="boom"):
        trainer.fit(Failing(), loader(blobs(32), 32))
    assert len(seen) == 1 and str(seen[0]) == "boom"


def test_the_trainer_can_find_its_checkpoint_early_stopping_and_bar_callbacks() -> None:
    from trainkit.callbacks import EarlyStopping, TQDMProgressBar
    from trainkit.callbacks.defaults import (
        checkpoint_callbacks,
        early_stopping_callbacks,
        progress_bar_callback,
    )

    checkpoint, stopper, bar = ModelCheckpoint(), EarlyStopping("val_loss"), TQDMProgressBar()
    callbacks: list[Callback] = [Counter("x"), checkpoint, stopper, bar]
    assert checkpoint_callbacks(callbacks) == [checkpoint]
    assert early_stopping_callbacks(callbacks) == [stopper]
    assert progress_bar_callback(callbacks) is bar
    assert progress_bar_callback([]) is None
