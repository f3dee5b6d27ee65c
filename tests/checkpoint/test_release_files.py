"""Checkpoints written by an earlier trainkit release keep loading and resuming.

``data/release-0.ckpt`` was written by trainkit 0.1.0 before the package layout
moved its modules (commit 424f1db): ``Trainer(max_epochs=1, seed=7)`` fitting
``tests.helpers.Classifier(lr=0.05)`` on ``blobs(64)`` in shuffled batches of 16,
then ``trainer.save_checkpoint`` (at the epoch's end: a resume point). The file
is loaded with ``weights_only=True``, so it can name no trainkit class; these
tests prove it still loads, and that the run continues exactly as one that was
never interrupted.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.checkpoint.files import load

RELEASE_0 = Path(__file__).parent / "data" / "release-0.ckpt"


class _CountSteps(trainkit.Callback):
    def __init__(self) -> None:
        self.batches = 0

    def on_train_batch_end(self, *args: Any) -> None:
        self.batches += 1


def _fit(max_epochs: int, root: Path, ckpt_path: str | None = None) -> tuple[Classifier, int]:
    counter = _CountSteps()
    trainer = trainkit.Trainer(
        max_epochs=max_epochs, seed=7, default_root_dir=str(root), callbacks=[counter], **QUIET
    )
    model = Classifier(lr=0.05)
    trainer.fit(model, loader(blobs(64), batch_size=16, shuffle=True), ckpt_path=ckpt_path)
    return model, counter.batches


def test_the_release_file_loads_with_its_digest_and_hyperparameters() -> None:
    checkpoint = load(RELEASE_0)
    assert checkpoint["global_step"] == 4  # one epoch of 4 batches
    restored = Classifier.load_from_checkpoint(RELEASE_0)
    assert restored.hparams.lr == 0.05
    for name, value in restored.state_dict().items():
        assert torch.equal(value, checkpoint["state_dict"][name]), name


def test_resuming_the_release_file_ends_where_an_uninterrupted_run_ends(tmp_path: Path) -> None:
    copy = tmp_path / "release-0.ckpt"
    shutil.copy(RELEASE_0, copy)  # the run writes beside its checkpoint: never into tests/
    resumed, resumed_batches = _fit(3, tmp_path / "resumed", ckpt_path=str(copy))
    straight, straight_batches = _fit(3, tmp_path / "straight")
    assert (resumed_batches, straight_batches) == (8, 12)  # it went on from epoch 1
    # Bitwise where this machine computes the file's first epoch bit for bit (CI's
    # machines do); another processor's kernels round differently from the start,
    # and then the runs agree to rounding.
    first, _ = _fit(1, tmp_path / "first")
    saved = load(RELEASE_0)["state_dict"]
    same_kernels = all(torch.equal(v, saved[k]) for k, v in first.state_dict().items())
    for (name, a), (_, b) in zip(
        resumed.state_dict().items(), straight.state_dict().items(), strict=True
    ):
        if same_kernels:
            assert torch.equal(a, b), name
        else:
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=name)
