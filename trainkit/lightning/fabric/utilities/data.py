"""Lightning Fabric's ``lightning.fabric.utilities.data`` names, served by trainkit.

Besides ``AttributeDict`` and ``suggested_max_num_workers``: the loader helpers
projects call (``has_iterable_dataset``, ``sized_len``, ``has_len``, with
Lightning's warnings) and the private ``_update_dataloader``, which rebuilds a
DataLoader around another sampler (trainkit's ``rebuild_dataloader``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from typing import Any

from torch.utils.data import DataLoader, IterableDataset

from trainkit.core.data import num_batches, rebuild_dataloader
from trainkit.core.hyperparameters import AttributeDict
from trainkit.lightning.utilities.data import suggested_max_num_workers

__all__ = [
    "AttributeDict",
    "has_iterable_dataset",
    "has_len",
    "sized_len",
    "suggested_max_num_workers",
]


def has_iterable_dataset(dataloader: object) -> bool:
    """Whether ``dataloader`` reads an ``IterableDataset``.

    Example:
        >>> has_iterable_dataset(DataLoader(range(4)))
        False
    """
    return isinstance(getattr(dataloader, "dataset", None), IterableDataset)


def sized_len(dataloader: object) -> int | None:
    """``len(dataloader)``, or None where it has no length.

    Example:
        >>> sized_len(DataLoader(range(4), batch_size=2)), sized_len(iter([]))
        (2, None)
    """
    count = num_batches(dataloader)  # type: ignore[arg-type]  # len(), or inf without one
    return None if count == math.inf else int(count)


def has_len(dataloader: object) -> bool:
    """Whether ``dataloader`` has a length; warns, as Lightning's does, when it is 0, or
    when an ``IterableDataset`` defines one (with several workers, each yields its own
    copy of the data unless the dataset splits it among them)."""
    length = sized_len(dataloader)
    if length == 0:
        warnings.warn(
            f"`{type(dataloader).__name__}` returned 0 length. Please make sure this was your "
            "intention.",
            UserWarning,
            stacklevel=2,
        )
    if length is not None and has_iterable_dataset(dataloader):
        warnings.warn(
            "Your `IterableDataset` has `__len__` defined. In combination with multi-process "
            "data loading (when num_workers > 1), `__len__` could be inaccurate if each worker "
            "is not configured independently to avoid having duplicate data.",
            UserWarning,
            stacklevel=2,
        )
    return length is not None


def _update_dataloader(dataloader: DataLoader[Any], sampler: Iterable[Any]) -> DataLoader[Any]:
    # Private in Lightning, but called by projects: the loader's settings, another sampler.
    return rebuild_dataloader(dataloader, sampler=sampler)
