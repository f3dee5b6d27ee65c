"""Hyperparameters, a checkpoint's contents, load_from_checkpoint and a resume from last.ckpt."""

from __future__ import annotations

import os
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.compat.parity._probe import Record, framework, relative

L, _ = framework()
record = Record()


class Net(torch.nn.Module):
    def __init__(self, width: int = 4) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)  # type: ignore[no-any-return]


class Model(L.LightningModule):  # type: ignore[name-defined,misc]
    def __init__(self, lr: float = 0.1, width: int = 4, net: Any = None, cfg: Any = None) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["net"])
        self.net = net if net is not None else Net(width)
        self.extra = 0

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = torch.nn.functional.mse_loss(self.net(batch[0]), batch[1])
        self.log("loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(batch[0]), batch[1]))

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["extra"] = self.extra + 1

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.extra = checkpoint.get("extra", -1)


QUIET = {"logger": False, "enable_progress_bar": False, "enable_model_summary": False}
torch.manual_seed(0)
x = torch.randn(32, 4)
y = x.sum(1, keepdim=True)
train = DataLoader(TensorDataset(x, y), batch_size=8)
val = DataLoader(TensorDataset(x[:8], y[:8]), batch_size=8)
torch.manual_seed(1)
model = Model(lr=0.05, cfg={"a": {"b": 1}})
record["hparams"] = dict(model.hparams)
first = L.callbacks.ModelCheckpoint(dirpath="ck", monitor="val_loss", save_last=True, save_top_k=2)
L.Trainer(max_epochs=2, callbacks=[first], **QUIET).fit(model, train, val)
record["files"] = sorted(os.listdir("ck"))
saved = torch.load("ck/last.ckpt", weights_only=False)
record["saved"] = {
    "hyper_parameters": saved["hyper_parameters"],
    "extra": saved["extra"],
    "epoch": saved["epoch"],
    "global_step": saved["global_step"],
}
loaded = Model.load_from_checkpoint("ck/last.ckpt")
record["loaded"] = [
    dict(loaded.hparams),
    loaded.extra,
    torch.equal(loaded.net.layer.weight, model.net.layer.weight),
]
record["override"] = dict(Model.load_from_checkpoint("ck/last.ckpt", lr=0.5).hparams)
record.probe("wrong_width", lambda: Model.load_from_checkpoint("ck/last.ckpt", width=5))
record["injected"] = type(Model.load_from_checkpoint("ck/last.ckpt", net=Net(4)).net).__name__
second = L.callbacks.ModelCheckpoint(dirpath="ck", monitor="val_loss", save_last=True, save_top_k=2)
torch.manual_seed(1)
resumed = Model(lr=0.05)
trainer = L.Trainer(max_epochs=4, callbacks=[second], **QUIET)
trainer.fit(resumed, train, val, ckpt_path="ck/last.ckpt")
record["resumed"] = {
    "extra": resumed.extra,
    "epoch": trainer.current_epoch,
    "step": trainer.global_step,
    "files": sorted(os.listdir("ck")),
    "best": relative(second.best_model_path),
    "best_k": sorted(relative(path) for path in second.best_k_models),
    "w": resumed.net.layer.weight,
    "ckpt_path": relative(trainer.ckpt_path),
}


class Block(L.LightningModule):  # type: ignore[name-defined,misc]
    """A submodule whose hyperparameters (holding a class) another module saves."""

    def __init__(self, depth: int = 2, activation: Any = torch.nn.ReLU) -> None:
        super().__init__()
        self.save_hyperparameters()


class WithObjects(L.LightningModule):  # type: ignore[name-defined,misc]
    """Hyperparameters that are objects, a tuple and another module's hyperparameters."""

    def __init__(self, loss: Any = None, kernel: Any = (3, 3), block: Any = None) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self.hparams.loss(self.layer(batch[0]), batch[1])  # type: ignore[no-any-return]

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


# What a project that rebuilds its model by hand reads back from the file.
objects = WithObjects(loss=torch.nn.SmoothL1Loss(beta=0.5), block=Block(depth=3).hparams)
stored_by = L.Trainer(max_steps=1, default_root_dir="objects", **QUIET)
stored_by.fit(objects, train)
stored = torch.load(stored_by.checkpoint_callback.best_model_path, weights_only=False)
stored = stored["hyper_parameters"]
record["object_hparams"] = {
    "types": {key: type(value).__name__ for key, value in stored.items()},
    "loss_beta": stored["loss"].beta,
    "kernel": repr(stored["kernel"]),
    "block": [stored["block"].depth, stored["block"].pop("activation") is torch.nn.ReLU],
}
record.emit()
