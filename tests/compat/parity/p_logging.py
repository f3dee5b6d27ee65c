"""self.log's options: what callback_metrics, logged_metrics and progress_bar_metrics hold
at each hook, and the rows the CSV logger writes, for eight common set-ups."""

from __future__ import annotations

import csv
import os
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.compat.parity._probe import Record, framework

L, _ = framework()
record = Record()
SETUPS: dict[str, dict[str, dict[str, Any]]] = {
    "default": {"train": {}, "val": {}},
    "on_step_and_epoch": {"train": {"on_step": True, "on_epoch": True}, "val": {}},
    "epoch_only": {"train": {"on_step": False, "on_epoch": True}, "val": {}},
    "val_on_step": {"train": {}, "val": {"on_step": True, "on_epoch": True}},
    "prog_bar": {
        "train": {"on_step": True, "on_epoch": True, "prog_bar": True},
        "val": {"prog_bar": True},
    },
    "no_logger": {"train": {"logger": False}, "val": {"logger": False}},
    "max": {"train": {"on_epoch": True, "reduce_fx": "max"}, "val": {"reduce_fx": "max"}},
    "sum": {"train": {"on_epoch": True, "reduce_fx": "sum"}, "val": {"reduce_fx": torch.sum}},
}


def metrics(trainer: Any) -> dict[str, Any]:
    # trainkit's bar also shows the training loss as "loss" (a row of docs/porting.md):
    # left out, so that the rest of what the bar shows is compared.
    bar = {key: value for key, value in trainer.progress_bar_metrics.items() if key != "loss"}
    return {
        "callback": dict(trainer.callback_metrics),
        "logged": dict(trainer.logged_metrics),
        "progress_bar": bar,
    }


class Model(L.LightningModule):  # type: ignore[name-defined,misc]
    def __init__(self, options: dict[str, dict[str, Any]]) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.layer = torch.nn.Linear(4, 1)
        self.options = options

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])
        self.log("train_loss", loss, **self.options["train"])
        self.log_dict({"index": float(batch_idx), "double": loss * 2}, **self.options["train"])
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        loss = torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])
        self.log("val_loss", loss, **self.options["val"])

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.05)


class Snapshot(L.Callback):  # type: ignore[name-defined,misc]
    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        if trainer.current_epoch == 0 and args[-1] == 1:
            self.seen["batch_1"] = metrics(trainer)

    def on_validation_epoch_end(self, trainer: Any, *_: Any) -> None:
        self.seen[f"validation_end_{trainer.current_epoch}"] = metrics(trainer)

    def on_train_epoch_end(self, trainer: Any, *_: Any) -> None:
        self.seen[f"epoch_end_{trainer.current_epoch}"] = metrics(trainer)

    def on_fit_end(self, trainer: Any, *_: Any) -> None:
        self.seen["fit_end"] = metrics(trainer)


for name, options in SETUPS.items():
    torch.manual_seed(0)
    x = torch.randn(96, 4)
    y = x.sum(1, keepdim=True)
    logger = L.loggers.CSVLogger(name, name="run", version=0)
    snapshot = Snapshot()
    trainer = L.Trainer(
        max_epochs=2,
        logger=logger,
        log_every_n_steps=2,
        num_sanity_val_steps=0,
        callbacks=[snapshot],
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    trainer.fit(
        Model(options),
        DataLoader(TensorDataset(x, y), batch_size=16),
        DataLoader(TensorDataset(x[:32], y[:32]), batch_size=16),
    )
    rows: list[Any] = []
    path = os.path.join(logger.log_dir, "metrics.csv")
    if os.path.exists(path):
        with open(path) as file:
            rows = [
                # "epoch" as written (an int in Lightning's file); the values as numbers.
                {k: (v if k == "epoch" else float(v) if v else "") for k, v in row.items()}
                for row in csv.DictReader(file)
            ]
    record[name] = {**snapshot.seen, "csv": rows}
record.emit()
