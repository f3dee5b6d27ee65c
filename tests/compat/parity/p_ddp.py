"""Two processes (ddp_spawn, gloo): sync_dist logging, all_gather, the sharded data."""

from __future__ import annotations

import json
import os
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.compat.parity._probe import MARKER, framework, plain

L, _ = framework()


class Model(L.LightningModule):  # type: ignore[name-defined,misc]
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.layer = torch.nn.Linear(3, 1)
        self.gathered: list[Any] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])
        self.log("train_loss", loss, sync_dist=True, on_epoch=True)
        self.log(
            "rank_sum",
            float(self.global_rank),
            sync_dist=True,
            on_step=False,
            on_epoch=True,
            reduce_fx="sum",
        )
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log(
            "val_loss", torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1]), sync_dist=True
        )
        self.log("own_rank", float(self.global_rank))

    def on_validation_epoch_end(self) -> None:
        self.gathered.append(list(self.all_gather(torch.tensor([float(self.global_rank)])).shape))
        self.gathered.append(list(self.all_gather({"a": torch.ones(2)})["a"].shape))

    def on_train_end(self) -> None:
        if self.global_rank == 0:  # the spawned processes report through a file
            trainer = self.trainer
            seen = {
                "w": self.layer.weight,
                "metrics": dict(trainer.callback_metrics),
                "step": trainer.global_step,
                "world_size": trainer.world_size,
                "gathered": self.gathered,
                "batches": [trainer.num_training_batches, trainer.num_val_batches],
            }
            with open("result.json", "w") as file:
                json.dump(plain(seen), file)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(40, 3)
    y = x.sum(1, keepdim=True)
    # shuffle=True: Lightning's sampler shuffles any training loader under DDP (see p_metrics).
    train = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True)
    val = DataLoader(TensorDataset(x[:12], y[:12]), batch_size=4)
    trainer = L.Trainer(
        strategy="ddp_spawn",
        accelerator="cpu",
        devices=2,
        max_epochs=2,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    trainer.fit(Model(), train, val)
    with open("result.json") as file:
        print(MARKER + file.read(), flush=True)
    os.remove("result.json")
