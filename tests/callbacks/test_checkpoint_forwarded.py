"""A ModelCheckpoint whose hooks a callback of the user's forwards saves where Lightning's does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.callbacks import ModelCheckpoint
from trainkit.callbacks.base import Checkpoint


class Forwarding(Checkpoint):
    """Holds two ModelCheckpoints and forwards Lightning's hooks to them, by keyword
    (``pl_module=``), as projects' wrappers do."""

    def __init__(self) -> None:
        self.inner = {
            "low": ModelCheckpoint(monitor="val/loss", filename="low-{epoch}"),
            "high": ModelCheckpoint(monitor="val/loss", mode="max", filename="high-{epoch}"),
        }

    def _forward(self, hook: str, trainer: Any, pl_module: Any, **rest: Any) -> None:
        for callback in self.inner.values():
            getattr(callback, hook)(trainer=trainer, pl_module=pl_module, **rest)

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self._forward("setup", trainer, pl_module, stage=stage)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._forward("on_train_epoch_end", trainer, pl_module)


def test_forwarded_checkpoints_save_their_best_files(tmp_path: Path) -> None:
    wrapper = Forwarding()
    options = {**QUIET, "enable_checkpointing": True}
    trainer = trainkit.Trainer(
        max_epochs=3, default_root_dir=tmp_path, callbacks=[wrapper], **options
    )
    trainer.fit(Classifier(), loader(blobs(64), 16), loader(blobs(32, seed=1), 16))
    low, high = wrapper.inner["low"], wrapper.inner["high"]
    files = sorted(path.name for path in (tmp_path / "checkpoints").iterdir())
    assert files == sorted({Path(low.best_model_path).name, Path(high.best_model_path).name})
    assert low.best_model_score <= high.best_model_score
    # Each file is a checkpoint of the run, which loads.
    assert trainkit.checkpoint.files.load(low.best_model_path)["global_step"] > 0
