"""One rank of a job started by hand: ``python init_script.py --init-method M --rank R ...``.

No torchrun, no SLURM, no trainkit launcher: the process is told its rank, the
job's size and where to meet (``DDPStrategy(init_method=...)``). It trains the
blob classifier at 16 samples per rank; rank 0 saves the final weights to
``--out``.
"""

from __future__ import annotations

import argparse
from datetime import timedelta

import torch
from torch.utils.data import DataLoader

import trainkit
from tests.helpers import QUIET, Classifier, blobs
from trainkit.strategies.ddp import DDPStrategy


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--init-method", required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    strategy = DDPStrategy(
        init_method=args.init_method,
        rank=args.rank,
        world_size=args.world_size,
        timeout=timedelta(seconds=60),
    )
    torch.manual_seed(0)
    model = Classifier(lr=0.2)
    trainer = trainkit.Trainer(max_steps=args.steps, strategy=strategy, seed=7, **QUIET)
    trainer.fit(model, DataLoader(blobs(256, seed=0), batch_size=16, shuffle=True))
    if trainer.global_rank == 0:
        torch.save(model.state_dict(), args.out)


if __name__ == "__main__":
    main()
