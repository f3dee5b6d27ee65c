"""Lightning's ``lightning.pytorch.plugins`` names that trainkit accepts.

The cluster environments (:mod:`trainkit.lightning.plugins.environments`), and the
precision, layer-sync and checkpoint-IO plugins (``.precision``, ``.layer_sync``,
``.io``): each stands for a trainkit option
(``precision=``, ``sync_batchnorm=True``, trainkit's own checkpoint files), so a
project passing them runs unchanged; a subclass of one is refused, saying why.
docs/porting.md lists what ports and what does not.
"""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import submodule_or_missing
from trainkit.lightning.plugins.environments import (
    ClusterEnvironment,
    LightningEnvironment,
    SLURMEnvironment,
    TorchElasticEnvironment,
)
from trainkit.lightning.plugins.io import AsyncCheckpointIO, CheckpointIO, TorchCheckpointIO
from trainkit.lightning.plugins.layer_sync import LayerSync, TorchSyncBatchNorm
from trainkit.lightning.plugins.precision import (
    DoublePrecision,
    FSDPPrecision,
    HalfPrecision,
    MixedPrecision,
    Precision,
)

__all__ = [
    "AsyncCheckpointIO",
    "CheckpointIO",
    "ClusterEnvironment",
    "DoublePrecision",
    "FSDPPrecision",
    "HalfPrecision",
    "LayerSync",
    "LightningEnvironment",
    "MixedPrecision",
    "Precision",
    "SLURMEnvironment",
    "TorchCheckpointIO",
    "TorchElasticEnvironment",
    "TorchSyncBatchNorm",
]


def __getattr__(name: str) -> Any:
    return submodule_or_missing(__name__, name, __all__)
