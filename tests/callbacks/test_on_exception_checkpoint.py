"""OnExceptionCheckpoint: a fit that raises leaves dirpath/filename.ckpt, which resumes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks.on_exception_checkpoint import OnExceptionCheckpoint

DATA = blobs(64, seed=3)  # 8 batches of 8


class Failing(Classifier):
    def __init__(self, fail_at: int | None) -> None:
        super().__init__()
        self.fail_at = fail_at

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if self.trainer.global_step == self.fail_at:
            raise RuntimeError("boom")
        return super().training_step(batch, batch_idx)


def _fit(folder: Path, fail_at: int | None, ckpt: str | None = None) -> trainkit.Trainer:
    torch.manual_seed(0)
    trainer = trainkit.Trainer(
        max_epochs=2, default_root_dir=folder, callbacks=[OnExceptionCheckpoint(folder)], **QUIET
    )
    trainer.fit(Failing(fail_at), loader(DATA, 8), ckpt_path=ckpt)
    return trainer


def test_exception_saves_a_checkpoint_that_resumes(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"):
        _fit(tmp_path, fail_at=11)
    file = tmp_path / "on_exception.ckpt"
    saved = trainkit.checkpoint.files.load(file)
    assert saved["global_step"] == 11
    # ckpt_path="last" finds it; the resumed run ends where an unbroken one does.
    trainer = _fit(tmp_path, fail_at=None, ckpt="last")
    assert trainer.ckpt_path == str(file)
    assert trainer.global_step == 16
    # A fit that finished removes the file: it is older than the run's end.
    assert not file.exists()


def test_existing_file_is_replaced_and_a_finished_fit_removes_it(tmp_path: Path) -> None:
    file = tmp_path / "on_exception.ckpt"
    file.write_text("an older run's file")
    with pytest.raises(RuntimeError):
        _fit(tmp_path, fail_at=3)
    assert trainkit.checkpoint.files.load(file)["global_step"] == 3
    _fit(tmp_path, fail_at=None)
    assert not file.exists()


def test_validate_neither_writes_nor_removes(tmp_path: Path) -> None:
    class FailingValidation(Classifier):
        def validation_step(self, batch: Any, batch_idx: int) -> None:
            raise RuntimeError("validation failed")

    callback = OnExceptionCheckpoint(tmp_path, filename="crash")
    assert callback.ckpt_path == str(tmp_path / "crash.ckpt")
    trainer = trainkit.Trainer(callbacks=[callback], **QUIET)
    with pytest.raises(RuntimeError):
        trainer.validate(FailingValidation(), loader(DATA, 8))
    assert not (tmp_path / "crash.ckpt").exists()
    (tmp_path / "crash.ckpt").write_text("kept")
    trainer.validate(Classifier(), loader(DATA, 8))
    assert (tmp_path / "crash.ckpt").read_text() == "kept"


def test_empty_filename() -> None:
    with pytest.raises(ValueError, match="filename cannot be empty"):
        OnExceptionCheckpoint(".", filename="")


@pytest.mark.parametrize("kind", ["on_exception", "own"])
def test_a_checkpoint_callback_of_ones_own_replaces_the_default(tmp_path: Path, kind: str) -> None:
    # As in Lightning: the Trainer adds its ModelCheckpoint only when no Checkpoint is
    # given, so a run that chose its own saving writes no epoch files or last.ckpt.
    class Own(trainkit.callbacks.base.Checkpoint):
        pass

    given = OnExceptionCheckpoint(tmp_path) if kind == "on_exception" else Own()
    options = {**QUIET, "enable_checkpointing": True}
    trainer = trainkit.Trainer(
        max_epochs=1, default_root_dir=tmp_path, callbacks=[given], **options
    )
    trainer.fit(Failing(None), loader(DATA, 8))
    assert not any(type(c).__name__ == "ModelCheckpoint" for c in trainer.callbacks)
    assert list(tmp_path.rglob("*.ckpt")) == []
    default = trainkit.Trainer(max_epochs=1, default_root_dir=tmp_path / "default", **options)
    assert default.checkpoint_callback is not None  # without one, the default is added
