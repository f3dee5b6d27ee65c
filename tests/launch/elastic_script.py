"""A DDP job for the elastic-restart test: ``torchrun --max-restarts 2 elastic_script.py``.

With ``--kill-step K`` rank 1 SIGKILLs itself at step K on the job's first
attempt (as a node failure would); torchrun then restarts every worker, and the
restarted fit, given no ``ckpt_path``, continues from the last checkpoint.
With ``--kill-node`` the worker of the node started with ``TRAINKIT_TEST_NODE=b``
SIGKILLs its torchrun agent and itself instead (the node is lost: under
``--nnodes 1:2`` the job goes on with the other node alone). ``--global-batch G``
gives each rank ``G // world_size`` samples per step, so the global batch stays
``G`` when the number of processes changes. Rank 0 writes ``final.pt`` (the
weights) and appends ``<step> <world size>`` for each attempt's start to
``starts.txt``.
"""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

import trainkit
from tests.helpers import Classifier, blobs
from trainkit.callbacks import ModelCheckpoint


class KilledOnce(Classifier):
    def __init__(self, kill_step: int, root: str, kill_node: bool = False) -> None:
        super().__init__(lr=0.2)
        self.kill_step = kill_step
        self.root = root
        self.kill_node = kill_node

    def on_train_start(self) -> None:
        if self.trainer.global_rank == 0:
            with open(Path(self.root, "starts.txt"), "a") as file:
                file.write(f"{self.trainer.global_step} {self.trainer.world_size}\n")

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
        if first_attempt and self.global_step == self.kill_step:
            if self.kill_node and os.environ.get("TRAINKIT_TEST_NODE") == "b":
                os.kill(os.getppid(), signal.SIGKILL)  # the node's agent
                os.kill(os.getpid(), signal.SIGKILL)
            if not self.kill_node and self.trainer.global_rank == 1:
                os.kill(os.getpid(), signal.SIGKILL)
        return super().training_step(batch, batch_idx)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--kill-step", type=int, default=-1)
    parser.add_argument("--kill-node", action="store_true")
    parser.add_argument("--global-batch", type=int, default=0)
    args = parser.parse_args()
    trainer = trainkit.Trainer(
        strategy="ddp",
        accelerator="cpu",  # gloo processes, on any machine
        max_epochs=3,
        seed=7,
        default_root_dir=args.root,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        # A restart whose process group cannot form (torch's own restarts sometimes
        # fail to connect) fails fast, and torchrun restarts it again.
        process_group_timeout=30,
        callbacks=[
            ModelCheckpoint(
                dirpath=os.path.join(args.root, "checkpoints"),
                every_n_train_steps=2,
                save_last=True,
            )
        ],
    )
    model = KilledOnce(args.kill_step, args.root, args.kill_node)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    batch_size = args.global_batch // world_size if args.global_batch else 16
    trainer.fit(model, DataLoader(blobs(256, seed=0), batch_size=batch_size, shuffle=True))
    if trainer.global_rank == 0:
        torch.save(model.state_dict(), Path(args.root, "final.pt"))


if __name__ == "__main__":
    main()
