"""Lightning's ``lightning.pytorch.demos.mnist_datamodule.MNIST``: torchvision's MNIST dataset.

Lightning's examples build their data with ``MNIST(root, train=..., download=...,
transform=...)``; here that is ``torchvision.datasets.MNIST`` itself, which reads
(and with ``download=True`` fetches) the files in ``root/MNIST/raw``. Lightning's
``MNISTDataModule`` is not provided: trainkit's MNIST recipe has a data module
(``recipes/mnist``), and docs/porting.md says so.
"""

from __future__ import annotations

from typing import Any

from torch.utils.data import Dataset

from trainkit.lightning._missing import missing

__all__ = ["MNIST"]


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


def __getattr__(name: str) -> Any:
    raise missing(__name__, name, __all__)
