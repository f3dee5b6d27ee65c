"""Manual optimization (two optimizers), accumulation, limits and the step counters."""

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
}
torch.manual_seed(0)
x, y = torch.randn(48, 4), torch.randn(48, 1)


def loader() -> DataLoader[Any]:
    return DataLoader(TensorDataset(x, y), batch_size=8)


class TwoOptimizers(L.LightningModule):  # type: ignore[name-defined,misc]
    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False
        torch.manual_seed(1)
        self.g, self.d = torch.nn.Linear(4, 1), torch.nn.Linear(4, 1)
        self.trace: list[Any] = []

    def training_step(self, batch: Any, batch_idx: int) -> None:
        opt_g, opt_d = self.optimizers()
        sched_g, sched_d = self.lr_schedulers()
        self.toggle_optimizer(opt_g)
        loss_g = self.g(batch[0]).pow(2).mean()
        self.manual_backward(loss_g)
        self.clip_gradients(opt_g, gradient_clip_val=0.5, gradient_clip_algorithm="norm")
        opt_g.step()
        opt_g.zero_grad()
        self.untoggle_optimizer(opt_g)
        if batch_idx % 2 == 0:
            self.toggle_optimizer(opt_d)
            self.manual_backward(self.d(batch[0]).pow(2).mean())
            opt_d.step()
            opt_d.zero_grad()
            self.untoggle_optimizer(opt_d)
        self.trace.append((self.global_step, batch_idx))
        self.log_dict({"loss_g": loss_g}, prog_bar=True)
        if self.trainer.is_last_batch:
            sched_g.step()
            sched_d.step()

    def configure_optimizers(self) -> Any:
        opt_g = torch.optim.SGD(self.g.parameters(), lr=0.1)
        opt_d = torch.optim.Adam(self.d.parameters(), lr=0.01)
        steps = [torch.optim.lr_scheduler.StepLR(o, 1, 0.5) for o in (opt_g, opt_d)]
        return [opt_g, opt_d], steps


model = TwoOptimizers()
trainer = L.Trainer(max_epochs=2, **QUIET)
trainer.fit(model, loader())
record["manual"] = {
    "trace": model.trace,
    "global_step": trainer.global_step,
    "g": model.g.weight,
    "d": model.d.weight,
    "lrs": [o.param_groups[0]["lr"] for o in trainer.optimizers],
    "metrics": sorted(trainer.callback_metrics),
}


class Plain(L.LightningModule):  # type: ignore[name-defined,misc]
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.layer = torch.nn.Linear(4, 1)
        self.seen: list[Any] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.seen.append((batch_idx, self.global_step))
        return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, 0.9)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }


CASES = {
    "accumulate_3": {"accumulate_grad_batches": 3, "max_epochs": 2},  # 6 batches: whole windows
    "accumulate_short_window": {"accumulate_grad_batches": 4, "max_epochs": 1},
    "limit": {"limit_train_batches": 3, "max_epochs": 3},
    "max_steps": {"max_steps": 7},
    "overfit": {"overfit_batches": 2, "max_epochs": 2},
}
for name, options in CASES.items():
    model = Plain()
    trainer = L.Trainer(**QUIET, **options)
    trainer.fit(model, loader())
    record[name] = {
        "estimated": trainer.estimated_stepping_batches,
        "seen": model.seen,
        "global_step": trainer.global_step,
        "epoch": trainer.current_epoch,
        "lr": trainer.optimizers[0].param_groups[0]["lr"],
        "w": model.layer.weight,
    }
record.emit()
