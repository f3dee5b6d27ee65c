"""A training script for the launch tests: ``torchrun --nproc-per-node 2 script.py --root R``.

Each rank writes ``rank<N>.txt`` with the steps it trained when training ends;
the process that called fit writes ``caller.txt`` with the steps its Trainer
reports and a checksum of its module's weights. With ``EXIT_RECORD_DIR`` set,
every process that imports this script (the ranks a ``ddp_spawn`` run starts
too) writes ``exit<RANK>.txt`` there when it exits, saying whether it had left
the process group by then. ``--fail-rank`` makes that rank raise at step 5.
``--strategy ddp_spawn`` starts the ranks from inside fit.
"""

from __future__ import annotations

import argparse
import atexit
import os
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
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


def lightning_utilities_rank() -> int | None:
    """``lightning_utilities``' rank_zero_only.rank (None: unset), which libraries log by."""
    from lightning_utilities.core.rank_zero import rank_zero_only

    return getattr(rank_zero_only, "rank", None)


# What importing trainkit set it to, from the launcher's variables.
RANK_AT_IMPORT = lightning_utilities_rank()


class RecordRank(trainkit.Callback):
    def __init__(self, root: str) -> None:
        self.root = root

    def on_train_start(self, trainer: trainkit.Trainer, module: trainkit.Module) -> None:
        # Once the processes are set up, both rank_zero_only agree on the global rank.
        ranks = (RANK_AT_IMPORT, lightning_utilities_rank(), trainkit.rank_zero_only.rank)
        rank = trainer.strategy.global_rank
        Path(self.root, f"ranks{rank}.txt").write_text(" ".join(map(str, ranks)))

    def on_train_end(self, trainer: trainkit.Trainer, module: trainkit.Module) -> None:
        rank = trainer.strategy.global_rank
        Path(self.root, f"rank{rank}.txt").write_text(str(trainer.global_step))


def record_group_at_exit() -> None:
    state = "still joined" if dist.is_initialized() else "left"
    Path(os.environ["EXIT_RECORD_DIR"], f"exit{os.environ.get('RANK', 'caller')}.txt").write_text(
        state
    )


if "EXIT_RECORD_DIR" in os.environ:
    # Registered on import, before any Trainer exists: it runs after every exit
    # handler trainkit registers.
    atexit.register(record_group_at_exit)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--strategy", default="ddp")
    args = parser.parse_args()
    trainer = trainkit.Trainer(
        max_epochs=3,
        strategy=args.strategy,
        accelerator="cpu",
        devices=2,
        seed=0,
        default_root_dir=args.root,
        logger=CSVLogger(args.root),
        log_every_n_steps=2,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[RecordRank(args.root)],
    )
    model = MaybeFailing(args.fail_rank)
    trainer.fit(model, DataLoader(blobs(128), batch_size=16, shuffle=True))
    if trainer.is_global_zero:
        checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
        Path(args.root, "caller.txt").write_text(f"{trainer.global_step} {checksum!r}")


if __name__ == "__main__":
    main()
