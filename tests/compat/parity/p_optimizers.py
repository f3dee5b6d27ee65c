"""What configure_optimizers may return, and the hooks that shape the optimizer step."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.compat.parity._probe import Record, framework

L, _ = framework()
record = Record()
QUIET = {
    "logger": False,
    "enable_progress_bar": False,
    "enable_model_summary": False,
    "enable_checkpointing": False,
    "max_epochs": 2,
}
torch.manual_seed(0)
x = torch.randn(24, 3)
data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=6)


class Base(L.LightningModule):  # type: ignore[name-defined,misc]
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.layer = torch.nn.Linear(3, 1)
        self.events: list[Any] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])


def sgd(module: Any, **options: Any) -> torch.optim.SGD:
    return torch.optim.SGD(module.parameters(), lr=0.1, **options)


class TwoInAutomatic(Base):
    def configure_optimizers(self) -> Any:
        return [sgd(self), sgd(self)]


class OwnStep(Base):
    def configure_optimizers(self) -> Any:
        return sgd(self)

    def optimizer_step(
        self, epoch: int, batch_idx: int, optimizer: Any, optimizer_closure: Any = None
    ) -> None:
        self.events.append((epoch, batch_idx, optimizer_closure is not None))
        if self.trainer.global_step < 3:  # a warm-up, as Lightning's docs show it
            for group in optimizer.param_groups:
                group["lr"] = 0.1 * (self.trainer.global_step + 1) / 3
        optimizer.step(closure=optimizer_closure)


class OwnZeroGrad(Base):
    def configure_optimizers(self) -> Any:
        return sgd(self, momentum=0.9)

    def optimizer_zero_grad(self, epoch: int, batch_idx: int, optimizer: Any) -> None:
        self.events.append((epoch, batch_idx))
        optimizer.zero_grad(set_to_none=False)


class Clipping(Base):
    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.5)


class OneCycle(Base):
    def configure_optimizers(self) -> Any:
        optimizer = sgd(self)
        steps = self.trainer.estimated_stepping_batches
        schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.2, total_steps=steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


class Lists(Base):
    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.Adam(self.parameters(), lr=0.1)
        schedule = torch.optim.lr_scheduler.ExponentialLR(optimizer, 0.5)
        return [optimizer], [{"scheduler": schedule, "interval": "epoch", "name": "mine"}]


class OwnSchedulerStep(Base):
    def configure_optimizers(self) -> Any:
        optimizer = sgd(self)
        schedule = torch.optim.lr_scheduler.StepLR(optimizer, 1, 0.5)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": schedule, "interval": "step", "frequency": 2},
        }

    def lr_scheduler_step(self, scheduler: Any, metric: Any) -> None:
        self.events.append(self.trainer.global_step)
        scheduler.step()


class Nothing(Base):
    def configure_optimizers(self) -> Any:
        return None


class OneTuple(Base):
    def configure_optimizers(self) -> Any:
        return (sgd(self),)


class DictInList(Base):
    def configure_optimizers(self) -> Any:
        optimizer = sgd(self)
        return [
            {
                "optimizer": optimizer,
                "lr_scheduler": torch.optim.lr_scheduler.StepLR(optimizer, 1, 0.9),
            }
        ]


CASES: dict[str, tuple[type, dict[str, Any]]] = {
    "two_in_automatic": (TwoInAutomatic, {}),
    "optimizer_step": (OwnStep, {}),
    "optimizer_zero_grad": (OwnZeroGrad, {}),
    "clip_value": (Clipping, {"gradient_clip_val": 0.05, "gradient_clip_algorithm": "value"}),
    "clip_norm": (Clipping, {"gradient_clip_val": 0.05}),
    "one_cycle": (OneCycle, {}),
    "lists": (Lists, {}),
    "lr_scheduler_step": (OwnSchedulerStep, {}),
    "nothing": (Nothing, {}),
    "one_tuple": (OneTuple, {}),
    "dict_in_list": (DictInList, {}),
}
for name, (model_class, options) in CASES.items():
    model = model_class()
    try:
        trainer = L.Trainer(**QUIET, **options)
        trainer.fit(model, data)
    except Exception as error:
        record[name] = f"ERR {type(error).__name__}"
        continue
    record[name] = {
        "w": model.layer.weight,
        "step": trainer.global_step,
        "events": model.events,
        "lrs": [g["lr"] for o in trainer.optimizers for g in o.param_groups],
    }
record.emit()
