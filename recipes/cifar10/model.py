"""A compact ResNet for 32x32 images, in the style of the DAWNBench "ResNet-9"."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import trainkit
from recipes.metrics import MulticlassAccuracy, accuracy

# The classifier's outputs are multiplied by this. Small initial logits keep the
# first high-LR steps of the one-cycle schedule from saturating the softmax; the
# DAWNBench ResNet-9 uses the same factor.
LOGIT_SCALE = 0.125


def conv_block(in_channels: int, out_channels: int, pool: bool = False) -> nn.Sequential:
    """3x3 convolution, BatchNorm and ReLU, optionally followed by a 2x2 max pool.

    Args:
        in_channels: input channels.
        out_channels: output channels.
        pool: halve the height and width at the end.
    """
    # No conv bias: the BatchNorm right after it has its own shift.
    layers: list[nn.Module] = [
        nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    ]
    if pool:
        layers.append(nn.MaxPool2d(2))
    return nn.Sequential(*layers)


class Residual(nn.Module):
    """``x + block(x)``, with ``block`` two conv blocks that keep the shape.

    Args:
        channels: input and output channels.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.block = nn.Sequential(conv_block(channels, channels), conv_block(channels, channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)  # type: ignore[no-any-return]


class CIFAR10ResNet(trainkit.Module):
    """ResNet-9: eight conv layers in three stages, two of them with a residual pair.

    With base width ``w``: a prep conv (w), then conv(2w)+pool+residual(2w),
    conv(4w)+pool, conv(8w)+pool+residual(8w), a global max pool and a linear
    layer to the 10 classes. At ``width=64`` that is 6.6 M parameters and about
    0.4 G multiply-adds an image. Trained with SGD (Nesterov momentum), a
    one-cycle LR schedule over the whole fit, and label smoothing.

    Args:
        lr: peak learning rate of the one-cycle schedule.
        weight_decay: SGD weight decay (L2), applied to every parameter.
        momentum: SGD Nesterov momentum, constant through training.
        label_smoothing: label smoothing of the training loss (evaluation losses
            are plain cross-entropy).
        width: channels of the first layer; the stages use 2x, 4x and 8x that.
    """

    def __init__(
        self,
        lr: float = 0.1,
        weight_decay: float = 5e-4,
        momentum: float = 0.9,
        label_smoothing: float = 0.1,
        width: int = 64,
    ) -> None:
        super().__init__()
        if width < 1:
            raise ValueError(f"CIFAR10ResNet(width={width}) must be a positive channel count.")
        self.save_hyperparameters()
        self.features = nn.Sequential(
            conv_block(3, width),  # 32x32
            conv_block(width, 2 * width, pool=True),  # 16x16
            Residual(2 * width),
            conv_block(2 * width, 4 * width, pool=True),  # 8x8
            conv_block(4 * width, 8 * width, pool=True),  # 4x4
            Residual(8 * width),
        )
        self.head = nn.Sequential(nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(8 * width, 10))
        # Top-1 accuracy over the whole evaluation set: the metric counts correct
        # predictions itself and, with several processes, adds up every process's
        # counts when the epoch ends (no sync_dist needed).
        self.val_acc = accuracy(10)
        self.test_acc = accuracy(10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.head(self.features(x))
        return logits * LOGIT_SCALE

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        images, labels = batch
        loss = F.cross_entropy(self(images), labels, label_smoothing=self.hparams.label_smoothing)
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
        optimizer = torch.optim.SGD(
            self.parameters(),
            lr=self.hparams.lr,
            momentum=self.hparams.momentum,
            weight_decay=self.hparams.weight_decay,
            nesterov=True,
        )
        scheduler = torch.optim.lr_scheduler.OneCycleLR(
            optimizer,
            max_lr=self.hparams.lr,
            total_steps=self.trainer.estimated_stepping_batches,
            # Warm up over the first quarter of training (the DAWNBench schedule
            # peaks at epoch 5 of 24), then anneal towards zero.
            pct_start=0.25,
            # OneCycleLR would otherwise overwrite the momentum with its own
            # 0.85-0.95 cycle, silently ignoring the `momentum` argument.
            cycle_momentum=False,
        )
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }
