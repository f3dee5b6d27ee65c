"""A compact CNN for MNIST: two conv blocks and a small classifier head."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import trainkit
from recipes.metrics import MulticlassAccuracy, accuracy


class MNISTClassifier(trainkit.Module):
    """Conv(16, 3x3)-BN-pool-ReLU, Conv(32, 3x3)-BN-pool-ReLU, FC(128)-dropout-FC(10).

    About 1.2 M multiply-adds an image, a tenth of the classic conv32-conv64-fc128
    example network, trained with AdamW and a one-cycle LR schedule. Two choices
    make it fast on a CPU without changing what it computes much:

    * each block pools before its ReLU: max-pooling and ReLU commute (both keep the
      larger value), so the result is the same and ReLU touches a quarter as many
      values;
    * the weights and the images are in ``torch.channels_last`` memory format, for
      which the CPU's convolution, batch-norm and pooling kernels are vectorised
      over channels (about twice as fast a step here: docs/performance.md).

    Args:
        lr: peak learning rate of the one-cycle schedule.
        weight_decay: AdamW weight decay.
        dropout: dropout before the last layer.
    """

    def __init__(self, lr: float = 0.01, weight_decay: float = 1e-4, dropout: float = 0.1) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.MaxPool2d(2),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1, bias=False),
            nn.BatchNorm2d(32),
            nn.MaxPool2d(2),
            nn.ReLU(),
        )
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Linear(32 * 7 * 7, 128),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(128, 10),
        )
        self.to(memory_format=torch.channels_last)  # the 4-d conv weights
        # Top-1 accuracy over the whole evaluation set: the metric counts correct
        # predictions itself and, with several processes, adds up every process's
        # counts when the epoch ends (no sync_dist needed).
        self.val_acc = accuracy(10)
        self.test_acc = accuracy(10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous(memory_format=torch.channels_last)
        return self.head(self.features(x))  # type: ignore[no-any-return]

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        images, labels = batch
        loss = F.cross_entropy(self(images), labels)
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def _evaluate(self, batch: Any, stage: str, accuracy: MulticlassAccuracy) -> None:
        images, labels = batch
        logits = self(images)
        self.log(f"{stage}/loss", F.cross_entropy(logits, labels))
        accuracy.update(logits, labels)
        # The Metric itself is logged: its epoch value is compute() over every batch.
        self.log(f"{stage}/acc", accuracy, prog_bar=True)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self._evaluate(batch, "val", self.val_acc)

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self._evaluate(batch, "test", self.test_acc)

    def predict_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        images = batch[0] if isinstance(batch, (tuple, list)) else batch
        logits: torch.Tensor = self(images)
        return logits.argmax(dim=1)

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.AdamW(
            self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay
        )
        steps = self.trainer.estimated_stepping_batches
        scheduler = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, self.hparams.lr, total_steps=steps
        )
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }
