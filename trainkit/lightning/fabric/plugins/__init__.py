"""Lightning Fabric's ``lightning.fabric.plugins``: its ``environments`` submodule, and
the names Lightning's plugins come from there (``CheckpointIO``, ``TorchCheckpointIO``,
``ClusterEnvironment``: the classes of :mod:`trainkit.lightning.plugins`).

Lightning's Trainer takes Fabric's cluster environment classes
(``lightning.pytorch.plugins.environments`` re-exports them), so projects import
them from either path; :mod:`.environments` gives the classes of
:mod:`trainkit.lightning.plugins.environments`.
"""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import submodule_or_missing
from trainkit.lightning.plugins.environments import ClusterEnvironment
from trainkit.lightning.plugins.io import CheckpointIO, TorchCheckpointIO

__all__ = ["CheckpointIO", "ClusterEnvironment", "TorchCheckpointIO"]


def __getattr__(name: str) -> Any:
    # Lightning's submodules reached as attributes, as after importing Lightning.
    return submodule_or_missing(__name__, name, __all__)
