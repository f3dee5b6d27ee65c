"""MNIST DataModule: torchvision's MNIST files, normalised once into tensors.

The data root is ``data_dir``, else ``$TRAINKIT_DATA_DIR``, else
``~/.cache/trainkit/data``; the files live in ``<root>/MNIST/raw`` as torchvision
lays them out. Missing files are downloaded; when that is impossible (no
internet) the error names the folder and the four files to put there.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

import trainkit
from trainkit.utilities.messages import UsageError

# The standard MNIST normalisation (mean and std of the training pixels).
MEAN, STD = 0.1307, 0.3081
FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)


class MNISTNotFound(UsageError, FileNotFoundError):
    """The MNIST files are missing and cannot be downloaded; the message says where to put them.

    A :class:`~trainkit.utilities.messages.UsageError`: the ``trainkit`` command prints it
    as one line and exits with status 2.
    """


def default_data_dir() -> Path:
    """``$TRAINKIT_DATA_DIR`` if set, else ``~/.cache/trainkit/data``."""
    return Path(os.environ.get("TRAINKIT_DATA_DIR") or Path.home() / ".cache" / "trainkit" / "data")


class MNISTData(trainkit.DataModule):
    """MNIST: 60,000 training and 10,000 test digits.

    The last ``val_size`` training images form the validation set. Images are
    decoded and normalised once in ``setup``, so a batch costs one index, not
    60,000 PIL conversions an epoch.

    Args:
        data_dir: the data root (see the module docstring).
        batch_size: training batch size.
        eval_batch_size: batch size for validation, test and prediction.
        val_size: training images held out for validation.
        num_workers: DataLoader workers (0 is fastest for in-memory tensors).
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        batch_size: int = 128,
        eval_batch_size: int = 1000,
        val_size: int = 5000,
        num_workers: int = 0,
    ) -> None:
        self.data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.val_size = val_size
        self.num_workers = num_workers

    def prepare_data(self) -> None:
        load_mnist(self.data_dir, train=True)
        load_mnist(self.data_dir, train=False)

    def setup(self, stage: str) -> None:
        images, labels = load_mnist(self.data_dir, train=True)
        split = len(images) - self.val_size
        self.train_set = TensorDataset(images[:split], labels[:split])
        self.val_set = TensorDataset(images[split:], labels[split:])
        self.test_set = TensorDataset(*load_mnist(self.data_dir, train=False))

    def train_dataloader(self) -> DataLoader[Any]:
        return DataLoader(
            self.train_set, batch_size=self.batch_size, shuffle=True, num_workers=self.num_workers
        )

    def val_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.val_set, batch_size=self.eval_batch_size)

    def test_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.test_set, batch_size=self.eval_batch_size)

    def predict_dataloader(self) -> DataLoader[Any]:
        return self.test_dataloader()


def load_mnist(root: Path, train: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Read (downloading if needed) one MNIST split as normalised images and labels.

    Args:
        root: the data root; files are in ``root/MNIST/raw``.
        train: the 60,000-image training split (True) or the test split (False).

    Returns:
        float32 images of shape (N, 1, 28, 28), normalised, and int64 labels.
    """
    from torchvision.datasets import MNIST

    try:
        dataset = MNIST(str(root), train=train, download=False)
    except RuntimeError:  # torchvision: "Dataset not found"
        raw = root / "MNIST" / "raw"
        # torchvision makes the folders before it downloads: a failed download
        # must not leave an empty MNIST/raw behind to puzzle the next look.
        created = [folder for folder in (root, root / "MNIST", raw) if not folder.exists()]
        try:
            dataset = MNIST(str(root), train=train, download=True)
        except Exception as error:
            for folder in reversed(created):
                _remove_if_empty(folder)
            reason = " ".join(f"{type(error).__name__}: {error}".split())
            raise MNISTNotFound(
                f"MNIST is not in {raw} and could not be downloaded ({reason}). Put the four "
                f"files {', '.join(FILES)} (uncompressed) in {raw}, or set TRAINKIT_DATA_DIR "
                "to a folder that has MNIST/raw/ with them."
            ) from error
    images = dataset.data.unsqueeze(1).float().div_(255).sub_(MEAN).div_(STD)
    return images, dataset.targets.long()


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):  # rmdir removes only an empty folder
        folder.rmdir()
