"""The wide MLP shared by benchmarks/fsdp.py and async_save.py."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

import trainkit


class Wide(trainkit.Module):
    """``blocks`` blocks of Linear(width, width) + ReLU; AdamW on the output's mean square."""

    def __init__(self, width: int, blocks: int) -> None:
        super().__init__()
        self.blocks = nn.Sequential(
            *[nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(blocks)]
        )

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        (x,) = batch
        return self.blocks(x).square().mean()  # type: ignore[no-any-return]

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=1e-4)
