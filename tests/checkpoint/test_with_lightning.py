"""Checkpoints moving between Lightning and trainkit (runs only where Lightning is installed)."""

from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import trainkit
from tests.helpers import QUIET

pl = pytest.importorskip("lightning.pytorch")

LIGHTNING_QUIET: dict[str, Any] = {
    "logger": False,
    "enable_progress_bar": False,
    "enable_model_summary": False,
    "accelerator": "cpu",
}


def _model_class(base: type) -> type:
    """The same small model on ``base`` (trainkit.Module or LightningModule)."""

    class Model(base):  # type: ignore[misc, valid-type]
        def __init__(self, features: int = 8, lr: float = 0.1) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.layer = torch.nn.Linear(features, 2)
            self.batches: list[tuple[int, int, int]] = []
            self.start: dict[str, Any] = {}

        def on_train_start(self) -> None:
            optimizer = self.trainer.optimizers[0]
            self.start = {
                "epoch": self.current_epoch,
                "global_step": self.global_step,
                "weights": copy.deepcopy(self.state_dict()),
                "optimizer": copy.deepcopy(optimizer.state_dict()),
                "lr": optimizer.param_groups[0]["lr"],
            }

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            self.batches.append((self.current_epoch, batch_idx, self.global_step))
            return self.layer(batch[0]).pow(2).mean()  # type: ignore[no-any-return]

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)
            return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.5)]

    return Model


def _data() -> DataLoader[Any]:
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
    return DataLoader(TensorDataset(x), batch_size=4)


def _assert_same_state(start: dict[str, Any], weights: dict[str, Any], optimizer: Any) -> None:
    for name, tensor in weights.items():
        assert torch.equal(start["weights"][name], tensor), name
    saved = optimizer["state"]
    for index, state in start["optimizer"]["state"].items():
        assert torch.equal(state["momentum_buffer"], saved[index]["momentum_buffer"])


def test_a_run_trained_under_lightning_resumes_under_trainkit(tmp_path: Path) -> None:
    lightning_model = _model_class(pl.LightningModule)(lr=0.2)
    checkpoints = pl.callbacks.ModelCheckpoint(dirpath=tmp_path, save_top_k=-1)
    lightning = pl.Trainer(max_epochs=2, callbacks=[checkpoints], **LIGHTNING_QUIET)
    lightning.fit(lightning_model, _data())
    path = tmp_path / "epoch=1-step=8.ckpt"
    saved = torch.load(path, weights_only=True)

    Model = _model_class(trainkit.Module)
    restored = Model.load_from_checkpoint(path)
    assert restored.hparams.lr == 0.2
    for name, tensor in lightning_model.state_dict().items():
        assert torch.equal(restored.state_dict()[name], tensor), name

    model = Model()
    trainer = trainkit.Trainer(max_epochs=3, **QUIET)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's ModelCheckpoint state has no taker here
        trainer.fit(model, _data(), ckpt_path=path)
    assert model.start["epoch"] == 2 and model.start["global_step"] == 8
    _assert_same_state(model.start, lightning_model.state_dict(), saved["optimizer_states"][0])
    assert model.start["lr"] == pytest.approx(0.2 * 0.5**2)
    assert model.batches == [(2, 0, 8), (2, 1, 9), (2, 2, 10), (2, 3, 11)]
    assert trainer.global_step == 12


def test_a_lightning_mid_epoch_checkpoint_continues_at_the_next_batch(tmp_path: Path) -> None:
    checkpoints = pl.callbacks.ModelCheckpoint(
        dirpath=tmp_path, every_n_train_steps=6, save_top_k=-1
    )
    lightning = pl.Trainer(max_epochs=2, callbacks=[checkpoints], **LIGHTNING_QUIET)
    lightning.fit(_model_class(pl.LightningModule)(), _data())
    model = _model_class(trainkit.Module)()
    trainer = trainkit.Trainer(max_epochs=2, **QUIET)
    with pytest.warns(UserWarning, match="2 batches into epoch 1"):
        trainer.fit(model, _data(), ckpt_path=tmp_path / "epoch=1-step=6.ckpt")
    # Lightning resumes this file at the same batch index and step.
    assert model.batches == [(1, 2, 6), (1, 3, 7)]


def test_a_run_trained_under_trainkit_resumes_under_lightning(tmp_path: Path) -> None:
    from trainkit.callbacks import ModelCheckpoint

    model = _model_class(trainkit.Module)(lr=0.2)
    checkpoints = ModelCheckpoint(dirpath=tmp_path, save_top_k=-1)
    trainer = trainkit.Trainer(
        max_epochs=2, **{**QUIET, "enable_checkpointing": True}, callbacks=[checkpoints]
    )
    trainer.fit(model, _data())
    path = tmp_path / "epoch=1-step=8.ckpt"
    saved = torch.load(path, weights_only=True)

    Model = _model_class(pl.LightningModule)
    assert Model.load_from_checkpoint(path).hparams.lr == 0.2
    resumed = Model()
    lightning = pl.Trainer(max_epochs=3, enable_checkpointing=False, **LIGHTNING_QUIET)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lightning.fit(resumed, _data(), ckpt_path=path)
    assert resumed.start["epoch"] == 2 and resumed.start["global_step"] == 8
    _assert_same_state(resumed.start, model.state_dict(), saved["optimizer_states"][0])
    assert resumed.batches == [(2, 0, 8), (2, 1, 9), (2, 2, 10), (2, 3, 11)]
