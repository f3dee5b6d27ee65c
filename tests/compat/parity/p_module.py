"""The Module outside a Trainer (a project's unit tests), self.log from every training hook
into a CSV file, the optimizer hooks, and the model summary utility."""

from __future__ import annotations

import csv
import os
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.compat.parity._probe import Record, framework

L, _ = framework()
record = Record()

grad_norm = L.utilities.grad_norm
ModelSummary = L.utilities.model_summary.ModelSummary


class Model(L.LightningModule):  # type: ignore[name-defined,misc]
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.layer = torch.nn.Linear(3, 1)
        self.example_input_array = torch.zeros(2, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)  # type: ignore[no-any-return]

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = torch.nn.functional.mse_loss(self(batch[0]), batch[1])
        self.log("loss", loss)
        return loss

    def on_before_optimizer_step(self, optimizer: Any) -> None:
        self.log_dict(grad_norm(self.layer, norm_type=2))

    def on_after_backward(self) -> None:
        self.log("after_backward", 1.0)

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        self.log("batch_start", float(batch_idx))

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.log("batch_end", float(batch_idx), on_step=False, on_epoch=True, reduce_fx="max")

    def on_train_epoch_start(self) -> None:
        self.log("epoch_start", float(self.current_epoch))

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", torch.nn.functional.mse_loss(self(batch[0]), batch[1]))

    def on_validation_epoch_start(self) -> None:
        self.log("val_epoch_start", 3.0)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


torch.manual_seed(0)
x = torch.randn(12, 3)
y = x.sum(1, keepdim=True)
model = Model()
# A unit test of the step, without a Trainer: self.log must not stop it.
record.probe("step_alone", lambda: model.training_step((x[:4], y[:4]), 0).requires_grad)
record["attributes"] = [
    str(model.device),
    str(model.dtype),
    model.current_epoch,
    model.global_step,
    model.global_rank,
    model.local_rank,
    model.automatic_optimization,
]
# The public entries of vars(model): projects build a model's config from them (srai).
# (Lightning also puts its two DataHooks flags on each instance; trainkit's
# prepare_data_per_node is a class attribute, read the same way.)
flags = ("prepare_data_per_node", "allow_zero_length_dataloader_with_multiple_devices")
record["public_instance_entries"] = sorted(
    name for name in vars(model) if not name.startswith("_") and name not in flags
)
# Lightning's private name for the dtype, which projects read (darts).
record["private_dtype"] = [str(model._dtype), str(model.double()._dtype)]
model.float()
record.probe("trainer_alone", lambda: model.trainer)
record.probe("optimizers_alone", lambda: model.optimizers())
model.freeze()
record["frozen"] = [model.training, any(p.requires_grad for p in model.parameters())]
model.unfreeze()
record["scripted"] = type(model.to_torchscript()).__name__
summary = ModelSummary(model, max_depth=1)
record["summary"] = [
    summary.layer_names,
    summary.param_nums,
    summary.in_sizes,
    summary.out_sizes,
    summary.total_training_modes,
    summary.trainable_parameters,
]
data = DataLoader(TensorDataset(x, y), batch_size=4)
trainer = L.Trainer(
    max_epochs=2,
    logger=L.loggers.CSVLogger("logs", name="run"),
    log_every_n_steps=1,
    enable_progress_bar=False,
    enable_model_summary=False,
    enable_checkpointing=False,
)
trainer.fit(model, data, data)
record["callback_metrics"] = dict(trainer.callback_metrics)
with open(os.path.join(trainer.logger.log_dir, "metrics.csv")) as file:
    record["csv"] = [
        {k: (float(v) if v else "") for k, v in row.items()} for row in csv.DictReader(file)
    ]
record.emit()
