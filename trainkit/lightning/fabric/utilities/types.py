"""Lightning Fabric's ``lightning.fabric.utilities.types`` aliases, for annotations.

Projects annotate paths and devices with these (``_PATH``, ``_DEVICE``,
``_MAP_LOCATION_TYPE``); they mean what Lightning's mean.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeAlias

import torch

_PATH: TypeAlias = str | Path
_DEVICE: TypeAlias = torch.device | str | int
_MAP_LOCATION_TYPE: TypeAlias = (
    _DEVICE
    | Callable[[torch.UntypedStorage, str], torch.UntypedStorage | None]
    | dict[_DEVICE, _DEVICE]
    | None
)

__all__ = ["_DEVICE", "_MAP_LOCATION_TYPE", "_PATH"]
