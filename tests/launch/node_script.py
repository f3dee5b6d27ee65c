"""One machine's part of a DDP job, for the two-machine tests: ``torchrun ... node_script.py``.

Trains the blob classifier in float64 at a global batch of ``--global-batch``
samples (each of the job's processes takes ``G // world_size`` a step, so the
result does not depend on how many processes share the work) for
``--max-steps`` steps, checkpointing every 2 steps. Rank 0 writes its logs and
checkpoints under ``--root``, the weights to ``ROOT/final.pt`` and, for each
attempt, ``<step> <world size>`` to ``ROOT/starts.txt``. Every process writes
``ROOT/rank<r>.txt`` (the steps it trained) and prints
``node <NODE> rank <r> step <n>`` after each step, then sleeps ``--delay``
seconds (so that a test can act mid-run); ``NODE`` is ``TRAINKIT_TEST_NODE``.
Run without torchrun, it is the single-process reference.
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
from trainkit.callbacks import ModelCheckpoint
from trainkit.loggers import CSVLogger


class Report(trainkit.Callback):
    def __init__(self, root: str, delay: float) -> None:
        self.root = root
        self.delay = delay
        self.node = os.environ.get("TRAINKIT_TEST_NODE", "-")

    def on_train_start(self, trainer: trainkit.Trainer, module: trainkit.Module) -> None:
        if trainer.global_rank == 0:
            with open(Path(self.root, "starts.txt"), "a") as file:
                file.write(f"{trainer.global_step} {trainer.world_size}\n")

    def on_train_batch_end(self, trainer: trainkit.Trainer, *args: Any) -> None:
        print(f"node {self.node} rank {trainer.global_rank} step {trainer.global_step}", flush=True)
        time.sleep(self.delay)

    def on_train_end(self, trainer: trainkit.Trainer, module: trainkit.Module) -> None:
        Path(self.root, f"rank{trainer.global_rank}.txt").write_text(str(trainer.global_step))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--global-batch", type=int, default=32)
    parser.add_argument("--max-steps", type=int, default=12)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    # float64: the sums of gradients over 1, 2 or 4 processes agree to rounding.
    torch.set_default_dtype(torch.float64)
    Path(args.root).mkdir(parents=True, exist_ok=True)
    trainer = trainkit.Trainer(
        strategy="ddp",
        accelerator="cpu",  # gloo processes, on any machine
        max_steps=args.max_steps,
        seed=7,
        default_root_dir=args.root,
        logger=CSVLogger(args.root),
        log_every_n_steps=1,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        process_group_timeout=args.timeout,
        callbacks=[
            Report(args.root, args.delay),
            ModelCheckpoint(
                dirpath=os.path.join(args.root, "checkpoints"),
                every_n_train_steps=2,
                save_last=True,
            ),
        ],
    )
    model = Classifier(lr=0.2)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    data = DataLoader(blobs(256, seed=0), batch_size=args.global_batch // world_size, shuffle=True)
    trainer.fit(model, data)
    if trainer.global_rank == 0:
        torch.save(model.state_dict(), Path(args.root, "final.pt"))


if __name__ == "__main__":
    main()
