"""Weight averaging (SWA, EMA), the Timer, ModelCheckpoint's file names, and callback
subclasses that call their base's hooks as Lightning declares them."""

from __future__ import annotations

import os
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.compat.parity._probe import Record, framework, relative

L, _ = framework()
record = Record()
callbacks = L.callbacks
torch.manual_seed(0)
x = torch.randn(32, 3)
y = x.sum(1, keepdim=True)
data = DataLoader(TensorDataset(x, y), batch_size=8)
QUIET = {"logger": False, "enable_progress_bar": False, "enable_model_summary": False}


class Model(L.LightningModule):  # type: ignore[name-defined,misc]
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.layer = torch.nn.Linear(3, 1)
        self.norm = torch.nn.BatchNorm1d(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.layer(x))  # type: ignore[no-any-return]

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = torch.nn.functional.mse_loss(self(batch[0]), batch[1])
        self.log("train/loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val/loss", torch.nn.functional.mse_loss(self(batch[0]), batch[1]))

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        return {
            "optimizer": optimizer,
            "lr_scheduler": torch.optim.lr_scheduler.StepLR(optimizer, 1, 0.9),
        }


AVERAGING = {
    "swa": lambda: callbacks.StochasticWeightAveraging(
        swa_lrs=0.05, swa_epoch_start=3, annealing_epochs=2
    ),
    "swa_linear": lambda: callbacks.StochasticWeightAveraging(
        swa_lrs=[0.02], swa_epoch_start=0.5, annealing_strategy="linear", annealing_epochs=1
    ),
    "ema": lambda: callbacks.EMAWeightAveraging(decay=0.9),
}
for name, make in AVERAGING.items():
    model = Model()
    trainer = L.Trainer(max_epochs=6, callbacks=[make()], enable_checkpointing=False, **QUIET)
    trainer.fit(model, data, data)
    record[name] = {
        "state": dict(model.state_dict()),
        "lr": trainer.optimizers[0].param_groups[0]["lr"],
    }

timer = callbacks.Timer(duration="00:00:00:01")
trainer = L.Trainer(max_epochs=1000, callbacks=[timer], enable_checkpointing=False, **QUIET)
trainer.fit(Model(), data, data)
record["timer"] = [trainer.current_epoch < 1000, sorted(timer.state_dict())]


def files(folder: str) -> list[str]:
    return sorted(
        os.path.relpath(os.path.join(base, name), folder)
        for base, _, names in os.walk(folder)
        for name in names
    )


NAMES: dict[str, dict[str, Any]] = {
    "slash_auto": {
        "dirpath": "a",
        "filename": "{epoch}-{val/loss:.2f}",
        "monitor": "val/loss",
        "save_top_k": 2,
    },
    "slash_plain": {
        "dirpath": "b",
        "filename": "ep{epoch:02d}-vl{val/loss:.3f}",
        "monitor": "val/loss",
        "auto_insert_metric_name": False,
        "save_top_k": -1,
    },
    "every_3_steps": {"dirpath": "c", "every_n_train_steps": 3, "save_top_k": -1},
    "steps_monitored": {
        "dirpath": "d",
        "every_n_train_steps": 5,
        "monitor": "train/loss",
        "filename": "{step}",
    },
    "last_link": {"dirpath": "e", "save_last": "link", "monitor": "val/loss"},
    "on_train_epoch_end": {
        "dirpath": "f",
        "save_on_train_epoch_end": True,
        "monitor": "train/loss",
    },
    "same_name": {"dirpath": "h", "filename": "same", "save_top_k": -1},
    "every_2_epochs": {"dirpath": "i", "every_n_epochs": 2, "save_top_k": -1},
}
for name, options in NAMES.items():
    checkpoint = callbacks.ModelCheckpoint(**options)
    L.Trainer(max_epochs=4, callbacks=[checkpoint], **QUIET).fit(Model(), data, data)
    record[name] = {
        "files": files(options["dirpath"]),
        "best": relative(checkpoint.best_model_path),
        "last": relative(checkpoint.last_model_path),
        "score": checkpoint.best_model_score,
        "symlink": os.path.islink(os.path.join(options["dirpath"], "last.ckpt")),
    }


class Monitor(callbacks.LearningRateMonitor):  # type: ignore[misc]
    def on_train_start(self, trainer: Any, *_: Any) -> None:
        super().on_train_start(trainer)

    def on_train_epoch_start(self, trainer: Any, *_: Any) -> None:
        super().on_train_epoch_start(trainer)


class Bar(callbacks.TQDMProgressBar):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.totals: list[Any] = []

    def on_train_epoch_start(self, trainer: Any, *_: Any) -> None:
        super().on_train_epoch_start(trainer)
        self.train_progress_bar.set_description(f"custom {trainer.current_epoch}")
        self.totals.append(self.train_progress_bar.total)

    def get_metrics(self, trainer: Any, model: Any) -> dict[str, Any]:
        items = super().get_metrics(trainer, model)
        items.pop("v_num", None)
        return items  # type: ignore[no-any-return]


bar = Bar()
trainer = L.Trainer(
    max_epochs=2,
    callbacks=[Monitor(), bar],
    logger=L.loggers.CSVLogger("logs"),
    enable_checkpointing=False,
    enable_model_summary=False,
)
trainer.fit(Model(), data, data)
record["subclasses"] = [sorted(trainer.callback_metrics), bar.totals]
record.emit()
