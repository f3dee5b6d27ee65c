"""A job for the failure and signal tests: ``python tests/launch/fault_script.py --root R``.

Each rank writes its process id to ``R/pid<rank>.txt`` when training starts and
prints ``rank <r> step <n>`` after each step (sleeping ``--delay`` seconds, so
that a test can signal it mid-run). ``--fail-rank r`` makes rank r print
``rank r failing`` and raise at step 5; ``--hang-rank r`` makes it print
``rank r hanging`` and sleep at step 5, leaving the other ranks blocked in the
step's gradient all-reduce. When fit returns, the process that called it
writes ``R/done.txt``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

import trainkit
from tests.helpers import Classifier, blobs


class Job(Classifier):
    def __init__(self, fail_rank: int, hang_rank: int) -> None:
        super().__init__()
        self.fail_rank = fail_rank
        self.hang_rank = hang_rank

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        rank = self.trainer.strategy.global_rank
        if self.global_step == 5 and rank == self.fail_rank:
            print(f"rank {rank} failing", flush=True)
            raise RuntimeError(f"deliberate failure on rank {rank} at step 5")
        if self.global_step == 5 and rank == self.hang_rank:
            print(f"rank {rank} hanging", flush=True)
            time.sleep(600)
        return super().training_step(batch, batch_idx)


class Report(trainkit.Callback):
    def __init__(self, root: str, delay: float) -> None:
        self.root = root
        self.delay = delay

    def on_train_start(self, trainer: trainkit.Trainer, module: trainkit.Module) -> None:
        Path(self.root, f"pid{trainer.global_rank}.txt").write_text(str(os.getpid()))

    def on_train_batch_end(self, trainer: trainkit.Trainer, *args: Any) -> None:
        print(f"rank {trainer.global_rank} step {trainer.global_step}", flush=True)
        time.sleep(self.delay)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--strategy", default="ddp")
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--hang-rank", type=int, default=-1)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--max-steps", type=int, default=60)
    args = parser.parse_args()
    trainer = trainkit.Trainer(
        max_steps=args.max_steps,
        strategy=args.strategy,
        accelerator="cpu",
        devices=2,
        seed=0,
        default_root_dir=args.root,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=[Report(args.root, args.delay)],
    )
    data = DataLoader(blobs(2048), batch_size=16, shuffle=True)
    trainer.fit(Job(args.fail_rank, args.hang_rank), data)
    Path(args.root, "done.txt").write_text(str(trainer.global_step))


if __name__ == "__main__":
    main()
