"""Several dataloaders: validation and test results per loader, add_dataloader_idx,
a dict of training loaders (CombinedLoader's modes), and their batch counts."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.compat.parity._probe import Record, framework

L, _ = framework()
record = Record()
CombinedLoader = L.utilities.CombinedLoader


def loader(n: int, batch_size: int, seed: int) -> DataLoader[Any]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, generator=generator)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=batch_size)


class Model(L.LightningModule):  # type: ignore[name-defined,misc]
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.layer = torch.nn.Linear(3, 1)
        self.shapes: list[Any] = []

    def _loss(self, batch: Any) -> torch.Tensor:
        return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if isinstance(batch, dict):  # a dict of loaders: one batch of each (None: exhausted)
            self.shapes.append(
                sorted((k, None if v is None else len(v[0])) for k, v in batch.items())
            )
            loss = sum(self._loss(v) for v in batch.values() if v is not None)
        else:
            loss = self._loss(batch)
        self.log("train_loss", loss)
        return loss  # type: ignore[return-value]

    def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        self.log("val_loss", self._loss(batch))
        self.log(f"own_{dataloader_idx}", self._loss(batch), add_dataloader_idx=False)

    def test_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        self.log("test_loss", self._loss(batch))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.05)


QUIET = {
    "logger": False,
    "enable_progress_bar": False,
    "enable_model_summary": False,
    "enable_checkpointing": False,
}
two = [loader(12, 4, 1), loader(10, 5, 2)]
model = Model()
trainer = L.Trainer(max_epochs=2, **QUIET)
trainer.fit(model, loader(16, 4, 0), two)
record["fit"] = {"metrics": dict(trainer.callback_metrics), "val_batches": trainer.num_val_batches}
record["validate"] = trainer.validate(model, two, verbose=False)
record["test"] = trainer.test(model, two, verbose=False)
for mode in ("max_size_cycle", "min_size", "max_size"):
    model = Model()
    train = CombinedLoader({"a": loader(16, 4, 3), "b": loader(10, 4, 4)}, mode=mode)
    trainer = L.Trainer(max_epochs=1, **QUIET)
    trainer.fit(model, train)
    record[mode] = {
        "shapes": model.shapes,
        "batches": trainer.num_training_batches,
        "step": trainer.global_step,
        "w": model.layer.weight,
    }
record.emit()
