"""A DDP script where rank 0 alone logs a value with ``sync_dist=True``.

``torchrun --nproc-per-node 2 mismatch_script.py --where validation|training
--sanity N --root R``: rank 0 logs ``only_on_rank_zero`` in that step; every
process writes ``exit<RANK>.txt`` with "finished" if its ``fit`` returned.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

import trainkit
from tests.helpers import Classifier, blobs


class LogsOnRankZero(Classifier):
    def __init__(self, where: str) -> None:
        super().__init__()
        self.where = where

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = super().training_step(batch, batch_idx)
        if self.where == "training" and self.trainer.global_rank == 0:
            self.log("only_on_rank_zero", loss.detach(), sync_dist=True)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        super().validation_step(batch, batch_idx)
        if self.where == "validation" and self.trainer.global_rank == 0:
            self.log("only_on_rank_zero", 1.0, sync_dist=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--where", choices=["training", "validation"], required=True)
    parser.add_argument("--sanity", type=int, default=2)
    parser.add_argument("--root", required=True)
    args = parser.parse_args()
    trainer = trainkit.Trainer(
        strategy="ddp",
        accelerator="cpu",  # the control channel is what is tested, on any machine
        devices=2,
        max_epochs=2,
        num_sanity_val_steps=args.sanity,
        log_every_n_steps=1,
        default_root_dir=args.root,
        enable_progress_bar=False,
        enable_model_summary=False,
        process_group_timeout=20,
    )
    data = blobs(128)
    trainer.fit(
        LogsOnRankZero(args.where),
        DataLoader(data, batch_size=16),
        DataLoader(data, batch_size=16),
    )
    Path(args.root, f"exit{os.environ.get('RANK', '0')}.txt").write_text("finished")


if __name__ == "__main__":
    main()
