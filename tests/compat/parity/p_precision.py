"""Precision settings on the CPU: what the step computes in, and the weights it ends with."""

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
        torch.manual_seed(1)
        self.layer = torch.nn.Linear(4, 1)
        self.dtypes: set[Any] = set()

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        out = self.layer(batch[0])
        self.dtypes.add((str(batch[0].dtype), str(out.dtype), str(self.layer.weight.dtype)))
        return torch.nn.functional.mse_loss(out.float(), batch[1].float())

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log(
            "val_loss", torch.nn.functional.mse_loss(self.layer(batch[0]).float(), batch[1].float())
        )

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.05)


torch.manual_seed(0)
x = torch.randn(32, 4)
data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
for precision in ("32-true", "bf16-mixed", "64-true", "bf16-true"):
    model = Model()
    trainer = L.Trainer(
        max_epochs=2,
        precision=precision,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    trainer.fit(model, data, data)
    seen = {
        "dtypes": sorted(model.dtypes),
        "w_dtype": str(model.layer.weight.dtype),
        "plugin": type(trainer.precision_plugin).__name__,
    }
    if not precision.startswith("bf16"):  # bfloat16 results vary with the CPU's instructions
        seen.update(w=model.layer.weight.double(), val_loss=trainer.callback_metrics["val_loss"])
    record[precision] = seen
record.emit()
