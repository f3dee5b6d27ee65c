"""Lightning Fabric's ``lightning.fabric.utilities.apply_func`` names, served by trainkit."""

from __future__ import annotations

from typing import Any

import torch

from trainkit.core.batches import map_tensors, move_data_to_device

__all__ = ["convert_tensors_to_scalars", "move_data_to_device"]


def convert_tensors_to_scalars(data: Any) -> Any:
    """``data`` with each one-element tensor in it replaced by its Python number.

    Args:
        data: a tensor, or a container of them (dict, list, tuple, dataclass).

    Raises:
        ValueError: a tensor holds more than one element.

    Example:
        >>> import torch
        >>> convert_tensors_to_scalars({"loss": torch.tensor(0.5), "step": 3})
        {'loss': 0.5, 'step': 3}
    """

    def scalar(tensor: torch.Tensor) -> Any:
        if tensor.numel() != 1:
            raise ValueError(
                f"convert_tensors_to_scalars: a tensor of {tensor.numel()} elements (shape "
                f"{tuple(tensor.shape)}) has no single number; reduce it first (e.g. .mean())."
            )
        return tensor.item()

    return map_tensors(data, scalar)
