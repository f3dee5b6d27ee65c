"""trainer.validate_loop / test_loop / predict_loop: inference mode and predictions."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.compat.parity._probe import Record, framework

L, _ = framework()
record = Record()
seen: dict[str, list[Any]] = {}


class Model(L.LightningModule):  # type: ignore[name-defined,misc]
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(3, 2)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        seen.setdefault("validate", []).append(torch.is_inference_mode_enabled())

    def test_step(self, batch: Any, batch_idx: int) -> None:
        seen.setdefault("test", []).append(torch.is_inference_mode_enabled())

    def predict_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> Any:
        return self.layer(batch[0])

    def on_predict_batch_end(
        self, outputs: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        seen.setdefault("at_batch_end", []).append(len(self.trainer.predict_loop.predictions))


data = DataLoader(TensorDataset(torch.randn(10, 3)), batch_size=4)
trainer = L.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False)
model = Model()
record["defaults"] = [trainer.validate_loop.inference_mode, trainer.test_loop.inference_mode]
record["before"] = [trainer.predict_loop.predictions, trainer.predict_loop.return_predictions]
trainer.validate(model, data, verbose=False)
trainer.test_loop.inference_mode = False
trainer.test(model, data, verbose=False)
returned = trainer.predict(model, data)
kept = trainer.predict_loop.predictions
record["same_objects"] = all(a is b for a, b in zip(returned, kept, strict=True))
trainer.predict(model, [data, data])
record["two_loaders"] = [len(each) for each in trainer.predict_loop.predictions]
record["num_dataloaders"] = trainer.predict_loop.num_dataloaders
trainer.predict(model, data, return_predictions=False)
record["not_kept"] = [trainer.predict_loop.predictions, trainer.predict_loop.return_predictions]
record["seen"] = seen
record["off"] = L.Trainer(inference_mode=False, logger=False).test_loop.inference_mode
record.emit()
