"""An FSDP training job for the sharded-checkpoint tests, meant to be killed and resumed.

Run as ``python -m tests.distributed.fsdp_resume_script --root DIR --devices N
[--resume] [--delay S] [--async-save]``: trainkit starts the N processes itself.
Rank 0 prints ``step N`` after every optimizer step; at the end it writes the
full parameters (gathered from every shard) and the samples each step saw to
``DIR/final.pt``. Sharded checkpoints go to ``DIR/checkpoints`` every 3 steps
(the two newest kept, and ``last.ckpt``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

import trainkit
from tests.checkpoint.resume_script import PrintSteps
from tests.helpers import QUIET
from trainkit.callbacks import ModelCheckpoint
from trainkit.distributed.sharding import full_model_state
from trainkit.strategies.fsdp import FSDPStrategy

MAX_STEPS = 24
GLOBAL_BATCH = 16


class Numbered(Dataset[tuple[int, torch.Tensor, torch.Tensor]]):
    """160 rows of two blobs, each with its index (so a run can say which rows it saw)."""

    def __init__(self) -> None:
        generator = torch.Generator().manual_seed(0)
        self.y = torch.arange(160) % 2
        self.x = torch.randn(160, 8, generator=generator, dtype=torch.float64) + self.y[:, None]

    def __len__(self) -> int:
        return 160

    def __getitem__(self, index: int) -> tuple[int, torch.Tensor, torch.Tensor]:
        return index, self.x[index], self.y[index]


class Net(trainkit.Module):
    """A float64 MLP with AdamW and a step LR schedule (their states are resumed).

    No dropout: its masks depend on how rows are split over processes, so a
    run resumed on another number of processes could not match.
    """

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32))
        self.head = nn.Linear(32, 2)
        self.double()
        self.seen: dict[int, list[int]] = {}  # the rows each step trained on, across ranks

    def on_train_start(self) -> None:
        # The weights the run starts from (after a resume: those it loaded).
        self.start_state = full_model_state(self)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        index, x, y = batch
        rows = self.trainer.strategy.all_gather(index).reshape(-1)
        self.seen[self.trainer.global_step] = sorted(rows.tolist())
        return F.cross_entropy(self.head(self.layers(x)), y)

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.AdamW(self.parameters(), lr=0.01)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.5)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--async-save", action="store_true")
    arguments = parser.parse_args()
    torch.manual_seed(0)
    model = Net()
    checkpoints = ModelCheckpoint(
        dirpath=arguments.root / "checkpoints",
        every_n_train_steps=3,
        monitor="step",
        mode="max",
        save_top_k=2,
        save_last=True,
    )
    trainer = trainkit.Trainer(
        max_steps=MAX_STEPS,
        strategy=FSDPStrategy(async_save=arguments.async_save),
        devices=arguments.devices,
        seed=1,
        default_root_dir=arguments.root,
        callbacks=[checkpoints, PrintSteps(arguments.delay)],
        **{**QUIET, "enable_checkpointing": True},
    )
    loader = DataLoader(Numbered(), batch_size=GLOBAL_BATCH // arguments.devices, shuffle=True)
    trainer.fit(model, loader, ckpt_path="last" if arguments.resume else None)
    state = full_model_state(model)  # every rank takes part; rank 0 gets it
    if trainer.is_global_zero:
        final = {
            "state_dict": state,
            "start_state": model.start_state,
            "global_step": trainer.global_step,
            "seen": model.seen,
        }
        torch.save(final, arguments.root / "final.pt")


if __name__ == "__main__":
    main()
