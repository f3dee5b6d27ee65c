"""A training script for the launch tests: ``torchrun --nproc-per-node 2 script.py --root R``.

Each rank writes ``rank<N>.txt`` with the steps it trained. ``--fail-rank`` makes
that rank raise at step 5.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

import trainkit
from tests.helpers import Classifier, blobs
from trainkit.loggers import CSVLogger


class MaybeFailing(Classifier):
    def __init__(self, fail_rank: int) -> None:
        super().__init__()
        self.fail_rank = fail_rank

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if self.trainer.strategy.global_rank == self.fail_rank and self.global_step == 5:
            raise RuntimeError(f"deliberate failure on rank {self.fail_rank} at step 5")
        return super().training_step(batch, batch_idx)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--fail-rank", type=int, default=-1)
    args = parser.parse_args()
    trainer = trainkit.Trainer(
        max_epochs=3,
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        seed=0,
        default_root_dir=args.root,
        logger=CSVLogger(args.root),
        log_every_n_steps=2,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(MaybeFailing(args.fail_rank), DataLoader(blobs(128), batch_size=16, shuffle=True))
    rank = trainer.strategy.global_rank
    Path(args.root, f"rank{rank}.txt").write_text(str(trainer.global_step))


if __name__ == "__main__":
    main()
