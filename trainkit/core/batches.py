"""Moving a batch to a device: tensors nested in the containers batches come in.

The lowest layer of trainkit's data handling (it imports only torch), so that
the Module's default ``transfer_batch_to_device`` and the strategies share it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

import torch

T = TypeVar("T")


def move_data_to_device(batch: T, device: torch.device | str) -> T:
    """Return ``batch`` with every tensor moved to ``device``.

    Containers (tuple, list, dict, namedtuple, dataclass instances) are rebuilt
    with the same type; objects with a ``to(device)`` method are moved with it;
    anything else is returned as it is.

    Args:
        batch: the batch.
        device: the target device (a ``torch.device`` or its name, e.g. "cuda:0").

    Example:
        >>> import torch
        >>> out = move_data_to_device({"x": [torch.zeros(1)], "n": 3}, torch.device("cpu"))
        >>> out["x"][0].device, out["n"]
        (device(type='cpu'), 3)
    """
    if type(device) is not torch.device:
        device = torch.device(device)
    # Pinned host memory can be copied asynchronously; pageable memory cannot,
    # and non_blocking on it would only add overhead.
    # Fast path for the common case: a tuple or list of tensors already in place
    # (on the CPU, `is_cpu` answers without building a device object).
    if type(batch) is tuple or type(batch) is list:
        cpu = device.type == "cpu"
        for item in batch:  # type: ignore[attr-defined]
            if type(item) is not torch.Tensor or not (
                item.is_cpu if cpu else item.device == device
            ):
                break
        else:
            return batch
    non_blocking = device.type == "cuda"
    return _move(batch, device, non_blocking)  # type: ignore[no-any-return]


def _move(obj: Any, device: torch.device, non_blocking: bool) -> Any:
    if isinstance(obj, torch.Tensor):
        if obj.device == device:
            return obj
        return obj.to(device, non_blocking=non_blocking and obj.is_pinned())
    if isinstance(obj, (str, bytes, int, float, bool)) or obj is None:
        return obj
    if isinstance(obj, tuple):
        items = [_move(item, device, non_blocking) for item in obj]
        if hasattr(obj, "_fields"):  # namedtuple
            return type(obj)(*items)
        return type(obj)(items) if type(obj) is not tuple else tuple(items)
    if isinstance(obj, list):
        return [_move(item, device, non_blocking) for item in obj]
    if isinstance(obj, Mapping):
        moved = {key: _move(value, device, non_blocking) for key, value in obj.items()}
        return moved if type(obj) is dict else _rebuild_mapping(obj, moved)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {
            field.name: _move(getattr(obj, field.name), device, non_blocking)
            for field in dataclasses.fields(obj)
            if field.init
        }
        return dataclasses.replace(obj, **changes)
    to = getattr(obj, "to", None)
    if callable(to):
        return to(device)
    return obj


def _rebuild_mapping(original: Mapping[Any, Any], moved: dict[Any, Any]) -> Any:
    factory: Any = type(original)
    try:
        return factory(moved)
    except TypeError:  # a mapping type whose constructor takes something else
        return moved


class BatchTransferHooks:
    """The batch transfer hooks a Module and a DataModule share (Lightning's names).

    The Trainer runs, for each batch, ``on_before_batch_transfer``, then
    ``transfer_batch_to_device``, then ``on_after_batch_transfer``; each is the
    DataModule's if it overrides it, else the Module's.
    """

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """Change a batch before it is moved to the device; return it.

        Args:
            batch: the batch as the dataloader yields it.
            dataloader_idx: which dataloader it came from (0 in training).
        """
        return batch

    def transfer_batch_to_device(
        self, batch: Any, device: torch.device, dataloader_idx: int
    ) -> Any:
        """Move a batch to ``device``; override for a batch type trainkit cannot move.

        The default moves every tensor nested in tuples, lists, dicts,
        namedtuples and dataclasses, and objects with a ``to(device)`` method.

        Args:
            batch: the batch.
            device: the process's device.
            dataloader_idx: which dataloader it came from (0 in training).
        """
        return move_data_to_device(batch, device)

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """Change a batch once it is on the device (e.g. GPU augmentation); return it.

        Args:
            batch: the batch, on the device.
            dataloader_idx: which dataloader it came from (0 in training).
        """
        return batch
