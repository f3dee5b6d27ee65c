"""What a sharded checkpoint costs the training, written in the foreground or in the background.

A 33.6M-parameter MLP (8 blocks of Linear 2048x2048 + ReLU, float32, AdamW: about
385 MiB of parameters and optimizer state, half of it on each process) trains
under ``FSDPStrategy`` on 2 gloo processes on the CPU, saving a sharded
checkpoint every ``--every`` steps (``ModelCheckpoint(every_n_train_steps=...,
save_top_k=-1)``), three ways:

- ``none``: no checkpoint (the baseline);
- ``sync``: ``FSDPStrategy(async_save=False)``: each save returns once its folder is committed;
- ``async``: ``FSDPStrategy(async_save=True)``: each save returns once its state is staged
  (copied); writing, digests and the commit go on in the background.

It reports each run's fit time, the time the training thread spent inside the
strategy's ``save_checkpoint`` (the time a save blocks training; with
``async_save`` it includes waiting for the previous background write), and the
checkpoint cost: fit time minus the baseline's. The variants alternate over
``--repeats`` rounds; the minimum of each is reported, since noise only adds
time. Every run checks that its checkpoint folders are complete.

Run from the repository root::

    PYTHONPATH=. python benchmarks/async_save.py [--steps 40] [--every 10] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import _report  # benchmarks/_report.py, beside this script
import torch
from _wide import Wide  # benchmarks/_wide.py, beside this script
from torch.utils.data import DataLoader, TensorDataset

import trainkit
from tests.distributed.spawn import run_processes
from trainkit.callbacks import ModelCheckpoint
from trainkit.checkpoint.sharded import META_FILE
from trainkit.strategies.fsdp import FSDPStrategy

VARIANTS = ("none", "sync", "async")


class TimedFSDP(FSDPStrategy):
    """FSDPStrategy that adds up the time its ``save_checkpoint`` calls take."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.save_seconds = 0.0
        self.saves = 0

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike[str]) -> None:
        start = time.perf_counter()
        super().save_checkpoint(checkpoint, path)
        self.save_seconds += time.perf_counter() - start
        self.saves += 1


def worker(
    variant: str, root: str, width: int, blocks: int, steps: int, every: int
) -> tuple[float, float, int]:
    """One fit; returns (fit seconds, seconds inside save_checkpoint, saves)."""
    torch.manual_seed(0)
    model = Wide(width, blocks)
    strategy = TimedFSDP(async_save=variant == "async")
    callbacks = []
    if variant != "none":
        callbacks.append(
            ModelCheckpoint(
                dirpath=root,
                every_n_train_steps=every,
                save_top_k=-1,
                save_on_train_epoch_end=False,
            )
        )
    data = DataLoader(TensorDataset(torch.randn(steps * 8, width)), batch_size=4)
    start = time.perf_counter()
    trainer = trainkit.Trainer(
        max_steps=steps,
        strategy=strategy,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=variant != "none",
        callbacks=callbacks,
    )
    trainer.fit(model, data)  # returns once every background write is committed
    return time.perf_counter() - start, strategy.save_seconds, strategy.saves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(_report.exact_command())
    for key, value in _report.machine_info().items():
        print(f"{key}: {value}")
    parameters = args.blocks * (args.width * args.width + args.width)
    print(
        f"model: {parameters / 1e6:.1f}M parameters, AdamW, float32, FSDP on 2 gloo processes; "
        f"{args.steps} steps, a sharded checkpoint every {args.every}"
    )
    best: dict[str, tuple[float, float, int]] = {}
    for round_ in range(args.repeats):
        for variant in VARIANTS:
            with tempfile.TemporaryDirectory() as root:
                results = run_processes(
                    worker, 2, variant, root, args.width, args.blocks, args.steps, args.every,
                    timeout=1200,
                )  # fmt: skip
                folders = sorted(p for p in Path(root).iterdir() if p.is_dir())
                if variant != "none":
                    expected = args.steps // args.every
                    complete = [p for p in folders if (p / META_FILE).is_file()]
                    if len(complete) != expected or len(folders) != expected:
                        raise RuntimeError(
                            f"{variant}: {len(complete)} complete checkpoint folders of "
                            f"{len(folders)}, expected {expected}: {[p.name for p in folders]}"
                        )
            fit_seconds = max(r[0] for r in results)
            save_seconds = max(r[1] for r in results)
            saves = results[0][2]
            print(
                f"round {round_ + 1} {variant:>5}: fit {fit_seconds:7.2f} s, "
                f"in save_checkpoint {save_seconds:6.2f} s over {saves} saves"
            )
            if variant not in best or fit_seconds < best[variant][0]:
                best[variant] = (fit_seconds, save_seconds, saves)
    baseline = best["none"][0]
    print(f"\n{'variant':>7} {'fit s':>8} {'cost s':>8} {'blocked s/save':>15}")
    for variant in VARIANTS:
        fit_seconds, save_seconds, saves = best[variant]
        per_save = f"{save_seconds / saves:15.2f}" if saves else f"{'-':>15}"
        print(f"{variant:>7} {fit_seconds:8.2f} {fit_seconds - baseline:8.2f} {per_save}")


if __name__ == "__main__":
    main()
