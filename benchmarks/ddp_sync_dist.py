"""What ``self.log(..., sync_dist=True)`` in ``training_step`` costs a DDP step.

Two gloo processes on the CPU (one torch thread each) train the tiny MLP of
overhead.py (32->64->10, SGD, per-rank batch 64, 150 steps an epoch) for 3
epochs, logging the loss every step without and with ``sync_dist=True``,
alternating the two 3 times. It prints the median time per step of the epochs
after the first of each fit. ``--lightning`` runs the same with
``lightning.pytorch`` (when it is installed), which reduces the value in every
``self.log`` call; trainkit reduces it where it is used (see docs/strategies.md).

Run from the repository root::

    PYTHONPATH=. python benchmarks/ddp_sync_dist.py [--lightning]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import warnings
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

STEPS = 150


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lightning", action="store_true", help="time lightning.pytorch")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    if args.lightning:
        import lightning.pytorch as framework

        base: Any = framework.LightningModule
    else:
        import trainkit as framework

        base = framework.Module

    class Net(base):  # type: ignore[misc, valid-type]
        def __init__(self, sync: bool) -> None:
            super().__init__()
            self.sync, self.times = sync, []
            self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = nn.functional.cross_entropy(self.net(batch[0]), batch[1])
            self.log("loss", loss, sync_dist=self.sync)
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

        def on_train_epoch_start(self) -> None:
            self.started = time.perf_counter()

        def on_train_epoch_end(self) -> None:
            self.times.append(time.perf_counter() - self.started)

    generator = torch.Generator().manual_seed(0)
    samples = 2 * 64 * STEPS
    x = torch.randn(samples, 32, generator=generator)
    y = torch.randint(0, 10, (samples,), generator=generator)
    data = DataLoader(TensorDataset(x, y), batch_size=64)
    per_step: dict[str, list[float]] = {"without": [], "sync_dist=True": []}
    for _ in range(3):
        for sync, key in ((False, "without"), (True, "sync_dist=True")):
            model = Net(sync)
            trainer = framework.Trainer(
                max_epochs=3,
                strategy="ddp",
                devices=2,
                accelerator="cpu",
                logger=False,
                enable_progress_bar=False,
                enable_model_summary=False,
                enable_checkpointing=False,
            )
            trainer.fit(model, data)
            per_step[key] += [t / STEPS * 1e6 for t in model.times[1:]]
    if int(os.environ.get("RANK", "0")) == 0:
        medians = {key: round(statistics.median(v), 1) for key, v in per_step.items()}
        name = "lightning" if args.lightning else "trainkit"
        extra = round(medians["sync_dist=True"] - medians["without"], 1)
        print(json.dumps({"framework": name, "us_per_step": medians, "sync_dist_extra_us": extra}))


if __name__ == "__main__":
    main()
