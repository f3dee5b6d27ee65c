"""Lightning Fabric's ``lightning.fabric.loggers``: the logger interface, served by trainkit.

``Logger`` is :class:`trainkit.loggers.BaseLogger`, the base of the ``Logger``
that ``trainkit.lightning.loggers`` gives (as Fabric's is the base of Lightning's),
so a logger library's class built from both (``class MyLogger(pl.loggers.Logger,
MyFabricLogger)``) resolves its methods as under Lightning.
"""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import submodule_or_missing
from trainkit.lightning.fabric.loggers.logger import Logger

__all__ = ["Logger"]


def __getattr__(name: str) -> Any:
    return submodule_or_missing(__name__, name, __all__)
