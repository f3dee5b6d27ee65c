"""ModelCheckpoint: names, schedules, top-k, last.ckpt, and never touching others' files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import ModelCheckpoint
from trainkit.checkpoint import load

SCORES = [0.5, 0.3, 0.9, 0.1, 0.4, 0.2]


class Scored(Classifier):
    """Logs a scripted val/score, one per epoch."""

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val/score", SCORES[self.current_epoch])


def _fit(
    tmp_path: Path, callback: ModelCheckpoint, epochs: int = 6, **kwargs: Any
) -> trainkit.Trainer:
    trainer = trainkit.Trainer(
        max_epochs=epochs,
        callbacks=[callback],
        default_root_dir=tmp_path,
        num_sanity_val_steps=0,
        **QUIET,
        **kwargs,
    )
    trainer.fit(Scored(), loader(blobs(64), 32), loader(blobs(32), 32))
    return trainer


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_top_k_keeps_the_best_scores_and_last(tmp_path: Path) -> None:
    callback = ModelCheckpoint(
        monitor="val/score", mode="min", save_top_k=2, filename="{epoch}-{val/score:.2f}"
    )
    _fit(tmp_path, callback)
    folder = tmp_path / "checkpoints"
    assert _names(folder) == [
        "epoch=3-val_score=0.10.ckpt",
        "epoch=5-val_score=0.20.ckpt",
        "last.ckpt",
    ]
    assert callback.best_model_score == pytest.approx(0.1)
    assert Path(callback.best_model_path).name == "epoch=3-val_score=0.10.ckpt"
    # last.ckpt is the newest state (after epoch 5), a complete checkpoint of its own.
    assert load(folder / "last.ckpt")["loop"]["epoch"] == 6


def test_mode_max_and_keep_all(tmp_path: Path) -> None:
    callback = ModelCheckpoint(monitor="val/score", mode="max", save_top_k=-1, save_last=False)
    _fit(tmp_path, callback)
    assert len(list((tmp_path / "checkpoints").iterdir())) == 6
    assert callback.best_model_score == pytest.approx(0.9)


def test_without_monitor_the_newest_are_kept(tmp_path: Path) -> None:
    callback = ModelCheckpoint(every_n_train_steps=1, save_top_k=2)
    _fit(tmp_path, callback, epochs=2)  # 2 steps an epoch
    assert _names(tmp_path / "checkpoints") == [
        "epoch=1-step=3.ckpt",
        "epoch=1-step=4.ckpt",
        "last.ckpt",
    ]


def test_every_n_epochs(tmp_path: Path) -> None:
    callback = ModelCheckpoint(every_n_epochs=2, save_top_k=-1, save_last=False)
    _fit(tmp_path, callback)
    assert _names(tmp_path / "checkpoints") == [
        "epoch=1-step=4.ckpt",
        "epoch=3-step=8.ckpt",
        "epoch=5-step=12.ckpt",
    ]


def test_train_time_interval(tmp_path: Path) -> None:
    callback = ModelCheckpoint(train_time_interval=1e-9, save_top_k=-1, save_last=False)
    _fit(tmp_path, callback, epochs=1)
    # Due after every step; saved at every resume point (after batch 0 and after the epoch).
    assert _names(tmp_path / "checkpoints") == ["epoch=0-step=1.ckpt", "epoch=0-step=2.ckpt"]


def test_a_file_another_run_wrote_is_never_overwritten_or_deleted(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    theirs = folder / "epoch=0-step=2.ckpt"
    theirs.write_bytes(b"someone else's file")
    callback = ModelCheckpoint(save_top_k=1)
    _fit(tmp_path, callback, epochs=2)
    assert theirs.read_bytes() == b"someone else's file"
    assert _names(folder) == ["epoch=0-step=2.ckpt", "epoch=1-step=4.ckpt", "last.ckpt"]


def test_same_name_twice_gets_a_version_suffix_for_foreign_files(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / "fixed.ckpt").write_bytes(b"foreign")
    callback = ModelCheckpoint(filename="fixed", save_top_k=-1, save_last=False)
    _fit(tmp_path, callback, epochs=1)
    assert _names(folder) == ["fixed-v1.ckpt", "fixed.ckpt"]


def test_missing_monitor_warns_and_still_saves_last(tmp_path: Path) -> None:
    callback = ModelCheckpoint(monitor="val/typo")
    with pytest.warns(UserWarning, match="found no value for it"):
        _fit(tmp_path, callback, epochs=1)
    assert _names(tmp_path / "checkpoints") == ["last.ckpt"]


def test_ckpt_path_last_without_a_checkpoint_starts_fresh(tmp_path: Path) -> None:
    trainer = trainkit.Trainer(max_epochs=1, default_root_dir=tmp_path, **QUIET)
    with pytest.warns(UserWarning, match="no last.ckpt found"):
        trainer.fit(Classifier(), loader(blobs(64), 32), ckpt_path="last")
    assert trainer.global_step == 2


def test_resume_continues_training_from_last(tmp_path: Path) -> None:
    def run(epochs: int, ckpt: str | None) -> Classifier:
        torch.manual_seed(0)
        model = Classifier()
        trainer = trainkit.Trainer(
            max_epochs=epochs,
            default_root_dir=tmp_path,
            seed=0,
            callbacks=[ModelCheckpoint(every_n_train_steps=1)],
            **QUIET,
        )
        trainer.fit(model, loader(blobs(96), 32, shuffle=True), ckpt_path=ckpt)
        return model

    full = run(3, None)
    os.remove(tmp_path / "checkpoints" / "last.ckpt")
    for file in (tmp_path / "checkpoints").iterdir():
        file.unlink()
    run(1, None)
    resumed = run(3, "last")
    assert all(
        torch.equal(a, b) for a, b in zip(full.parameters(), resumed.parameters(), strict=True)
    )


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"mode='average'\) must be \"min\" or \"max\""):
        ModelCheckpoint(mode="average")
    with pytest.raises(ValueError, match="save_top_k=-2"):
        ModelCheckpoint(save_top_k=-2)
    with pytest.raises(ValueError, match="takes one of every_n_train_steps"):
        ModelCheckpoint(every_n_train_steps=2, every_n_epochs=1)
