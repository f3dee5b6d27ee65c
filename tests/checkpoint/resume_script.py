"""A training run for the resume tests, meant to be killed and restarted.

Run as ``python -m tests.checkpoint.resume_script --root DIR [...]``. It prints ``step N``
after every optimizer step (so a test can kill it at a chosen step) and, when it
finishes, writes the final parameters and metrics to ``DIR/final.pt``.

The run exercises everything a resume must restore: a shuffled DataLoader (or a
DistributedSampler), dropout (the torch RNG), AdamW (optimizer state), a
step-interval LR scheduler, validation in the middle of epochs, epoch-mean
metrics, early-stopping counters, a top-k checkpoint table and the logger's
version.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, DistributedSampler

import trainkit
from tests.helpers import Classifier, blobs
from trainkit.callbacks import EarlyStopping, ModelCheckpoint
from trainkit.loggers import CSVLogger


class DropoutClassifier(Classifier):
    def __init__(self) -> None:
        super().__init__(lr=0.01)
        self.net.insert(1, torch.nn.Dropout(0.2))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = super().training_step(batch, batch_idx)
        self.log("train/loss_epoch_mean", loss, on_step=False, on_epoch=True)
        return loss

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=7, gamma=0.7)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }


class PrintSteps(trainkit.Callback):
    def __init__(self, delay: float) -> None:
        self.delay = delay

    def on_train_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
        if trainer.is_global_zero:  # one line per step in a job of several processes too
            print(f"step {trainer.global_step}", flush=True)
        time.sleep(self.delay)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--max-steps", type=int, default=40)
    parser.add_argument("--num-workers", type=int, default=0)
    parser.add_argument("--sampler", choices=["default", "distributed"], default="default")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--every", type=int, default=3)
    args = parser.parse_args()

    torch.manual_seed(1)
    train_set, val_set = blobs(330, seed=0), blobs(70, seed=1)
    if args.sampler == "distributed":
        # One replica of two: no process group is needed to shard and shuffle.
        sampler = DistributedSampler(train_set, num_replicas=2, rank=0, shuffle=True, seed=5)
        train = DataLoader(train_set, batch_size=16, sampler=sampler, num_workers=args.num_workers)
    else:
        train = DataLoader(train_set, batch_size=32, shuffle=True, num_workers=args.num_workers)
    val = DataLoader(val_set, batch_size=32)
    # The folder the tests inspect (an explicit dirpath: with a logger, the default
    # folder is the run's own, <root>/logs/version_0/checkpoints).
    checkpoints = ModelCheckpoint(
        dirpath=os.path.join(args.root, "checkpoints"),
        every_n_train_steps=args.every,
        monitor="val/loss",
        save_top_k=2,
        save_last=True,
    )
    trainer = trainkit.Trainer(
        max_steps=args.max_steps,
        val_check_interval=4,
        default_root_dir=args.root,
        logger=CSVLogger(args.root),
        callbacks=[checkpoints, EarlyStopping("val/loss", patience=1000), PrintSteps(args.delay)],
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        deterministic=True,
        seed=0,
    )
    model = DropoutClassifier()
    trainer.fit(model, train, val, ckpt_path="last" if args.resume else None)
    torch.save(
        {
            "state_dict": model.state_dict(),
            "metrics": {k: float(v) for k, v in trainer.callback_metrics.items()},
            "global_step": trainer.global_step,
            "best_model_path": checkpoints.best_model_path,
            "best_model_score": checkpoints.best_model_score,
            "best_k_models": checkpoints.best_k_models,
            "log_dir": trainer.log_dir,
        },
        Path(args.root) / "final.pt",
    )


if __name__ == "__main__":
    main()
