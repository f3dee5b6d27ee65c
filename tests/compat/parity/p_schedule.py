"""When validation runs: val_check_interval, check_val_every_n_epoch, fast_dev_run,
limits, the sanity check, early stopping on training and validation values, min_epochs."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.compat.parity._probe import Record, framework

L, _ = framework()
record = Record()


class Model(L.LightningModule):  # type: ignore[name-defined,misc]
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)
        self.events: list[Any] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = self.layer(batch[0]).pow(2).mean()
        self.log("train_loss", loss, on_epoch=True)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.layer(batch[0]).pow(2).mean())

    def on_validation_epoch_end(self) -> None:
        trainer = self.trainer
        self.events.append(
            ("val", trainer.current_epoch, trainer.global_step, trainer.sanity_checking)
        )

    def on_train_epoch_end(self) -> None:
        self.events.append(("epoch_end", self.trainer.current_epoch, self.trainer.global_step))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.01)


x = torch.randn(40, 2)
train = DataLoader(TensorDataset(x), batch_size=4)  # 10 batches
val = DataLoader(TensorDataset(x[:8]), batch_size=4)
QUIET = {
    "logger": False,
    "enable_progress_bar": False,
    "enable_model_summary": False,
    "enable_checkpointing": False,
}


def stopper(monitor: str, **options: Any) -> Any:
    return L.callbacks.EarlyStopping(monitor, min_delta=10.0, **options)


CASES: dict[str, dict[str, Any]] = {
    "every_3_batches": {"max_epochs": 2, "val_check_interval": 3},
    "quarter_epochs": {"max_epochs": 2, "val_check_interval": 0.25},
    "steps_across_epochs": {
        "max_steps": 25,
        "val_check_interval": 7,
        "check_val_every_n_epoch": None,
    },
    "every_2_epochs": {"max_epochs": 4, "check_val_every_n_epoch": 2},
    "fast_dev_run": {"fast_dev_run": True},
    "fast_dev_run_3": {"fast_dev_run": 3},
    "no_validation": {"max_epochs": 1, "limit_val_batches": 0},
    "full_sanity_check": {"max_epochs": 1, "num_sanity_val_steps": -1},
    "stop_on_train_value": {
        "max_epochs": 6,
        "callbacks": [stopper("train_loss_epoch", patience=0, check_on_train_epoch_end=True)],
    },
    "stop_on_val_value": {"max_epochs": 6, "callbacks": [stopper("val_loss", patience=1)]},
    "min_epochs": {
        "max_epochs": 6,
        "min_epochs": 3,
        "callbacks": [stopper("val_loss", patience=0)],
    },
}
for name, options in CASES.items():
    model = Model()
    trainer = L.Trainer(**QUIET, **options)
    trainer.fit(model, train, val)
    stoppers = [c for c in trainer.callbacks if type(c).__name__ == "EarlyStopping"]
    record[name] = {
        "events": model.events,
        "step": trainer.global_step,
        "epoch": trainer.current_epoch,
        "val_batches": trainer.num_val_batches,
        "metrics": sorted(trainer.callback_metrics),
        "stopping": [(c.stopped_epoch, c.wait_count) for c in stoppers],
    }
record.emit()
