"""Lightning's ``lightning.pytorch.demos.boring_classes``: small models and random data.

Projects and their tests subclass these to try a feature in a few lines: a
``BoringModel`` is a linear layer from 32 features to 2 trained towards ones on
random inputs, with its own dataloaders; the datasets hold random tensors of
``size`` features. The shapes, defaults and return values are Lightning's
documented ones, so a ported test that counts batches or reads outputs sees the
same numbers.

Example:
    >>> import trainkit.lightning as L
    >>> trainer = L.Trainer(max_epochs=1, limit_train_batches=2, limit_val_batches=2,
    ...                     logger=False, enable_checkpointing=False,
    ...                     enable_progress_bar=False, enable_model_summary=False)
    >>> trainer.fit(BoringModel())
    >>> trainer.global_step
    2
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, IterableDataset, Subset

from trainkit.core.data import DataModule
from trainkit.core.module import Module

__all__ = [
    "BoringDataModule",
    "BoringDataModuleNoLen",
    "BoringModel",
    "DemoModel",
    "IterableBoringDataModule",
    "ManualOptimBoringModel",
    "RandomDataset",
    "RandomDictDataset",
    "RandomIterableDataset",
    "RandomIterableDatasetWithLen",
]


class RandomDataset(Dataset[torch.Tensor]):
    """``length`` random vectors of ``size`` features (drawn once, from the global RNG).

    Args:
        size: features per sample.
        length: number of samples.
    """

    def __init__(self, size: int, length: int) -> None:
        self.len = length
        self.data = torch.randn(length, size)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.data[index]

    def __len__(self) -> int:
        return self.len


class RandomDictDataset(RandomDataset):
    """As :class:`RandomDataset`, each sample a dict ``{"a": x, "b": x + 2}``."""

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:  # type: ignore[override]
        sample = self.data[index]
        return {"a": sample, "b": sample + 2}


class RandomIterableDataset(IterableDataset[torch.Tensor]):
    """``count`` random vectors of ``size`` features, drawn as they are iterated; no length.

    Args:
        size: features per sample.
        count: number of samples.
    """

    def __init__(self, size: int, count: int) -> None:
        self.count = count
        self.size = size

    def __iter__(self) -> Iterator[torch.Tensor]:
        for _ in range(self.count):
            yield torch.randn(self.size)


class RandomIterableDatasetWithLen(RandomIterableDataset):
    """As :class:`RandomIterableDataset`, with a length."""

    def __len__(self) -> int:
        return self.count


class BoringModel(Module):
    """A linear layer (32 -> 2) trained with SGD (lr 0.1, StepLR) towards ones.

    ``training_step`` returns ``{"loss": ...}``, ``validation_step`` ``{"x": ...}``
    and ``test_step`` ``{"y": ...}``; each dataloader holds 64 random samples in
    batches of one. Subclass it and override what a test is about.
    """

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(32, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output: torch.Tensor = self.layer(x)
        return output

    def loss(self, preds: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        """Mean squared error towards ``labels`` (ones when None)."""
        if labels is None:
            labels = torch.ones_like(preds)
        return nn.functional.mse_loss(preds, labels)

    def step(self, batch: Any) -> torch.Tensor:
        """The loss of one batch."""
        return self.loss(self(batch))

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        return {"loss": self.step(batch)}

    def validation_step(self, batch: Any, batch_idx: int) -> Any:
        return {"x": self.step(batch)}

    def test_step(self, batch: Any, batch_idx: int) -> Any:
        return {"y": self.step(batch)}

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
        return [optimizer], [scheduler]

    def train_dataloader(self) -> DataLoader[Any]:
        return DataLoader(RandomDataset(32, 64))

    def val_dataloader(self) -> DataLoader[Any]:
        return DataLoader(RandomDataset(32, 64))

    def test_dataloader(self) -> DataLoader[Any]:
        return DataLoader(RandomDataset(32, 64))

    def predict_dataloader(self) -> DataLoader[Any]:
        return DataLoader(RandomDataset(32, 64))


class ManualOptimBoringModel(BoringModel):
    """:class:`BoringModel` with manual optimization: each step zeroes, backpropagates, steps."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        optimizer = self.optimizers()
        loss = self.step(batch)
        optimizer.zero_grad()
        self.manual_backward(loss)
        optimizer.step()
        return loss


class DemoModel(Module):
    """A one-layer model (32 -> ``out_dim``, ReLU) whose loss is its output's sum, with Adam.

    Args:
        out_dim: output features.
        learning_rate: Adam's learning rate.
    """

    def __init__(self, out_dim: int = 10, learning_rate: float = 0.02) -> None:
        super().__init__()
        self.l1 = nn.Linear(32, out_dim)
        self.learning_rate = learning_rate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.l1(x.view(x.size(0), -1)))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        output: torch.Tensor = self(batch)
        return output.sum()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.learning_rate)


class BoringDataModule(DataModule):
    """256 random samples of 32 features, split into train/val/test/predict sets of 64."""

    def __init__(self) -> None:
        super().__init__()
        self.random_full = RandomDataset(32, 64 * 4)

    def setup(self, stage: str) -> None:
        if stage == "fit":
            self.random_train = Subset(self.random_full, list(range(64)))
        if stage in ("fit", "validate"):
            self.random_val = Subset(self.random_full, list(range(64, 64 * 2)))
        if stage == "test":
            self.random_test = Subset(self.random_full, list(range(64 * 2, 64 * 3)))
        if stage == "predict":
            self.random_predict = Subset(self.random_full, list(range(64 * 3, 64 * 4)))

    def train_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.random_train)

    def val_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.random_val)

    def test_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.random_test)

    def predict_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.random_predict)


class BoringDataModuleNoLen(BoringDataModule):
    """As :class:`BoringDataModule`, its datasets iterable and without a length."""

    def setup(self, stage: str) -> None:
        for name in ("random_train", "random_val", "random_test", "random_predict"):
            setattr(self, name, RandomIterableDataset(32, 64))


class IterableBoringDataModule(BoringDataModule):
    """As :class:`BoringDataModule`, its datasets iterable with a length."""

    def setup(self, stage: str) -> None:
        for name in ("random_train", "random_val", "random_test", "random_predict"):
            setattr(self, name, RandomIterableDatasetWithLen(32, 64))
