"""A Lightning project's ``main.py``, ported by changing its import (LightningCLI tests).

Run as ``python tests/cli/lightning_main.py fit ...`` or imported by the tests.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

# Run as a script from anywhere: the repository root on the path, as `pip install -e` would.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import trainkit.lightning as L
from trainkit.lightning.cli import LightningCLI


class TinyModel(L.LightningModule):
    """A linear regressor; ``configure_optimizers`` is left to ``--optimizer``."""

    def __init__(self, features: int = 4, lr: float = 0.1) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(features, 1)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y))

    def test_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("test_loss", torch.nn.functional.mse_loss(self.layer(x), y))


class OwnOptimizerModel(TinyModel):
    """A model with its own ``configure_optimizers`` (SGD with ``lr``)."""

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class NeedsWidthModel(TinyModel):
    """A model with a required argument (no default)."""

    def __init__(self, width: int, lr: float = 0.1) -> None:
        super().__init__(features=width, lr=lr)


class Encoder(torch.nn.Module):
    """A submodule a config gives as a class_path entry (dependency injection)."""

    def __init__(self, features: int = 4, width: int = 3) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(features, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.layer(x))


class InjectedModel(L.LightningModule):
    """A regressor whose encoder is built from the config and passed in."""

    def __init__(self, encoder: torch.nn.Module, lr: float = 0.1) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.encoder = encoder
        self.head = torch.nn.Linear(encoder.layer.out_features, 1)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.mse_loss(self.head(self.encoder(x)), y)

    def test_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("test_loss", torch.nn.functional.mse_loss(self.head(self.encoder(x)), y))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class TinyData(L.LightningDataModule):
    """32 random regression samples, the same every time."""

    def __init__(self, batch_size: int = 8, features: int = 4) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.features = features

    def _loader(self) -> DataLoader[Any]:
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(32, self.features, generator=generator)
        y = x.sum(dim=1, keepdim=True)
        return DataLoader(TensorDataset(x, y), batch_size=self.batch_size)

    def train_dataloader(self) -> DataLoader[Any]:
        return self._loader()

    def val_dataloader(self) -> DataLoader[Any]:
        return self._loader()

    def test_dataloader(self) -> DataLoader[Any]:
        return self._loader()


def cli_main(args: list[str] | None = None, **kwargs: Any) -> LightningCLI:
    """The project's entry point: the model and data classes, as in Lightning's docs."""
    return LightningCLI(TinyModel, TinyData, args=args, **kwargs)


if __name__ == "__main__":
    cli_main()
