"""Moving a batch to a device: tensors nested in the containers batches come in.

The lowest layer of trainkit's data handling (it imports only torch), so that
the Module's default ``transfer_batch_to_device`` and the strategies share it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import torch

T = TypeVar("T")


def move_data_to_device(batch: T, device: torch.device | str) -> T:
    """Return ``batch`` with every tensor moved to ``device``.

    Objects with a ``to(device)`` method are moved with it, containers among them
    (a dataclass with its own ``to``, a ``BatchEncoding``): as in Lightning, the
    object's own method decides, and one that moves in place and returns None is
    kept. Other containers (tuple, list, dict, namedtuple, dataclass instances) are
    rebuilt with the same type; anything else is returned as it is.

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

    def move(tensor: torch.Tensor) -> torch.Tensor:
        if tensor.device == device:
            return tensor
        return tensor.to(device, non_blocking=non_blocking and tensor.is_pinned())

    def move_object(obj: Any) -> Any:
        to = getattr(obj, "to", None)
        if not callable(to):
            return obj
        moved = to(device)
        return obj if moved is None else moved  # None: it moved itself in place

    return _map_tensors(batch, move, move_object, own_to=True)  # type: ignore[no-any-return]


def convert_floating(batch: T, dtype: torch.dtype) -> T:
    """Return ``batch`` with every floating-point tensor cast to ``dtype``.

    Integer and boolean tensors (labels, masks) and anything that is not a tensor
    are left as they are; containers are rebuilt as :func:`move_data_to_device`
    rebuilds them. ``precision="64-true"`` casts each batch so.

    Args:
        batch: the batch.
        dtype: the floating dtype, e.g. ``torch.float64``.

    Example:
        >>> import torch
        >>> x, y = convert_floating((torch.zeros(2), torch.tensor([1, 0])), torch.float64)
        >>> x.dtype, y.dtype
        (torch.float64, torch.int64)
    """

    def cast(tensor: torch.Tensor) -> torch.Tensor:
        if tensor.is_floating_point() and tensor.dtype != dtype:
            return tensor.to(dtype)
        return tensor

    return _map_tensors(batch, cast, lambda obj: obj)  # type: ignore[no-any-return]


def map_tensors(obj: Any, on_tensor: Callable[[torch.Tensor], Any]) -> Any:
    """``obj`` with each nested tensor replaced by ``on_tensor(tensor)``.

    Containers are rebuilt as :func:`move_data_to_device` rebuilds them; anything
    else is kept as it is.

    Args:
        obj: a tensor, or a container of them (tuple, list, dict, namedtuple, dataclass).
        on_tensor: what each tensor becomes.

    Example:
        >>> import torch
        >>> map_tensors({"loss": torch.tensor(0.5), "steps": [torch.tensor(3)]}, torch.Tensor.item)
        {'loss': 0.5, 'steps': [3]}
    """
    return _map_tensors(obj, on_tensor, lambda other: other)


def _map_tensors(
    obj: Any,
    on_tensor: Callable[[torch.Tensor], Any],
    on_other: Callable[[Any], Any],
    own_to: bool = False,
) -> Any:
    """``obj`` with ``on_tensor`` applied to each nested tensor and ``on_other`` to each
    object that is neither a tensor, a container nor a plain value (with ``own_to``,
    also to each object whose class has a ``to`` method, containers included)."""
    if isinstance(obj, torch.Tensor):
        return on_tensor(obj)
    if isinstance(obj, (str, bytes, int, float, bool)) or obj is None:
        return obj
    if own_to and callable(getattr(type(obj), "to", None)):
        return on_other(obj)
    if isinstance(obj, tuple):
        items = [_map_tensors(item, on_tensor, on_other, own_to) for item in obj]
        if hasattr(obj, "_fields"):  # namedtuple
            return type(obj)(*items)
        return type(obj)(items) if type(obj) is not tuple else tuple(items)
    if isinstance(obj, list):
        return [_map_tensors(item, on_tensor, on_other, own_to) for item in obj]
    if isinstance(obj, Mapping):
        mapped = {
            key: _map_tensors(value, on_tensor, on_other, own_to) for key, value in obj.items()
        }
        return mapped if type(obj) is dict else _rebuild_mapping(obj, mapped)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {
            field.name: _map_tensors(getattr(obj, field.name), on_tensor, on_other, own_to)
            for field in dataclasses.fields(obj)
            if field.init
        }
        return dataclasses.replace(obj, **changes)
    return on_other(obj)


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
