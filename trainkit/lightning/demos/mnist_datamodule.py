"""Lightning's ``lightning.pytorch.demos.mnist_datamodule``: the MNIST dataset and data module.

Lightning's examples build their data with ``MNIST(root, train=..., download=...,
transform=...)``; here that is ``torchvision.datasets.MNIST`` itself, which reads
(and with ``download=True`` fetches) the files in ``root/MNIST/raw``.
:class:`MNISTDataModule` takes Lightning's demo arguments and splits the training
images into training and validation sets. Both need torchvision.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, random_split

from trainkit.core.data import DataModule
from trainkit.lightning._missing import missing

__all__ = ["MNIST", "MNISTDataModule"]

#: MNIST's mean and standard deviation, for ``normalize=True``.
MNIST_MEAN_STD = (0.1307, 0.3081)


def MNIST(*args: Any, **kwargs: Any) -> Dataset[Any]:
    """``torchvision.datasets.MNIST(*args, **kwargs)``.

    Raises:
        ModuleNotFoundError: torchvision is not installed.
    """
    try:
        from torchvision.datasets import MNIST as TorchvisionMNIST
    except ImportError as error:
        raise ModuleNotFoundError(
            "The MNIST demo dataset needs torchvision: pip install torchvision"
        ) from error
    return TorchvisionMNIST(*args, **kwargs)  # type: ignore[no-any-return]


class MNISTDataModule(DataModule):
    """MNIST's training images split into training and validation sets, and its test set.

    Images are ``[1, 28, 28]`` float tensors in ``[0, 1]`` (standardised with
    ``normalize=True``); labels are ints.

    Args:
        data_dir: the folder holding ``MNIST/raw`` (None: ``$TRAINKIT_DATA_DIR``, else
            ``./data``); ``prepare_data`` downloads the files there if they are missing.
        val_split: training images set aside for validation.
        num_workers: DataLoader worker processes.
        normalize: standardise the images with MNIST's mean and standard deviation.
        seed: seeds the training/validation split (the same split on every process).
        batch_size: images per batch.
    """

    name = "mnist"

    def __init__(
        self,
        data_dir: str | None = None,
        val_split: int = 5000,
        num_workers: int = 16,
        normalize: bool = False,
        seed: int = 42,
        batch_size: int = 32,
    ) -> None:
        super().__init__()
        self.data_dir = data_dir or os.environ.get("TRAINKIT_DATA_DIR") or "data"
        self.val_split = val_split
        self.num_workers = num_workers
        self.normalize = normalize
        self.seed = seed
        self.batch_size = batch_size

    @property
    def num_classes(self) -> int:
        """Ten digits."""
        return 10

    @property
    def default_transforms(self) -> Any:
        """Image to tensor, then standardisation when ``normalize`` is set."""
        from torchvision import transforms

        steps: list[Any] = [transforms.ToTensor()]
        if self.normalize:
            steps.append(transforms.Normalize((MNIST_MEAN_STD[0],), (MNIST_MEAN_STD[1],)))
        return transforms.Compose(steps)

    def prepare_data(self) -> None:
        """Download the training and test files into ``data_dir`` if they are not there."""
        MNIST(self.data_dir, train=True, download=True)
        MNIST(self.data_dir, train=False, download=True)

    def setup(self, stage: str) -> None:
        """Split the training images: ``val_split`` of them, drawn with ``seed``, validate."""
        images = MNIST(self.data_dir, train=True, transform=self.default_transforms)
        kept = len(images) - self.val_split  # type: ignore[arg-type]
        generator = torch.Generator().manual_seed(self.seed)
        self.dataset_train, self.dataset_val = random_split(
            images, [kept, self.val_split], generator=generator
        )

    def _loader(self, dataset: Dataset[Any], training: bool) -> DataLoader[Any]:
        return DataLoader(
            dataset,
            batch_size=self.batch_size,
            shuffle=training,
            num_workers=self.num_workers,
            drop_last=training,  # evaluation reads every image
            pin_memory=torch.cuda.is_available(),
        )

    def train_dataloader(self) -> DataLoader[Any]:
        """The training images, shuffled each epoch (an incomplete last batch dropped)."""
        return self._loader(self.dataset_train, training=True)

    def val_dataloader(self) -> DataLoader[Any]:
        """The validation images set aside from the training set, every one of them."""
        return self._loader(self.dataset_val, training=False)

    def test_dataloader(self) -> DataLoader[Any]:
        """MNIST's 10,000 test images."""
        test = MNIST(self.data_dir, train=False, transform=self.default_transforms)
        return self._loader(test, training=False)


def __getattr__(name: str) -> Any:
    raise missing(__name__, name, __all__)
