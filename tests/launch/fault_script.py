"""A job for the failure and signal tests: ``python tests/launch/fault_script.py --root R``.

Each rank writes its process id to ``R/pid<rank>.txt`` when training starts and
prints ``rank <r> step <n>`` after each step (sleeping ``--delay`` seconds, so
that a test can signal it mid-run). ``--fail-rank r`` makes rank r print
``rank r failing`` and raise at step 5; ``--hang-rank r`` makes it print
``rank r hanging`` and sleep at step 5, leaving the other ranks blocked in the
step's gradient all-reduce. When fit returns, the process that called it
writes ``R/done.txt``. ``--disk-full-rank r`` saves a checkpoint every 5 steps,
and rank r's disk is full from the start (its saves fail with ENOSPC).
"""

from __future__ import annotations

import argparse
import errno
import importlib.util
import io
import os
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

import trainkit
from tests.helpers import Classifier, blobs
from trainkit.callbacks import ModelCheckpoint


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
        # The rank libraries log by (lightning_utilities'), once the processes are set up.
        if importlib.util.find_spec("lightning_utilities") is not None:
            from lightning_utilities.core.rank_zero import rank_zero_only

            rank = str(rank_zero_only.rank)
            Path(self.root, f"ranks{trainer.global_rank}.txt").write_text(rank)

    def on_train_batch_end(self, trainer: trainkit.Trainer, *args: Any) -> None:
        print(f"rank {trainer.global_rank} step {trainer.global_step}", flush=True)
        time.sleep(self.delay)


class FullDisk(trainkit.Callback):
    """Rank ``rank``'s disk is full: every write of a checkpoint fails with ENOSPC."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def on_train_start(self, trainer: trainkit.Trainer, module: trainkit.Module) -> None:
        if trainer.global_rank != self.rank:
            return
        real_save = torch.save

        class Full(io.RawIOBase):
            def writable(self) -> bool:
                return True

            def write(self, data: Any) -> int:
                raise OSError(errno.ENOSPC, "No space left on device")

        torch.save = lambda obj, file, **kw: real_save(obj, Full(), **kw)  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--strategy", default="ddp")
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--hang-rank", type=int, default=-1)
    parser.add_argument("--disk-full-rank", type=int, default=-1)
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
        callbacks=[Report(args.root, args.delay), *_disk(args.root, args.disk_full_rank)],
    )
    data = DataLoader(blobs(2048), batch_size=16, shuffle=True)
    trainer.fit(Job(args.fail_rank, args.hang_rank), data)
    Path(args.root, "done.txt").write_text(str(trainer.global_step))


def _disk(root: str, rank: int) -> list[trainkit.Callback]:
    if rank < 0:
        return []
    every_5 = ModelCheckpoint(dirpath=Path(root, "ckpt"), every_n_train_steps=5)
    return [FullDisk(rank), every_5]


if __name__ == "__main__":
    main()
