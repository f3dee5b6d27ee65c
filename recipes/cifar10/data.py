"""CIFAR-10 DataModule: torchvision's CIFAR-10 files with the standard augmentation.

The data root is ``data_dir``, else ``$TRAINKIT_DATA_DIR``, else
``~/.cache/trainkit/data``; the files live in ``<root>/cifar-10-batches-py`` as
torchvision lays them out, and torchvision checks their MD5 sums. Missing files
are downloaded by ``prepare_data``; when that is impossible (no internet) the
error names the folder and the files to put there.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, Subset

import trainkit
from recipes.mnist.data import default_data_dir

# Per-channel mean and std of the 50,000 training images, in [0, 1] pixel units.
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)
FOLDER = "cifar-10-batches-py"
FILES = (
    "data_batch_1",
    "data_batch_2",
    "data_batch_3",
    "data_batch_4",
    "data_batch_5",
    "test_batch",
    "batches.meta",
)
# Seeds the train/validation split, so every run (and every DDP rank) holds out
# the same images whatever the global seed.
SPLIT_SEED = 0

Transform = Callable[[Any], torch.Tensor]


def train_transform() -> Transform:
    """Random 32x32 crop of the reflect-padded image, random horizontal flip, normalise."""
    from torchvision import transforms

    return transforms.Compose(  # type: ignore[no-any-return]
        [
            transforms.RandomCrop(32, padding=4, padding_mode="reflect"),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(MEAN, STD),
        ]
    )


def eval_transform() -> Transform:
    """Tensor conversion and normalisation only: evaluation sees every image as it is."""
    from torchvision import transforms

    return transforms.Compose(  # type: ignore[no-any-return]
        [transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
    )


class CIFAR10Data(trainkit.DataModule):
    """CIFAR-10: 50,000 training and 10,000 test colour images of 10 classes.

    ``val_size`` training images, picked at random with a fixed seed, form the
    validation set; they are seen with the evaluation transform (no
    augmentation), the rest with the training transform.

    Args:
        data_dir: the data root (see the module docstring).
        batch_size: training batch size.
        eval_batch_size: batch size for validation, test and prediction.
        num_workers: DataLoader worker processes (augmentation runs in them).
        val_size: training images held out for validation.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        batch_size: int = 512,
        eval_batch_size: int = 1024,
        num_workers: int = 4,
        val_size: int = 5000,
    ) -> None:
        if val_size < 0:
            raise ValueError(f"CIFAR10Data(val_size={val_size}) must be 0 or more.")
        self.data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.num_workers = num_workers
        self.val_size = val_size

    def prepare_data(self) -> None:
        # Opening the (smaller) test split checks every file's MD5 sum, and
        # downloads the whole archive when any is missing or damaged.
        load_cifar10(self.data_dir, train=False, transform=None, download=True)

    def setup(self, stage: str) -> None:
        # No downloads here: setup runs in every process, and prepare_data has
        # already fetched the files once per node.
        if stage in ("fit", "validate"):
            # Two dataset objects over the same files, so that the held-out images
            # get the evaluation transform while the rest are augmented.
            augmented = load_cifar10(self.data_dir, train=True, transform=train_transform())
            plain = load_cifar10(self.data_dir, train=True, transform=eval_transform())
            if self.val_size >= len(plain):
                raise ValueError(
                    f"CIFAR10Data(val_size={self.val_size}) leaves no training images: the "
                    f"training split has {len(plain)}. Use a smaller val_size."
                )
            generator = torch.Generator().manual_seed(SPLIT_SEED)
            order = torch.randperm(len(plain), generator=generator).tolist()
            self.val_set: Dataset[Any] = Subset(plain, order[: self.val_size])
            self.train_set: Dataset[Any] = Subset(augmented, order[self.val_size :])
        if stage in ("test", "predict"):
            self.test_set: Dataset[Any] = load_cifar10(
                self.data_dir, train=False, transform=eval_transform()
            )

    def _loader(self, dataset: Dataset[Any], batch_size: int, shuffle: bool) -> DataLoader[Any]:
        # Workers are not persistent: each epoch's workers are seeded from the main
        # process's RNG, which checkpoints restore, so a resumed run augments alike.
        return DataLoader(
            dataset,
            batch_size=batch_size,
            shuffle=shuffle,
            num_workers=self.num_workers,
            pin_memory=torch.cuda.is_available(),
        )

    def train_dataloader(self) -> DataLoader[Any]:
        return self._loader(self.train_set, self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader[Any]:
        return self._loader(self.val_set, self.eval_batch_size, shuffle=False)

    def test_dataloader(self) -> DataLoader[Any]:
        return self._loader(self.test_set, self.eval_batch_size, shuffle=False)

    def predict_dataloader(self) -> DataLoader[Any]:
        return self.test_dataloader()


def load_cifar10(
    root: Path, train: bool, transform: Transform | None, download: bool = False
) -> Any:
    """Open one CIFAR-10 split, downloading the files first if asked and needed.

    Args:
        root: the data root; the files are in ``root/cifar-10-batches-py``.
        train: the 50,000-image training split (True) or the test split (False).
        transform: applied to each PIL image (None: return PIL images).
        download: fetch the archive when a file is missing or fails its MD5 check.

    Returns:
        A ``torchvision.datasets.CIFAR10`` yielding ``(image, label)`` pairs.

    Raises:
        FileNotFoundError: a file is missing or damaged (and could not be
            downloaded); the message names the folder and the files it needs.
    """
    from torchvision.datasets import CIFAR10

    try:
        return CIFAR10(str(root), train=train, transform=transform, download=False)
    except RuntimeError as error:  # torchvision: "Dataset not found or corrupted"
        if not download:
            raise _missing(
                root, "Call prepare_data() to download it (the Trainer does)."
            ) from error
    try:
        return CIFAR10(str(root), train=train, transform=transform, download=True)
    except Exception as error:
        raise _missing(
            root, f"It could not be downloaded ({type(error).__name__}: {error})."
        ) from error


def _missing(root: Path, cause: str) -> FileNotFoundError:
    folder = root / FOLDER
    return FileNotFoundError(
        f"CIFAR-10 is missing or damaged in {folder}. {cause} To supply it by hand, put the files "
        f"{', '.join(FILES)} (the python version, cifar-10-python.tar.gz, unpacked) in "
        f"{folder}, or set TRAINKIT_DATA_DIR to a folder that has {FOLDER}/ with them."
    )
