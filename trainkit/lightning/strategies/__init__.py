"""Lightning's ``lightning.pytorch.strategies`` names, served by trainkit.

``Strategy``, ``SingleDeviceStrategy`` and ``StrategyRegistry`` are trainkit's
own; ``DDPStrategy``, ``FSDPStrategy`` and ``ModelParallelStrategy`` are
trainkit's strategies taking Lightning's constructor arguments (see each class),
imported on first use: ``import trainkit.lightning`` does not load
``torch.distributed``'s FSDP.
"""

from __future__ import annotations

import importlib
from typing import Any

from trainkit.lightning._missing import submodule_or_missing
from trainkit.strategies.base import Strategy
from trainkit.strategies.registry import StrategyRegistry
from trainkit.strategies.single import SingleDeviceStrategy

__all__ = [
    "DDPStrategy",
    "FSDPStrategy",
    "ModelParallelStrategy",
    "ParallelStrategy",
    "SingleDeviceStrategy",
    "Strategy",
    "StrategyRegistry",
]

_ON_USE = {
    "DDPStrategy": "trainkit.lightning.strategies.ddp",
    "FSDPStrategy": "trainkit.lightning.strategies.fsdp",
    "ModelParallelStrategy": "trainkit.lightning.strategies.model_parallel",
    "ParallelStrategy": "trainkit.lightning.strategies.parallel",
}


def __getattr__(name: str) -> Any:
    if name in _ON_USE:
        return getattr(importlib.import_module(_ON_USE[name]), name)
    return submodule_or_missing(__name__, name, __all__)
