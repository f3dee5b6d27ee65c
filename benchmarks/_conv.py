"""The conv-net workload and step clock shared by benchmarks/precision.py and compile.py."""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import trainkit

SEED = 0
BATCH_SIZE = 64
WARMUP_STEPS = 5
LR = 0.05
CLASSES = 10

Batch = tuple[torch.Tensor, ...]  # (images, labels)


class ConvModule(trainkit.Module):
    """The conv net every fit trains, initialised from ``SEED``."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(SEED)
        self.network = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, CLASSES),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)  # type: ignore[no-any-return]

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=LR, momentum=0.9)


class StepTimer(trainkit.Callback):
    """Records each training step's wall time."""

    def __init__(self, device: str) -> None:
        self.cuda = device == "cuda"
        self.durations: list[float] = []
        self._start = 0.0

    def sync(self) -> None:
        # CUDA kernels run asynchronously: without a sync the clock would stop
        # when the work is queued, not when it is done.
        if self.cuda:
            torch.cuda.synchronize()

    def on_train_batch_start(self, trainer: Any, module: Any, batch: Any, batch_idx: int) -> None:
        self.sync()
        self._start = time.perf_counter()

    def on_train_batch_end(
        self, trainer: Any, module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self.sync()
        self.durations.append(time.perf_counter() - self._start)
