"""torchmetrics objects logged as a project template logs them; a plateau scheduler;
ModelCheckpoint and EarlyStopping on them; the CSV file; test from the best checkpoint."""

from __future__ import annotations

import csv
import os
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.compat.parity._probe import Record, framework, relative

L, _ = framework()
from torchmetrics import MaxMetric, MeanMetric, MetricCollection  # noqa: E402
from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score  # noqa: E402

record = Record()


class Model(L.LightningModule):  # type: ignore[name-defined,misc]
    def __init__(self) -> None:
        super().__init__()
        self.save_hyperparameters()
        torch.manual_seed(1)
        self.net = torch.nn.Linear(4, 3)
        self.train_acc = MulticlassAccuracy(num_classes=3, average="micro")
        self.val_acc = MulticlassAccuracy(num_classes=3, average="micro")
        self.train_loss, self.val_loss = MeanMetric(), MeanMetric()
        self.val_acc_best = MaxMetric()
        self.test_metrics = MetricCollection(
            {
                "acc": MulticlassAccuracy(num_classes=3, average="micro"),
                "f1": MulticlassF1Score(num_classes=3),
            },
            prefix="test/",
        )
        self.epoch_ends: list[Any] = []

    def on_train_start(self) -> None:
        self.val_loss.reset()
        self.val_acc.reset()
        self.val_acc_best.reset()

    def _step(self, batch: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x, y = batch
        logits = self.net(x)
        return torch.nn.functional.cross_entropy(logits, y), logits.argmax(1), y

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss, predicted, target = self._step(batch)
        self.train_loss(loss)
        self.train_acc(predicted, target)
        self.log("train/loss", self.train_loss, on_step=False, on_epoch=True, prog_bar=True)
        self.log("train/acc", self.train_acc, on_step=False, on_epoch=True, prog_bar=True)
        return loss

    def on_train_epoch_end(self) -> None:
        self.epoch_ends.append(dict(self.trainer.callback_metrics))

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        loss, predicted, target = self._step(batch)
        self.val_loss(loss)
        self.val_acc(predicted, target)
        self.log("val/loss", self.val_loss, on_step=False, on_epoch=True, prog_bar=True)
        self.log("val/acc", self.val_acc, on_step=False, on_epoch=True, prog_bar=True)

    def on_validation_epoch_end(self) -> None:
        self.val_acc_best(self.val_acc.compute())
        self.log("val/acc_best", self.val_acc_best.compute(), sync_dist=True, prog_bar=True)

    def test_step(self, batch: Any, batch_idx: int) -> None:
        _, predicted, target = self._step(batch)
        self.test_metrics.update(predicted, target)
        self.log_dict(self.test_metrics, on_step=False, on_epoch=True)

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.Adam(self.parameters(), lr=0.05)
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=0)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": plateau, "monitor": "val/loss", "interval": "epoch"},
        }


torch.manual_seed(0)
x = torch.randn(96, 4)
y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
train = DataLoader(TensorDataset(x[:64], y[:64]), batch_size=16)  # no shuffle: see p_ddp
val = DataLoader(TensorDataset(x[64:], y[64:]), batch_size=10)
checkpoint = L.callbacks.ModelCheckpoint(
    dirpath="ck",
    monitor="val/acc",
    mode="max",
    save_last=True,
    filename="epoch_{epoch:03d}",
    auto_insert_metric_name=False,
)
stopping = L.callbacks.EarlyStopping(monitor="val/acc", patience=5, mode="max")
model = Model()
trainer = L.Trainer(
    max_epochs=4,
    callbacks=[checkpoint, stopping],
    logger=L.loggers.CSVLogger("logs", name="run"),
    log_every_n_steps=2,
    enable_progress_bar=False,
    enable_model_summary=False,
)
trainer.fit(model, train, val)
record["epoch_ends"] = model.epoch_ends
record["callback_metrics"] = dict(trainer.callback_metrics)
record["progress_bar_metrics"] = dict(trainer.progress_bar_metrics)
record["logged_metrics"] = dict(trainer.logged_metrics)
record["best"] = [relative(checkpoint.best_model_path), checkpoint.best_model_score]
record["files"] = sorted(os.listdir("ck"))
record["lr"] = trainer.optimizers[0].param_groups[0]["lr"]
record["test"] = trainer.test(model, val, ckpt_path="best", verbose=False)
with open(os.path.join(trainer.logger.log_dir, "metrics.csv")) as file:
    record["csv"] = [
        {k: (float(v) if v else "") for k, v in row.items()} for row in csv.DictReader(file)
    ]
record.emit()
